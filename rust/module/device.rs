// SPDX-License-Identifier: GPL-2.0

//! Per-RDMA-device state, built by the `ib_client` `add` callback and torn
//! down by `remove` once every user has let go.
//!
//! Connections bring their own protection domain, queue pair and
//! registrations (`verbs.rs`) and register here so that `remove` can close
//! them first; every domain holds the device context, so `remove` returns
//! only once all of them are gone. Devices without fast registration
//! (`IB_DEVICE_MEM_MGT_EXTENSIONS`) are listed but not used: rrdma never
//! falls back to a global rkey.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use crate::abi::Result;
use crate::conn::Conn;
use crate::context::Context;
use crate::ffi::{self, DeviceAttr, IbDevice};
use crate::release::{Release, ReleaseGuard};

/// rrdma's view of one RDMA device.
#[pin_data]
pub(crate) struct DeviceCtx {
    dev: NonNull<IbDevice>,
    /// Whether the device does fast registration (else unused).
    frwr: bool,
    removing: AtomicBool,
    /// Connections using the device: `remove` destroys them (the removal
    /// notifiers of xprtrdma), which drops their references. Lock order:
    /// taken alone (never with `Conn::inner`).
    #[pin]
    conns: Mutex<KVec<Arc<Conn>>>,
    /// Must stay the last field: signals `remove` after the rest is freed.
    release: ReleaseGuard,
}

// SAFETY: `dev` stays valid until `remove` returns, and `remove` waits for
// the last `Arc<DeviceCtx>` to drop.
unsafe impl Send for DeviceCtx {}
// SAFETY: as above; shared access only queries the device.
unsafe impl Sync for DeviceCtx {}

impl DeviceCtx {
    fn new(dev: NonNull<IbDevice>, release: Arc<Release>) -> Result<Arc<Self>> {
        let attr = query(dev);
        let frwr = attr.caps & ffi::CAP_MEM_MGT_EXT != 0;
        if !frwr {
            pr_warn!(
                "{}: no fast registration (IB_DEVICE_MEM_MGT_EXTENSIONS); listed but not used\n",
                attr.name_str()
            );
        }
        Arc::pin_init(
            pin_init!(Self {
                dev,
                frwr,
                removing: AtomicBool::new(false),
                conns <- new_mutex!(KVec::new(), "DeviceCtx::conns"),
                release: ReleaseGuard::new(release),
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    /// The device, for verbs on it (live while this context is held).
    pub(crate) fn raw(&self) -> *mut IbDevice {
        self.dev.as_ptr()
    }

    /// Whether this context is the one of `dev`.
    pub(crate) fn is(&self, dev: *mut IbDevice) -> bool {
        self.dev.as_ptr() == dev
    }

    /// Records a connection about to use the device: `ENODEV` once the
    /// device is going (removal takes the list under the same lock, so a
    /// connection is either refused here or destroyed by `remove`).
    pub(crate) fn add_conn(&self, conn: &Arc<Conn>) -> Result<(), crate::abi::errno::Errno> {
        let mut conns = self.conns.lock();
        if self.removing.load(Ordering::Acquire) {
            return Err(crate::abi::errno::ENODEV);
        }
        conns
            .push(conn.clone(), GFP_KERNEL)
            .map_err(|_| crate::abi::errno::ENOMEM)
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

    /// Whether rrdma can use the device (fast registration, not going).
    pub(crate) fn usable(&self) -> bool {
        self.frwr && !self.removing.load(Ordering::Acquire)
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
/// device afterwards. Connections on the device are destroyed first (a
/// connection still setting up registers before it can use the device, see
/// `Conn::setup_qp`); the other holders are short-lived (`GET_INFO`
/// snapshots, a connection's domain until its teardown ends).
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
    // Set before the list is taken under its lock: no connection joins after.
    ctx.removing.store(true, Ordering::Release);
    let attr = ctx.attr();
    // Removal notifiers: every connection on the device closes with
    // ENODEV, its operations complete with errors, its QP and
    // registrations are freed and it lets go of the device.
    let conns = core::mem::take(&mut *ctx.conns.lock());
    for conn in conns.iter() {
        Conn::destroy(conn, crate::abi::conn::Event::DeviceRemoval);
    }
    drop(conns);
    context.remove_device(&ctx);
    let release = ctx.release.release();
    drop(ctx);
    release.wait();
    pr_info!("{}: removed\n", attr.name_str());
}
