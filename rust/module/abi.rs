// SPDX-License-Identifier: GPL-2.0

//! The pure ABI rules, compiled from the same files as the `rrdma-abi` crate.
//!
//! `rust/abi/src/*.rs` is `no_std`, dependency-free and refers to its
//! siblings through `super::`, so it builds here as submodules of `abi` and
//! on the host as a crate with `cargo test` and proptest. Not every item is
//! used by the module, hence the `allow`s.

#![allow(dead_code, unreachable_pub)]

#[macro_use]
#[path = "../abi/src/codec.rs"]
pub(crate) mod codec;
#[path = "../abi/src/backlog.rs"]
pub(crate) mod backlog;
#[path = "../abi/src/blkdev.rs"]
pub(crate) mod blkdev;
#[path = "../abi/src/blocks.rs"]
pub(crate) mod blocks;
#[path = "../abi/src/caps.rs"]
pub(crate) mod caps;
#[path = "../abi/src/conn.rs"]
pub(crate) mod conn;
#[path = "../abi/src/errno.rs"]
pub(crate) mod errno;
#[path = "../abi/src/gather.rs"]
pub(crate) mod gather;
#[path = "../abi/src/handle.rs"]
pub(crate) mod handle;
#[path = "../abi/src/info.rs"]
pub(crate) mod info;
#[path = "../abi/src/ioctl.rs"]
pub(crate) mod ioctl;
#[path = "../abi/src/keepalive.rs"]
pub(crate) mod keepalive;
#[path = "../abi/src/limits.rs"]
pub(crate) mod limits;
#[path = "../abi/src/ops.rs"]
pub(crate) mod ops;
#[path = "../abi/src/poll.rs"]
pub(crate) mod poll;
#[path = "../abi/src/reconnect.rs"]
pub(crate) mod reconnect;
#[path = "../abi/src/region.rs"]
pub(crate) mod region;
#[path = "../abi/src/ring.rs"]
pub(crate) mod ring;
#[path = "../abi/src/sent.rs"]
pub(crate) mod sent;
#[path = "../abi/src/status.rs"]
pub(crate) mod status;
#[path = "../abi/src/uapi.rs"]
pub(crate) mod uapi;
#[path = "../abi/src/wc.rs"]
pub(crate) mod wc;
#[path = "../abi/src/wire.rs"]
pub(crate) mod wire;

/// The module's result type: one error type, [`errno::Errno`], everywhere
/// but the kernel's own traits (`kernel::Module::init`).
pub(crate) type Result<T = (), E = errno::Errno> = core::result::Result<T, E>;

impl From<errno::Errno> for kernel::error::Error {
    fn from(e: errno::Errno) -> Self {
        kernel::error::Error::from_errno(-e.get())
    }
}

impl From<kernel::error::Error> for errno::Errno {
    fn from(e: kernel::error::Error) -> Self {
        // A kernel `Error` holds an errno in 1..=MAX_ERRNO (negated): the
        // fallback is never taken.
        errno::Errno::new(-e.to_errno()).unwrap_or(errno::EIO)
    }
}

impl From<kernel::alloc::AllocError> for errno::Errno {
    fn from(_: kernel::alloc::AllocError) -> Self {
        errno::ENOMEM
    }
}

impl From<core::convert::Infallible> for errno::Errno {
    fn from(e: core::convert::Infallible) -> Self {
        match e {}
    }
}

/// The result of a C call that returns 0 or a negative errno.
pub(crate) fn to_result(ret: kernel::ffi::c_int) -> Result {
    match ret {
        0 => Ok(()),
        // Not an errno (positive, or below -MAX_ERRNO): an I/O error.
        _ => Err(errno::Errno::new(-ret).unwrap_or(errno::EIO)),
    }
}

impl errno::Errno {
    /// The negative errno the kernel's C interfaces return.
    pub(crate) fn to_errno(self) -> kernel::ffi::c_int {
        -self.get()
    }
}
