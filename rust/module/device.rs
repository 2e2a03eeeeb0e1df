// SPDX-License-Identifier: GPL-2.0

//! Per-RDMA-device state, built by the `ib_client` `add` callback and torn
//! down by `remove` once every user has let go.
//!
//! Each device gets a protection domain; connections add their QPs and CQs
//! on top and register here so that `remove` can close them first. Devices
//! without fast registration
//! (`IB_DEVICE_MEM_MGT_EXTENSIONS`) are listed but not used: rrdma never
//! falls back to a global rkey.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use crate::conn::Conn;
use crate::context::Context;
use crate::ffi::{self, DeviceAttr, IbDevice, IbPd};
use crate::release::{Release, ReleaseGuard};

/// A protection domain; deallocated on drop.
struct Pd(NonNull<IbPd>);

impl Pd {
    fn new(dev: *mut IbDevice) -> Result<Self> {
        let mut pd = core::ptr::null_mut();
        // SAFETY: `dev` is a live device (we are inside its `add`/`remove`
        // window) and `pd` is a valid out-pointer.
        kernel::error::to_result(unsafe { ffi::rrdma_shim_alloc_pd(dev, &mut pd) })?;
        // INVARIANT: on success the shim stored a valid PD.
        Ok(Self(NonNull::new(pd).ok_or(ENOMEM)?))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by `rrdma_shim_alloc_pd` and freed only here.
        unsafe { ffi::rrdma_shim_dealloc_pd(self.0.as_ptr()) };
    }
}

/// The verbs objects rrdma keeps per device.
struct Verbs {
    pd: Pd,
}

/// rrdma's view of one RDMA device.
#[pin_data]
pub(crate) struct DeviceCtx {
    dev: NonNull<IbDevice>,
    verbs: Option<Verbs>,
    removing: AtomicBool,
    /// Connections using the device: `remove` destroys them (the removal
    /// notifiers of xprtrdma), which drops their references.
    #[pin]
    conns: Mutex<KVec<Arc<Conn>>>,
    /// Must stay the last field: signals `remove` after the verbs are freed.
    release: ReleaseGuard,
}

// SAFETY: `dev` stays valid until `remove` returns, and `remove` waits for
// the last `Arc<DeviceCtx>` to drop; the verbs objects may be used and freed
// from any thread.
unsafe impl Send for DeviceCtx {}
// SAFETY: as above; shared access only queries the device.
unsafe impl Sync for DeviceCtx {}

impl DeviceCtx {
    fn new(dev: NonNull<IbDevice>, release: Arc<Release>) -> Result<Arc<Self>> {
        let attr = query(dev);
        let verbs = if attr.caps & ffi::CAP_MEM_MGT_EXT == 0 {
            pr_warn!(
                "{}: no fast registration (IB_DEVICE_MEM_MGT_EXTENSIONS); listed but not used\n",
                attr.name_str()
            );
            None
        } else {
            let pd = Pd::new(dev.as_ptr()).inspect_err(|e| {
                pr_warn!("{}: ib_alloc_pd failed ({:?})\n", attr.name_str(), e);
            })?;
            Some(Verbs { pd })
        };
        Arc::pin_init(
            pin_init!(Self {
                dev,
                verbs,
                removing: AtomicBool::new(false),
                conns <- new_mutex!(KVec::new()),
                release: ReleaseGuard::new(release),
            }),
            GFP_KERNEL,
        )
    }

    /// The device's protection domain, if rrdma uses the device.
    pub(crate) fn pd(&self) -> Option<*mut IbPd> {
        self.verbs.as_ref().map(|v| v.pd.0.as_ptr())
    }

    /// Whether this context is the one of `dev`.
    pub(crate) fn is(&self, dev: *mut IbDevice) -> bool {
        self.dev.as_ptr() == dev
    }

    /// Records a connection using the device.
    pub(crate) fn add_conn(&self, conn: &Arc<Conn>) -> Result {
        self.conns.lock().push(conn.clone(), GFP_KERNEL)?;
        Ok(())
    }

    /// Forgets a connection (it released its device objects).
    pub(crate) fn remove_conn(&self, conn: &Conn) {
        // The reference is dropped here, outside the lock.
        let gone = crate::compat::vec_remove_arc(&mut self.conns.lock(), conn);
        drop(gone);
    }

    /// The device's current attributes (name, port state, ...).
    pub(crate) fn attr(&self) -> DeviceAttr {
        query(self.dev)
    }

    /// Whether rrdma built its verbs objects on this device.
    pub(crate) fn usable(&self) -> bool {
        self.verbs.is_some() && !self.removing.load(Ordering::Acquire)
    }
}

fn query(dev: NonNull<IbDevice>) -> DeviceAttr {
    let mut attr = DeviceAttr::zeroed();
    // SAFETY: `dev` is live (see `DeviceCtx`'s `Send` justification) and
    // `attr` is a valid out-pointer.
    unsafe { ffi::rrdma_shim_device_query(dev.as_ptr(), &mut attr) };
    attr
}

/// `ib_client.add`: builds the device's context.
///
/// # Safety
///
/// `context` is the pointer the shim was registered with, `dev` is a device being
/// added and `out` is a valid pointer for the client data.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_device_add(
    context: *mut c_void,
    dev: *mut IbDevice,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let context = unsafe { Context::from_ffi(context) };
    let Some(dev) = NonNull::new(dev) else {
        return EINVAL.to_errno();
    };
    let res = (|| -> Result<*mut c_void> {
        let ctx = DeviceCtx::new(dev, Release::new()?)?;
        context.insert_device(ctx.clone())?;
        // The client data owns one reference, returned in `remove`.
        Ok(Arc::into_raw(ctx).cast_mut().cast())
    })();
    match res {
        Ok(ptr) => {
            // SAFETY: `out` is valid by the function's safety requirements.
            unsafe { *out = ptr };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `ib_client.remove`: marks the device as going, forgets it and waits until
/// the last reference to its context is gone, so that nothing touches the
/// device afterwards. Connections on the device are destroyed first; the
/// other holders are short-lived (`GET_INFO` snapshots).
///
/// # Safety
///
/// `context` is the pointer the shim was registered with; `client_data` is what
/// [`rrdma_rust_device_add`] returned for `dev`.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_device_remove(
    context: *mut c_void,
    _dev: *mut IbDevice,
    client_data: *mut c_void,
) {
    // SAFETY: by the function's safety requirements.
    let context = unsafe { Context::from_ffi(context) };
    // SAFETY: `client_data` holds the reference `add` leaked with `into_raw`.
    let ctx = unsafe { Arc::from_raw(client_data.cast::<DeviceCtx>().cast_const()) };
    ctx.removing.store(true, Ordering::Release);
    let attr = ctx.attr();
    // Removal notifiers: every connection on the device closes with
    // ENODEV, its operations complete with errors, its QP and
    // registrations are freed and it lets go of the device.
    let conns = core::mem::take(&mut *ctx.conns.lock());
    for conn in conns.iter() {
        Conn::destroy(conn, Some(crate::abi::errno::ENODEV));
    }
    drop(conns);
    context.remove_device(&ctx);
    let release = ctx.release.release();
    drop(ctx);
    release.wait();
    pr_info!("{}: removed\n", attr.name_str());
}
