// SPDX-License-Identifier: GPL-2.0

//! An owned rdma_cm identifier ([`CmId`]).
//!
//! The id's context, which every event of the id carries to Rust, is one
//! reference of the owner (a connection or a listener), held exactly as long
//! as the id exists: dropping the [`CmId`] destroys the id and then gives
//! the reference back; [`CmId::into_cm`] leaves the destruction to the CM
//! (an event handler that returns non-zero) and gives it back at once.
//!
//! The id owns its queue pair, as rdma_cm does (`rdma_create_qp()` on the
//! id): the queue pair is drained and destroyed before the id, and its
//! completions call back with the id's context, which the id's reference
//! covers.
//!
//! Calls that rdma_cm allows only inside one of the id's event handlers
//! (connect from a handler, accept, handing the id to the CM) take an
//! [`InHandler`], which only the C-callable entry points can make.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use kernel::ffi::{c_int, c_void};
use kernel::sync::Arc;

use crate::abi::errno::Errno;
use crate::abi::errno::{EBUSY, EINVAL};
use crate::abi::Result;
use crate::ffi::{self, IbDevice, RdmaCmId, ShimAddr};
use crate::foreign;
use crate::verbs::{Pd, Qp, QpSizes};

fn errno(ret: i32) -> Result<(), Errno> {
    crate::abi::to_result(ret)
}

/// Proof that the code holding it runs in an rdma_cm event handler of one
/// id, whose handler mutex the CM holds. Made only by the C-callable entry
/// points; neither `Send` nor `Clone`, and passed down by reference.
pub(crate) struct InHandler {
    id: NonNull<RdmaCmId>,
    _not_send: PhantomData<*mut ()>,
}

impl InHandler {
    /// # Safety
    ///
    /// The caller runs in an event handler of `id` (for a connect request:
    /// `id` is the request's new id) and drops the value before that
    /// handler returns. The handler returns non-zero (the CM destroys `id`)
    /// exactly when no [`CmId`] of `id` is kept: none was adopted, or it was
    /// handed back with [`CmId::into_cm`].
    pub(crate) unsafe fn new(id: NonNull<RdmaCmId>) -> Self {
        Self {
            id,
            _not_send: PhantomData,
        }
    }

    /// `rdma_reject()` of the connect request whose new id this handler
    /// runs for, with `pdata` as private data (rdma_cm refuses, with an
    /// errno ignored here, an id that is not a request's).
    pub(crate) fn reject(&self, pdata: &[u8]) {
        // SAFETY: we run in the id's handler (type invariant); `pdata`
        // outlives the call.
        unsafe {
            ffi::rrdma_shim_cm_reject(self.id.as_ptr(), pdata.as_ptr().cast(), pdata.len() as u8)
        };
    }

    /// The address of the id this handler runs for (to tell a
    /// connection's ids apart; never dereferenced).
    pub(crate) fn id_addr(&self) -> usize {
        self.id.as_ptr() as usize
    }

    /// The peer's address of the id this handler runs for.
    pub(crate) fn peer(&self) -> ShimAddr {
        let mut a = ShimAddr::default();
        // SAFETY: the id is live while its handler runs (type invariant);
        // `a` is a valid out-pointer.
        unsafe { ffi::rrdma_shim_cm_peer(self.id.as_ptr(), &mut a) };
        a
    }
}

/// An rdma_cm id owned by a `T`, with its queue pair once created.
///
/// # Invariants
///
/// `raw` is a live rdma_cm id whose context is `ctx`, a reference of an
/// `Arc<T>` handed to C by [`foreign::into_c`], held until the id is gone.
/// `qp`, if any, was created on `raw` with `ctx` as its callbacks' owner,
/// and is dropped before the id is destroyed or handed to the CM.
pub(crate) struct CmId<T: Send + Sync + 'static> {
    raw: NonNull<RdmaCmId>,
    ctx: *mut c_void,
    qp: Option<Qp>,
    _owner: PhantomData<Arc<T>>,
}

// SAFETY: rdma_cm ids may be used and destroyed from any thread (the CM
// serialises with its own locks); the context reference is an `Arc<T>` of a
// `Send + Sync` type.
unsafe impl<T: Send + Sync> Send for CmId<T> {}
// SAFETY: as above; `&CmId` calls only rdma_cm functions that take the
// CM's locks themselves.
unsafe impl<T: Send + Sync> Sync for CmId<T> {}

impl<T: Send + Sync> CmId<T> {
    /// Creates an id whose events go to `owner`: the connection handler, or
    /// the listening one if `listener`.
    pub(crate) fn create(owner: &Arc<T>, listener: bool) -> Result<Self, Errno> {
        let ctx = foreign::into_c(owner.clone());
        let mut raw = ptr::null_mut();
        // SAFETY: `ctx` is a reference for the id's context and `raw` a valid
        // out-pointer.
        let ret = unsafe { ffi::rrdma_shim_cm_create(ctx, listener, &mut raw) };
        match (errno(ret), NonNull::new(raw)) {
            // INVARIANT: created just above with `ctx` as its context.
            (Ok(()), Some(raw)) => Ok(Self {
                raw,
                ctx,
                qp: None,
                _owner: PhantomData,
            }),
            (res, _) => {
                // SAFETY: no id was created: the reference is unused.
                drop(unsafe { foreign::from_c::<T>(ctx) });
                Err(res.err().unwrap_or(crate::abi::errno::ENOMEM))
            }
        }
    }

    /// Adopts the new id of the connect request `h` runs for, for `owner`;
    /// the listen handler makes [`Self::context`] the id's context when the
    /// request handler returns 0 (see [`InHandler::new`]: it returns 0
    /// exactly when the value is kept).
    pub(crate) fn adopt(h: &InHandler, owner: &Arc<T>) -> Self {
        // INVARIANT: the listen handler sets the context to `ctx` before
        // any other event of the id can run (the CM holds its handler mutex).
        Self {
            raw: h.id,
            ctx: foreign::into_c(owner.clone()),
            qp: None,
            _owner: PhantomData,
        }
    }

    /// Whether `h` is a handler of this id.
    pub(crate) fn is_handled_by(&self, h: &InHandler) -> bool {
        self.raw == h.id
    }

    /// The id's address, to tell the owner's ids apart (never
    /// dereferenced).
    pub(crate) fn addr(&self) -> usize {
        self.raw.as_ptr() as usize
    }

    /// The context pointer the id's events carry.
    pub(crate) fn context(&self) -> *mut c_void {
        self.ctx
    }

    fn as_ptr(&self) -> *mut RdmaCmId {
        self.raw.as_ptr()
    }

    /// Creates the id's queue pair in `pd` (the id is bound to a device);
    /// its completions call back with the id's context. `EBUSY` if the id
    /// has one already.
    pub(crate) fn create_qp(&mut self, pd: &Arc<Pd>, sizes: &QpSizes) -> Result<(), Errno> {
        if self.qp.is_some() {
            return Err(EBUSY);
        }
        // SAFETY: the id is live and has no queue pair; the queue pair is
        // dropped before the id is destroyed or handed over, and `ctx`, the
        // id's context reference, stays valid until then (type invariant).
        let qp = unsafe { Qp::new(self.as_ptr(), pd, self.ctx, sizes) }?;
        // INVARIANT: created on `raw` with `ctx` as the owner.
        self.qp = Some(qp);
        Ok(())
    }

    /// The id's queue pair, once created and until destroyed.
    pub(crate) fn qp(&self) -> Option<&Qp> {
        self.qp.as_ref()
    }

    /// Drains and destroys the id's queue pair (waits for its completion
    /// callbacks: not with a lock they take).
    pub(crate) fn destroy_qp(&mut self) {
        drop(self.qp.take());
    }

    /// `rdma_resolve_addr()` towards `dst`.
    pub(crate) fn resolve_addr(&self, dst: &ShimAddr, timeout_ms: u32) -> Result<(), Errno> {
        // SAFETY: the id is live (type invariant); `dst` is valid.
        errno(unsafe { ffi::rrdma_shim_cm_resolve_addr(self.as_ptr(), dst, timeout_ms) })
    }

    /// `rdma_resolve_route()`.
    pub(crate) fn resolve_route(&self, timeout_ms: u32) -> Result<(), Errno> {
        // SAFETY: the id is live (type invariant).
        errno(unsafe { ffi::rrdma_shim_cm_resolve_route(self.as_ptr(), timeout_ms) })
    }

    /// `rdma_bind_addr()` to `src`, then `rdma_listen()`.
    pub(crate) fn bind_listen(&self, src: &ShimAddr, backlog: u32) -> Result<(), Errno> {
        // SAFETY: the id is live (type invariant); `src` is valid.
        errno(unsafe { ffi::rrdma_shim_cm_bind_listen(self.as_ptr(), src, backlog) })
    }

    /// `rdma_connect_locked()` from the id's handler `h`, with `pdata` as
    /// private data.
    pub(crate) fn connect_locked(&self, h: &InHandler, pdata: &[u8]) -> Result<(), Errno> {
        if !self.is_handled_by(h) {
            return Err(EINVAL);
        }
        // SAFETY: the id is live (type invariant); we run in its handler
        // (checked just above); `pdata` outlives the call.
        errno(unsafe {
            ffi::rrdma_shim_cm_connect(self.as_ptr(), pdata.as_ptr().cast(), pdata.len() as u8)
        })
    }

    /// `rdma_accept()` from the handler `h` of the connect request that
    /// made this id, with `pdata` as private data.
    pub(crate) fn accept(
        &self,
        h: &InHandler,
        pdata: &[u8],
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<(), Errno> {
        if !self.is_handled_by(h) {
            return Err(EINVAL);
        }
        // SAFETY: the id is live (type invariant); we run in its handler
        // (checked just above); `pdata` outlives the call.
        errno(unsafe {
            ffi::rrdma_shim_cm_accept(
                self.as_ptr(),
                pdata.as_ptr().cast(),
                pdata.len() as u8,
                peer_initiator,
                peer_responder,
            )
        })
    }

    /// `rdma_disconnect()`: moves the QP to the error state and tells the
    /// peer. Harmless if already disconnected.
    pub(crate) fn disconnect(&self) {
        // SAFETY: the id is live (type invariant).
        let _ = unsafe { ffi::rrdma_shim_cm_disconnect(self.as_ptr()) };
    }

    /// The device the id is bound to (null before address resolution).
    pub(crate) fn device(&self) -> *mut IbDevice {
        // SAFETY: the id is live (type invariant).
        unsafe { ffi::rrdma_shim_cm_device(self.as_ptr()) }
    }

    /// The peer's address.
    pub(crate) fn peer(&self) -> ShimAddr {
        let mut a = ShimAddr::default();
        // SAFETY: the id is live (type invariant); `a` is a valid out-pointer.
        unsafe { ffi::rrdma_shim_cm_peer(self.as_ptr(), &mut a) };
        a
    }

    /// Hands the id to the CM from its running handler `h`, which then
    /// returns what this returns (1: the CM destroys the id); drops the
    /// queue pair and gives the context reference back now (the running
    /// handler holds a reference of its own). From another id's handler,
    /// destroys the id instead and returns 0.
    pub(crate) fn into_cm(mut self, h: &InHandler) -> c_int {
        if !self.is_handled_by(h) {
            return 0;
        }
        self.destroy_qp();
        let ctx = self.ctx;
        core::mem::forget(self);
        // SAFETY: the CM destroys the id without delivering another event;
        // this reference was handed to it by `create`/`adopt` and is given
        // back only here (the value was forgotten, so `drop` does not run;
        // its queue pair is gone).
        drop(unsafe { foreign::from_c::<T>(ctx) });
        1
    }
}

impl<T: Send + Sync> Drop for CmId<T> {
    /// Destroys the queue pair and then the id, waiting for a running
    /// handler of it: never dropped from that handler, nor with a lock its
    /// handlers or completions take.
    fn drop(&mut self) {
        self.destroy_qp();
        // SAFETY: the id is live (type invariant) and destroyed only here.
        unsafe { ffi::rrdma_shim_cm_destroy_id(self.as_ptr()) };
        // SAFETY: the id is gone: no event uses the context any more.
        drop(unsafe { foreign::from_c::<T>(self.ctx) });
    }
}
