// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Safe userspace interface to `/dev/rrdma`.
//!
//! [`Rrdma`] owns an open file of the device; every kernel object made
//! through it dies with it. The ABI structs come from `rrdma-abi`, the same
//! definitions the kernel module is built from.

#![deny(unsafe_op_in_unsafe_fn)]

mod blk;
mod device;
mod info;
mod region;
mod remote;
pub mod stamp;
mod status;
mod uring;

pub use device::Rrdma;
pub use info::{DeviceEntry, InfoReport};
pub use region::{page_size, PageBuf, Region};
pub use remote::{
    errno, from_addr, to_addr, Access, ConnectOptions, Connection, Export, Keepalive, Listener,
    RemoteRegion, SubmitError,
};
pub use rrdma_abi as abi;
pub use status::{state_name, ConnStatus, DiskStatus, ExportStatus, ImportStatus, StatusReport};
pub use uring::{UringCompletion, UringEngine};

/// Default path of the device node.
pub const DEFAULT_PATH: &str = "/dev/rrdma";
