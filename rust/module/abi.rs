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
#[path = "../abi/src/blocks.rs"]
pub(crate) mod blocks;
#[path = "../abi/src/conn.rs"]
pub(crate) mod conn;
#[path = "../abi/src/errno.rs"]
pub(crate) mod errno;
#[path = "../abi/src/handle.rs"]
pub(crate) mod handle;
#[path = "../abi/src/info.rs"]
pub(crate) mod info;
#[path = "../abi/src/ioctl.rs"]
pub(crate) mod ioctl;
#[path = "../abi/src/ops.rs"]
pub(crate) mod ops;
#[path = "../abi/src/region.rs"]
pub(crate) mod region;
#[path = "../abi/src/ring.rs"]
pub(crate) mod ring;
#[path = "../abi/src/uapi.rs"]
pub(crate) mod uapi;
#[path = "../abi/src/wire.rs"]
pub(crate) mod wire;

/// Converts an errno from the pure rules into a kernel error.
pub(crate) fn error(errno: errno::Errno) -> kernel::error::Error {
    kernel::error::Error::from_errno(-errno)
}
