// SPDX-License-Identifier: GPL-2.0

//! Listeners: a listening cm_id whose valid connection requests the kernel
//! accepts itself (auto-accept), queueing the established connections for
//! `ACCEPT`.
//!
//! Policy: a request is refused with `EBUSY` when `backlog` connections
//! are already accepted or being accepted but not yet taken; with `ENODEV`
//! when no usable RDMA device owns the route; with the handshake's errno
//! (`EPROTO`, `EPROTONOSUPPORT`) when the request is malformed.

use core::ptr;

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, ArcBorrow, CondVar, Mutex};

use crate::abi::{
    self,
    errno::{Errno, EAGAIN, EBUSY, ECONNREFUSED, EINVAL},
    wire,
};
use crate::conn::Conn;
use crate::ffi::{self, cm_event, RdmaCmId, ShimAddr};
use crate::shared::Shared;

struct Inner {
    /// Null once closed (or handed to the CM on device removal).
    id: *mut RdmaCmId,
    ctx_ref: bool,
    /// Accepted, handshake in progress.
    pending: KVec<Arc<Conn>>,
    /// Established, waiting for ACCEPT.
    queue: KVec<Arc<Conn>>,
    closed: bool,
}

// SAFETY: `id` is an rdma_cm object usable from any thread under the lock.
unsafe impl Send for Inner {}

/// A listener.
#[pin_data]
pub(crate) struct Listener {
    shared: Arc<Shared>,
    backlog: u32,
    #[pin]
    inner: Mutex<Inner>,
    #[pin]
    cv: CondVar,
}

impl Listener {
    /// Listens on `addr`.
    pub(crate) fn new(shared: &Arc<Shared>, addr: &ShimAddr, backlog: u32) -> Result<Arc<Self>> {
        let this = Arc::pin_init(
            pin_init!(Self {
                shared: shared.clone(),
                backlog,
                inner <- new_mutex!(Inner {
                    id: ptr::null_mut(),
                    ctx_ref: false,
                    pending: KVec::new(),
                    queue: KVec::new(),
                    closed: false,
                }),
                cv <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        let mut g = this.inner.lock();
        let owner: *mut c_void = Arc::into_raw(this.clone()).cast_mut().cast();
        let mut id = ptr::null_mut();
        // SAFETY: `owner` is a reference for the id's context; requests wait
        // for `inner`, which we hold.
        let ret = unsafe { ffi::rrdma_shim_cm_listen(owner, addr, backlog, &mut id) };
        if ret != 0 {
            // SAFETY: no id was created; the reference is unused.
            drop(unsafe { Arc::from_raw(owner.cast::<Self>().cast_const()) });
            drop(g);
            return Err(kernel::error::Error::from_errno(ret));
        }
        g.id = id;
        g.ctx_ref = true;
        drop(g);
        Ok(this)
    }

    /// A connect request on `child` (handler context). Returns the new
    /// connection's context pointer, or the errno it was rejected with.
    fn request(
        self: &Arc<Self>,
        child: *mut RdmaCmId,
        pdata: &[u8],
        initiator: u8,
        responder: u8,
    ) -> Result<*mut c_void, Errno> {
        {
            let g = self.inner.lock();
            if g.closed {
                return Err(ECONNREFUSED);
            }
            let open = g.pending.iter().filter(|c| !c.is_closed()).count() + g.queue.len();
            if open >= self.backlog as usize {
                return Err(EBUSY);
            }
        }
        let conn = Conn::accept_request(&self.shared, self, child, pdata, initiator, responder)?;
        let mut g = self.inner.lock();
        if g.pending.push(conn.clone(), GFP_KERNEL).is_err() {
            pr_warn!("listener: cannot track an accepted connection\n");
        }
        Ok(crate::compat::arc_ptr(&conn).cast_mut().cast())
    }

    /// A connection this listener accepted is established.
    pub(crate) fn established(&self, conn: &Arc<Conn>) {
        let mut g = self.inner.lock();
        if let Some(i) = g.pending.iter().position(|c| Arc::ptr_eq(c, conn)) {
            if let Some(c) = crate::compat::vec_remove(&mut g.pending, i) {
                if g.queue.push(c, GFP_KERNEL).is_err() {
                    pr_warn!("listener: cannot queue an established connection\n");
                }
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    /// Takes the next established connection, waiting up to `timeout_ms`
    /// (0: not at all, `u32::MAX`: until a signal).
    pub(crate) fn accept(&self, timeout_ms: u32) -> Result<Arc<Conn>> {
        let mut left = kernel::time::msecs_to_jiffies(timeout_ms);
        loop {
            let (conn, stale) = {
                let mut g = self.inner.lock();
                if g.closed {
                    return Err(abi::error(EINVAL));
                }
                // Requests that failed before establishment are freed here.
                let stale = match g.pending.iter().position(|c| c.is_closed()) {
                    Some(i) => crate::compat::vec_swap_remove(&mut g.pending, i),
                    None => None,
                };
                let conn = if g.queue.is_empty() {
                    None
                } else {
                    crate::compat::vec_remove(&mut g.queue, 0)
                };
                if conn.is_none() && stale.is_none() {
                    if timeout_ms == 0 {
                        return Err(abi::error(EAGAIN));
                    }
                    if timeout_ms == u32::MAX {
                        if self.cv.wait_interruptible(&mut g) {
                            return Err(EINTR);
                        }
                    } else {
                        match self.cv.wait_interruptible_timeout(&mut g, left) {
                            kernel::sync::CondVarTimeoutResult::Timeout => {
                                return Err(abi::error(EAGAIN))
                            }
                            kernel::sync::CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                            kernel::sync::CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                        }
                    }
                }
                (conn, stale)
            };
            if let Some(s) = stale {
                Conn::destroy(&s, None);
            }
            match conn {
                // A connection that closed in the queue is of no use.
                Some(c) if c.is_closed() => Conn::destroy(&c, None),
                Some(c) => return Ok(c),
                None => {}
            }
        }
    }

    /// Stops listening and destroys the connections not yet taken.
    pub(crate) fn close(this: &Arc<Self>) {
        let (id, ctx_ref, pending, queue) = {
            let mut g = this.inner.lock();
            g.closed = true;
            let id = g.id;
            g.id = ptr::null_mut();
            (
                id,
                core::mem::take(&mut g.ctx_ref),
                core::mem::take(&mut g.pending),
                core::mem::take(&mut g.queue),
            )
        };
        this.cv.notify_all();
        if !id.is_null() {
            // SAFETY: we own `id` and are not in its handler; once this
            // returns, no request runs.
            unsafe { ffi::rrdma_shim_cm_destroy_id(id) };
        }
        if ctx_ref {
            // SAFETY: the id is gone; its context reference is unused.
            drop(unsafe { Arc::from_raw(crate::compat::arc_ptr(this)) });
        }
        for c in pending.iter() {
            Conn::destroy(c, None);
        }
        for c in queue.iter() {
            Conn::destroy(c, None);
        }
    }
}

/// A connect request on a listening id.
///
/// # Safety
///
/// `listener` is the listening id's context (a held reference); `child` is
/// the request's new id; `pdata` is valid for `len` bytes; `out` is valid.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_listen_request(
    listener: *mut c_void,
    child: *mut RdmaCmId,
    pdata: *const c_void,
    len: u8,
    initiator: u8,
    responder: u8,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this: Arc<Listener> =
        unsafe { ArcBorrow::from_raw(listener.cast::<Listener>().cast_const()) }.into();
    let pdata: &[u8] = if pdata.is_null() {
        &[]
    } else {
        // SAFETY: by the function's safety requirements.
        unsafe { core::slice::from_raw_parts(pdata.cast(), usize::from(len)) }
    };
    match this.request(child, pdata, initiator, responder) {
        Ok(conn) => {
            // SAFETY: by the function's safety requirements.
            unsafe { *out = conn };
            0
        }
        Err(e) => {
            let r = wire::reject(e);
            // SAFETY: handler context of `child`; `r` outlives the call.
            unsafe { ffi::rrdma_shim_cm_reject(child, r.as_ptr().cast(), r.len() as u8) };
            // Non-zero: the CM destroys the child.
            1
        }
    }
}

/// Any other event of a listening id.
///
/// # Safety
///
/// `listener` is the listening id's context (a held reference).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_listen_event(listener: *mut c_void, event: c_int) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this: Arc<Listener> =
        unsafe { ArcBorrow::from_raw(listener.cast::<Listener>().cast_const()) }.into();
    if event != cm_event::DEVICE_REMOVAL {
        return 0;
    }
    let mut g = this.inner.lock();
    if g.id.is_null() {
        // `close()` owns the id and is waiting for us.
        return 0;
    }
    pr_warn!("listener: its RDMA device is going away; no more connections\n");
    g.id = ptr::null_mut();
    g.closed = true;
    let ctx_ref = core::mem::take(&mut g.ctx_ref);
    drop(g);
    this.cv.notify_all();
    if ctx_ref {
        // SAFETY: the CM destroys the id when we return non-zero; `this`
        // keeps the listener alive until then.
        drop(unsafe { Arc::from_raw(crate::compat::arc_ptr(&this)) });
    }
    1
}
