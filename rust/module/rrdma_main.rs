// SPDX-License-Identifier: GPL-2.0

//! rrdma: remote memory blocks over RDMA, exposed to userspace as `/dev/rrdma`.
//!
//! The crate root owns the module's lifetime: [`RrdmaModule::init`] builds the
//! shared [`Context`] and registers the `ib_client` and the misc device
//! through the C shim; dropping the module unregisters both (which tears
//! down every per-device context) before the context itself is freed.
//!
//! Layout: `abi` (shared, pure ABI rules), `compat` (the only place that
//! knows kernel-version differences), `ffi` (the C shim's interface),
//! `device` (per-RDMA-device contexts), `file` (per-open-file state and
//! ioctl dispatch), `uarg` (size-extensible ioctl arguments), `info`
//! (`GET_INFO`), `objects` (per-file handles), `region` (regions and their
//! mappings), `release` (waiting for the last user of an object).

use kernel::prelude::*;
use kernel::sync::Arc;

mod abi;
mod compat;
mod conn;
mod context;
mod device;
mod export;
mod ffi;
mod file;
mod info;
mod listener;
mod mr;
mod objects;
mod region;
mod release;
mod ring;
mod shared;
mod uarg;

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
