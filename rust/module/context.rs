// SPDX-License-Identifier: GPL-2.0

//! Module-wide state shared by the `ib_client` callbacks and every open file.

use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use crate::abi::Result;
use crate::ffi;
use crate::foreign;
use crate::noio::NoIoMutex;

use crate::blk::Disks;
use crate::caps::Users;
use crate::compat::{new_bh_lock, BhLock};
use crate::device::DeviceCtx;
use crate::shared::Shared;

/// Module-wide state.
#[pin_data]
pub(crate) struct Context {
    /// Every RDMA device rrdma knows, in `add` order. Removal empties a slot
    /// rather than shifting, so it never allocates. Order: alone, or after
    /// `Conn::inner` (a connection's set-up finds its device); a leaf.
    #[pin]
    devices: NoIoMutex<KVec<Option<Arc<DeviceCtx>>>>,
    /// rrdma-blk's disks (`blk.rs`). A leaf, never held while a disk is
    /// added or removed.
    #[pin]
    pub(crate) disks: Mutex<Disks>,
    /// Every open file's shared state, for `RRDMA_IOCTL_STATUS`
    /// (`status.rs`): added at open, removed at release. Taken alone; a
    /// leaf.
    #[pin]
    files: Mutex<KVec<Arc<Shared>>>,
    /// The users whose files hold charges (`caps.rs`). A softirq-safe
    /// spinlock, taken alone: a leaf.
    #[pin]
    pub(crate) users: BhLock<Users>,
}

impl Context {
    /// A context with no devices.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- NoIoMutex::new(new_mutex!(KVec::new(), "Context::devices")),
                disks <- new_mutex!(Disks::new(), "Context::disks"),
                files <- new_mutex!(KVec::new(), "Context::files"),
                users <- new_bh_lock!(Users::new(), "Context::users"),
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    /// Adds a device.
    pub(crate) fn insert_device(&self, dev: Arc<DeviceCtx>) -> Result {
        let mut devices = self.devices.lock();
        if let Some(slot) = devices.iter_mut().find(|s| s.is_none()) {
            *slot = Some(dev);
            return Ok(());
        }
        devices.push(Some(dev), GFP_KERNEL)?;
        Ok(())
    }

    /// Forgets `dev`; returns whether it was known.
    pub(crate) fn remove_device(&self, dev: &Arc<DeviceCtx>) -> bool {
        let mut devices = self.devices.lock();
        for slot in devices.iter_mut() {
            if slot.as_ref().is_some_and(|d| Arc::ptr_eq(d, dev)) {
                *slot = None;
                return true;
            }
        }
        false
    }

    /// A snapshot of the known devices, each held until the snapshot drops.
    pub(crate) fn devices(&self) -> Result<KVec<Arc<DeviceCtx>>> {
        let devices = self.devices.lock();
        let mut out = KVec::with_capacity(devices.len(), GFP_KERNEL)?;
        for dev in devices.iter().flatten() {
            out.push(dev.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// The context of `dev`, if known.
    pub(crate) fn find_device(&self, dev: *mut ffi::IbDevice) -> Option<Arc<DeviceCtx>> {
        let devices = self.devices.lock();
        devices.iter().flatten().find(|d| d.is(dev)).cloned()
    }

    /// Adds an open file's state.
    pub(crate) fn add_file(&self, shared: Arc<Shared>) -> Result {
        self.files.lock().push(shared, GFP_KERNEL)?;
        Ok(())
    }

    /// Forgets a released file's state.
    pub(crate) fn remove_file(&self, shared: &Arc<Shared>) {
        let mut files = self.files.lock();
        if let Some(i) = files.iter().position(|f| Arc::ptr_eq(f, shared)) {
            drop(crate::compat::vec_swap_remove(&mut files, i));
        }
    }

    /// A snapshot of the open files' states.
    pub(crate) fn files(&self) -> Result<KVec<Arc<Shared>>> {
        let files = self.files.lock();
        let mut out = KVec::with_capacity(files.len(), GFP_KERNEL)?;
        for f in files.iter() {
            out.push(f.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Number of devices known.
    pub(crate) fn device_count(&self) -> usize {
        self.devices.lock().iter().flatten().count()
    }
}

/// The registration of the `ib_client` and `/dev/rrdma` with the C shim,
/// which holds one reference to the context until unregistered.
pub(crate) struct Registration {
    // INVARIANT: obtained from `foreign::into_c` and handed to the shim,
    // which uses it until `rrdma_shim_unregister()` returns.
    raw: *mut c_void,
}

// SAFETY: the raw pointer is an `Arc<Context>` reference, and `Context` is
// `Send + Sync`.
unsafe impl Send for Registration {}
// SAFETY: as above; `Registration` has no `&self` methods that mutate.
unsafe impl Sync for Registration {}

impl Registration {
    /// Registers the `ib_client` (which adds every present device) and then
    /// `/dev/rrdma`.
    pub(crate) fn new(context: &Arc<Context>) -> Result<Self> {
        let raw = foreign::into_c(context.clone());
        // SAFETY: `raw` stays a valid `Arc` reference until `drop()`, and the
        // shim calls back only between register and unregister.
        let ret = unsafe { ffi::rrdma_shim_register(raw) };
        if let Err(e) = crate::abi::to_result(ret) {
            // SAFETY: registration failed, so the shim has let go of `raw`.
            drop(unsafe { foreign::from_c::<Context>(raw) });
            return Err(e);
        }
        // INVARIANT: handed to the shim just above.
        Ok(Self { raw })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: registered in `new()`; once this returns, no callback runs.
        unsafe { ffi::rrdma_shim_unregister() };
        // SAFETY: the shim no longer uses `raw`, so its reference is ours.
        drop(unsafe { foreign::from_c::<Context>(self.raw) });
    }
}
