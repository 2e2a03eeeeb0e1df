// SPDX-License-Identifier: GPL-2.0 OR MIT

//! librrdma: the C API of rrdma (`include/rrdma.h`, generated from this
//! crate by cbindgen), a thin layer over the Rust library.
//!
//! Conventions, the same in every function:
//! - a function returning `int` returns 0 (or a count) on success and a
//!   negative errno on failure, and also sets `errno`;
//! - a function returning a pointer returns NULL on failure, with `errno`
//!   set;
//! - a timeout in milliseconds waits forever when negative and not at all
//!   when 0, but where a function says otherwise (connect and import take
//!   the kernel's default for 0 or negative);
//! - every object belongs to the `struct rrdma` it was made from, which
//!   cannot be closed (`EBUSY`) while any of its objects lives;
//! - a `struct rrdma` and its objects may be used from several threads at
//!   once, but an object must not be destroyed while another thread uses
//!   it (as with libibverbs); a `struct rrdma_uring` is one thread's at a
//!   time (as a liburing ring).
//!
//! The ops and completions are the UAPI's own `struct rrdma_op` and
//! `struct rrdma_completion` (`<linux/rrdma.h>`), so that an array of ops
//! goes to the kernel as it is.
//!
//! One file per concern: `device.rs` (open, close, the object count),
//! `region.rs`, `conn.rs` (listen, accept, connect), `share.rs` (export,
//! import, block devices), `ops.rs` (ops, submit, completions, the
//! synchronous calls), `uring.rs` (io_uring helpers).

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int};
use std::io;

mod conn;
mod device;
mod ops;
mod region;
mod share;
mod uring;

/// The errno of `e`: the kernel's, or one for the library's own refusals.
fn errno_of(e: &io::Error) -> c_int {
    // The Rust library adds a hint to some errors (open's "is rrdma.ko
    // loaded?"), which keeps their kind but not their errno.
    rrdma_lib::errno(e).unwrap_or(match e.kind() {
        io::ErrorKind::NotFound => libc::ENOENT,
        io::ErrorKind::PermissionDenied => libc::EACCES,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        io::ErrorKind::OutOfMemory => libc::ENOMEM,
        io::ErrorKind::WouldBlock => libc::EAGAIN,
        io::ErrorKind::TimedOut => libc::ETIMEDOUT,
        io::ErrorKind::Interrupted => libc::EINTR,
        io::ErrorKind::Unsupported => libc::EOPNOTSUPP,
        _ => libc::EIO,
    })
}

fn set_errno(n: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno.
    unsafe { *libc::__errno_location() = n };
}

/// `-errno` of `e`, with errno set: what an `int` function returns on
/// failure.
fn fail(e: io::Error) -> c_int {
    let n = errno_of(&e);
    set_errno(n);
    -n
}

/// NULL, with errno set from `e`: what a constructor returns on failure.
fn fail_null<T>(e: io::Error) -> *mut T {
    set_errno(errno_of(&e));
    std::ptr::null_mut()
}

/// The result of an `int` function: the count, or `-errno`.
fn ret(r: io::Result<c_int>) -> c_int {
    r.unwrap_or_else(fail)
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// A timeout in milliseconds as the Rust library takes it: `None` for a
/// negative one (forever).
fn timeout(ms: c_int) -> Option<std::time::Duration> {
    u64::try_from(ms).ok().map(std::time::Duration::from_millis)
}

/// The library's version, `"MAJOR.MINOR.PATCH"`, a static string.
#[no_mangle]
pub extern "C" fn rrdma_version() -> *const c_char {
    const V: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    V.as_ptr().cast()
}
