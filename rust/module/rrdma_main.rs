// SPDX-License-Identifier: GPL-2.0

//! rrdma: remote memory blocks over RDMA, exposed to userspace as `/dev/rrdma`.
//!
//! The crate root owns the module's lifetime: [`RrdmaModule::init`] builds the
//! shared [`Context`] and registers the `ib_client` and the misc device
//! through the C shim; dropping the module unregisters both (which tears
//! down every per-device context) before the context itself is freed.
//!
//! Layout:
//! - `abi`: the pure ABI rules, wire format and state machines, shared with
//!   userspace and tested on the host;
//! - `compat`: the only place that knows kernel-version differences;
//! - `ffi`: the C shim's interface; `entry/`: every C-callable entry point
//!   (one file per C caller); `foreign`: how references cross to C;
//! - `context`, `device`, `release`: the module-wide state and the
//!   per-RDMA-device contexts, torn down when a device goes;
//! - `calling`: calling contexts as types (a task's proof of process
//!   context, the atomic completion path's lack of one);
//! - `cm_id`, `verbs`, `mr`, `timer`: owned rdma_cm ids, protection
//!   domains, queue pairs, memory registrations and keepalive timers;
//! - `conn/`: connections (lifecycle, control channel, exporter and
//!   importer sides, data path); `listener`: listening ids;
//! - `file`, `uarg`, `info`, `objects`, `shared`, `ring`, `export`,
//!   `region`, `vma`: per-open-file state, ioctl arguments, GET_INFO,
//!   handles, what a file's connections share, the completion ring,
//!   exports, regions and the VMA of an mmap(2) in progress; `status`:
//!   what an administrator sees (`RRDMA_IOCTL_STATUS`);
//! - `work`: counts of what the fabric made the module do (fdinfo);
//!   `lockcheck`: the load-time check that the lock rule's check sees
//!   rrdma's locks.

// 6.12's `pin_init!` expands one level per field: `Conn`'s exceed 128.
#![recursion_limit = "256"]

use kernel::prelude::*;
use kernel::sync::Arc;

mod abi;
mod blk;
mod calling;
mod caps;
mod cm_id;
mod compat;
mod conn;
mod context;
mod device;
mod entry;
mod export;
mod ffi;
mod file;
mod foreign;
mod info;
mod listener;
mod lockcheck;
mod mr;
mod noio;
mod objects;
mod region;
mod release;
mod ring;
mod shared;
mod status;
mod timer;
mod uarg;
mod umem;
mod verbs;
mod vma;
mod work;

use context::{Context, Registration};

module! {
    type: RrdmaModule,
    name: "rrdma",
    description: "Remote memory blocks over RDMA (/dev/rrdma)",
    license: "GPL",
}

/// The loaded module: the shared context and its registrations.
struct RrdmaModule {
    _registration: Registration,
    context: Arc<Context>,
}

impl kernel::Module for RrdmaModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        lockcheck::self_check()?;
        let context = Context::new()?;
        let registration = Registration::new(&context)?;
        pr_info!("loaded, ABI version {}\n", abi::uapi::ABI_VERSION);
        Ok(Self {
            _registration: registration,
            context,
        })
    }
}

impl Drop for RrdmaModule {
    fn drop(&mut self) {
        // Fields drop after this: the registration first, which removes
        // every device, then the context.
        pr_info!("unloading ({} devices)\n", self.context.device_count());
    }
}
