// SPDX-License-Identifier: GPL-2.0

//! The C shim's interface (`shim/rrdma_shim.h`), seen from Rust.
//!
//! Kernel objects cross as opaque pointers; errors as negative errno. The
//! `rrdma_rust_*` entry points the shim calls are in `entry/` (one file per
//! C caller) and listed in the header.
//!
//! One file per concern, each re-exported here, so that every item is
//! `crate::ffi::X`:
//! - `verbs.rs`: devices and protection domains;
//! - `cm.rs`: rdma_cm ids, addresses and events;
//! - `qp.rs`: queue pairs (lifetime, polling, control messages, posting);
//! - `wr.rs`: work requests and the batch of operation completions;
//! - `mr.rs`: fast-registration MRs;
//! - `mm.rs`: region memory and its mappings;
//! - `chardev.rs`: the registrations, the module's work queue, a file's
//!   wait queue;
//! - `timer.rs`: a connection's timer;
//! - `owner.rs`: who opened a file (`RRDMA_IOCTL_STATUS`);
//! - `trace.rs`: the tracepoints (`ffi::trace::conn_new` and the rest);
//! - `uring.rs`: io_uring commands;
//! - `blk.rs`: rrdma-blk's disks and their requests;
//! - `params.rs`: the module parameters;
//! - `lock.rs`: lock helpers;
//! - `helpers.rs`: kernel helpers, and the ratelimited warning macros;
//! - `layout.rs`: the C side's numbers (generated from `shim/layout.c`),
//!   and the compile-time checks of every mirror against them.

mod blk;
mod chardev;
mod cm;
mod helpers;
mod layout;
mod lock;
mod mm;
mod mr;
mod owner;
mod params;
mod qp;
mod sync_wait;
mod timer;
pub(crate) mod trace;
mod uring;
mod verbs;
mod wr;

pub(crate) use blk::*;
pub(crate) use chardev::*;
pub(crate) use cm::*;
pub(crate) use helpers::*;
pub(crate) use lock::*;
pub(crate) use mm::*;
pub(crate) use mr::*;
pub(crate) use owner::*;
pub(crate) use params::*;
pub(crate) use qp::*;
pub(crate) use sync_wait::*;
pub(crate) use timer::*;
pub(crate) use uring::*;
pub(crate) use verbs::*;
pub(crate) use wr::*;
