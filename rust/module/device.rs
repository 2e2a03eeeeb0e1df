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
//!
//! The `ib_client` callbacks themselves are in `entry/device.rs`.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc};

use crate::abi::errno::{Errno, ENOMEM};
use crate::abi::Result;
use crate::conn::Conn;
use crate::ffi::{self, warn_user, DeviceAttr, DeviceLimits, IbDevice};
use crate::noio::NoIoMutex;
use crate::release::{Release, ReleaseGuard};

/// rrdma's view of one RDMA device.
#[pin_data]
pub(crate) struct DeviceCtx {
    dev: NonNull<IbDevice>,
    /// Whether the device does fast registration (else unused).
    frwr: bool,
    /// The device's limits, clamped by the module's `limit_*` parameters.
    limits: DeviceLimits,
    /// Registrations rrdma holds on the device (at most `limits.max_mr`).
    mrs: AtomicU32,
    removing: AtomicBool,
    /// Connections using the device: `remove` destroys them (the removal
    /// notifiers of xprtrdma), which drops their references. Order: after
    /// `Conn::inner` (a connection's set-up registers it here) or alone;
    /// a leaf: `remove` takes the list out and destroys the connections
    /// with it released.
    #[pin]
    conns: NoIoMutex<KVec<Arc<Conn>>>,
    /// Must stay the last field: signals `remove` after the rest is freed.
    release: ReleaseGuard,
}

// SAFETY: `dev` stays valid until `remove` returns, and `remove` waits for
// the last `Arc<DeviceCtx>` to drop.
unsafe impl Send for DeviceCtx {}
// SAFETY: as above; shared access only queries the device.
unsafe impl Sync for DeviceCtx {}

impl DeviceCtx {
    /// The context of a device being added (`ib_client.add`).
    pub(crate) fn new(dev: NonNull<IbDevice>) -> Result<Arc<Self>> {
        let release = Release::new()?;
        let attr = query(dev);
        let frwr = attr.caps & ffi::CAP_MEM_MGT_EXT != 0;
        if !frwr {
            pr_warn!(
                "{}: no fast registration (IB_DEVICE_MEM_MGT_EXTENSIONS); listed but not used\n",
                attr.name_str()
            );
        }
        let limits = query_limits(dev);
        Arc::pin_init(
            pin_init!(Self {
                dev,
                frwr,
                limits,
                mrs: AtomicU32::new(0),
                removing: AtomicBool::new(false),
                conns <- NoIoMutex::new(new_mutex!(KVec::new(), "DeviceCtx::conns")),
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

    /// The limits rrdma respects on this device.
    pub(crate) fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    /// Counts one more registration on the device: `ENOMEM` (what the
    /// verbs answer on a full device) once `max_mr` are held.
    pub(crate) fn take_mr(&self) -> Result<(), Errno> {
        self.take_mrs(1)
    }

    /// Counts `count` more registrations on the device, all or none.
    pub(crate) fn take_mrs(&self, count: u32) -> Result<(), Errno> {
        let max = self.limits.max_mr;
        let taken = self
            .mrs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                n.checked_add(count).filter(|&t| t <= max)
            });
        if taken.is_err() {
            warn_user!(
                "{}: all {} registrations of the device in use (max_mr, or limit_mr) (errno {})\n",
                self.attr().name_str(),
                max,
                ENOMEM.get()
            );
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Gives back a registration counted by [`Self::take_mr`].
    pub(crate) fn put_mr(&self) {
        self.put_mrs(1);
    }

    /// Gives back `count` registrations counted by [`Self::take_mrs`].
    pub(crate) fn put_mrs(&self, count: u32) {
        self.mrs.fetch_sub(count, Ordering::Relaxed);
    }

    /// Whether rrdma can use the device (fast registration, not going).
    pub(crate) fn usable(&self) -> bool {
        self.frwr && !self.removing.load(Ordering::Acquire)
    }
}

impl DeviceCtx {
    /// First half of `ib_client.remove`: marks the device as going and
    /// destroys every connection on it (the removal notifiers of xprtrdma).
    /// Each closes with `ENODEV`, its operations complete with errors, its
    /// QP and registrations are freed and it lets go of the device. A
    /// connection still setting up registers before it can use the device
    /// (see `Conn::setup_qp`), so none is missed.
    pub(crate) fn start_removal(&self) {
        // Set before the list is taken under its lock: no connection joins after.
        self.removing.store(true, Ordering::Release);
        let conns = core::mem::take(&mut *self.conns.lock());
        for conn in conns.iter() {
            Conn::destroy(conn, crate::abi::conn::Event::DeviceRemoval);
        }
    }

    /// Second half of `ib_client.remove`, once the device is forgotten:
    /// drops this reference and waits until the last one is gone, so that
    /// nothing touches the device afterwards. The other holders are
    /// short-lived (`GET_INFO` snapshots, a connection's domain until its
    /// teardown ends).
    pub(crate) fn wait_unused(this: Arc<Self>) {
        let release = this.release.release();
        drop(this);
        release.wait();
    }
}

fn query_limits(dev: NonNull<IbDevice>) -> DeviceLimits {
    let mut own = DeviceLimits::UNLIMITED;
    let mut clamp = DeviceLimits::UNLIMITED;
    // SAFETY: `dev` is live (see `DeviceCtx`'s `Send` justification); both
    // are valid out-pointers of the layout the shim fills.
    unsafe { ffi::rrdma_shim_device_limits(dev.as_ptr(), &mut own, &mut clamp) };
    own.clamped(&clamp)
}

fn query(dev: NonNull<IbDevice>) -> DeviceAttr {
    let mut attr = DeviceAttr::zeroed();
    // SAFETY: `dev` is live (see `DeviceCtx`'s `Send` justification) and
    // `attr` is a valid out-pointer.
    unsafe { ffi::rrdma_shim_device_query(dev.as_ptr(), &mut attr) };
    attr
}
