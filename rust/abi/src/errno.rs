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
/// Result out of range: a block range outside its region.
pub const ERANGE: i32 = 34;
/// Protocol error: a malformed message from the peer.
pub const EPROTO: i32 = 71;
/// Protocol not supported: the peer speaks no version we know.
pub const EPROTONOSUPPORT: i32 = 93;
/// Operation not permitted.
pub const EPERM: i32 = 1;
/// No such object: a handle that names nothing (0, stale, destroyed).
pub const ENOENT: i32 = 2;
/// No such device or address: an mmap offset that names no region.
pub const ENXIO: i32 = 6;
/// No space left: a table or the mmap offset space is full.
pub const ENOSPC: i32 = 28;
/// Network unreachable.
pub const ENETUNREACH: i32 = 101;
/// Connection aborted: the QP failed (e.g. a peer's access error).
pub const ECONNABORTED: i32 = 103;
/// Connection reset: the peer went away.
pub const ECONNRESET: i32 = 104;
/// Connection timed out.
pub const ETIMEDOUT: i32 = 110;
/// Connection refused: the peer rejected us.
pub const ECONNREFUSED: i32 = 111;
/// No route to host.
pub const EHOSTUNREACH: i32 = 113;
/// Out of memory.
pub const ENOMEM: i32 = 12;

/// Permission denied: the peer's NIC refused the access.
pub const EACCES: i32 = 13;
/// Device or resource busy.
pub const EBUSY: i32 = 16;
/// Try again: queues full, or nothing to wait for without blocking.
pub const EAGAIN: i32 = 11;
/// Interrupted by a signal.
pub const EINTR: i32 = 4;
/// I/O error.
pub const EIO: i32 = 5;
/// Transport endpoint is not connected.
pub const ENOTCONN: i32 = 107;
/// Operation canceled: flushed by a disconnect or close.
pub const ECANCELED: i32 = 125;
/// Key has been revoked: the export was unexported.
pub const EKEYREVOKED: i32 = 128;
/// Address family not supported.
pub const EAFNOSUPPORT: i32 = 97;
/// Address already in use.
pub const EADDRINUSE: i32 = 98;
/// Cannot assign the requested address: no free local port.
pub const EADDRNOTAVAIL: i32 = 99;

/// An errno as returned by the ABI rules (always positive).
pub type Errno = i32;
