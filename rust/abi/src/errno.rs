// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Linux errno values used by the ABI rules.
//!
//! The pure code returns these as positive numbers; the kernel side turns
//! them into `kernel::error::Error` and userspace compares them with
//! `errno` from the failed `ioctl(2)`.

/// Bad address: a user pointer could not be read or written.
pub const EFAULT: i32 = 14;
/// Argument list too long: a larger struct than known with a non-zero tail.
pub const E2BIG: i32 = 7;
/// Invalid argument: a reserved field, unknown flag or bad value.
pub const EINVAL: i32 = 22;
/// Inappropriate ioctl for device: unknown command.
pub const ENOTTY: i32 = 25;
/// Value too large: arithmetic on user-supplied numbers overflowed.
pub const EOVERFLOW: i32 = 75;
/// No such device: the RDMA device is going away.
pub const ENODEV: i32 = 19;
/// Out of memory.
pub const ENOMEM: i32 = 12;

/// An errno as returned by the ABI rules (always positive).
pub type Errno = i32;
