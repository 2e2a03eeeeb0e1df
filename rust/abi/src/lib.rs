// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The `/dev/rrdma` ABI and the pure rules that validate it.
//!
//! This crate is `no_std` and has no dependencies so that the kernel module
//! can compile the very same files (through `#[path]` modules in
//! `rust/module/abi.rs`) while userspace and the host tests use it as a
//! normal crate. Sibling modules refer to each other through `super::` so
//! that both ways of including them resolve.
//!
//! `include/uapi/rrdma.h` is the normative definition; [`uapi`] mirrors it
//! with compile-time size and offset checks, and the C shim of the module
//! asserts the same sizes against the header.

#![no_std]
#![forbid(unsafe_code)]

#[macro_use]
pub mod codec;
pub mod backlog;
pub mod blkdev;
pub mod blocks;
pub mod caps;
pub mod conn;
pub mod errno;
pub mod gather;
pub mod handle;
pub mod info;
pub mod ioctl;
pub mod keepalive;
pub mod limits;
pub mod ops;
pub mod poll;
pub mod reconnect;
pub mod region;
pub mod ring;
pub mod sent;
pub mod status;
pub mod uapi;
pub mod wc;
pub mod wire;
