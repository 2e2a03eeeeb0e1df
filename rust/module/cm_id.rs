// SPDX-License-Identifier: GPL-2.0

//! An owned rdma_cm identifier ([`CmId`]).
//!
//! The id's context, which every event of the id carries to Rust, is one
//! reference of the owner (a connection or a listener), held exactly as long
//! as the id exists: dropping the [`CmId`] destroys the id and then gives
//! the reference back; [`CmId::into_cm`] leaves the destruction to the CM
//! (an event handler that returns non-zero) and gives it back at once.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use kernel::ffi::c_void;
use kernel::sync::Arc;

use crate::abi::errno::Errno;
use crate::abi::Result;
use crate::ffi::{self, IbDevice, RdmaCmId, ShimAddr};
use crate::foreign;

fn errno(ret: i32) -> Result<(), Errno> {
    crate::abi::to_result(ret)
}

/// An rdma_cm id owned by a `T`.
///
/// # Invariants
///
/// `raw` is a live rdma_cm id whose context is `ctx`, a reference of an
/// `Arc<T>` handed to C by [`foreign::into_c`], held until the id is gone.
pub(crate) struct CmId<T: Send + Sync + 'static> {
    raw: NonNull<RdmaCmId>,
    ctx: *mut c_void,
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
                _owner: PhantomData,
            }),
            (res, _) => {
                // SAFETY: no id was created: the reference is unused.
                drop(unsafe { foreign::from_c::<T>(ctx) });
                Err(res.err().unwrap_or(crate::abi::errno::ENOMEM))
            }
        }
    }

    /// Adopts `raw`, the new id of a connect request, for `owner`; the
    /// listen handler makes [`Self::context`] the id's context when the
    /// request handler returns 0.
    ///
    /// # Safety
    ///
    /// `raw` is the child id of the connect request being handled, and the
    /// request handler returns 0 (the CM keeps the id) if and only if the
    /// returned value is kept rather than handed back with [`Self::into_cm`].
    pub(crate) unsafe fn adopt(raw: NonNull<RdmaCmId>, owner: &Arc<T>) -> Self {
        // INVARIANT: the listen handler sets the context to `ctx` before
        // any other event of the id can run (the CM holds its handler mutex).
        Self {
            raw,
            ctx: foreign::into_c(owner.clone()),
            _owner: PhantomData,
        }
    }

    /// The context pointer the id's events carry.
    pub(crate) fn context(&self) -> *mut c_void {
        self.ctx
    }

    /// The raw id, for the shim calls that build on it.
    pub(crate) fn as_ptr(&self) -> *mut RdmaCmId {
        self.raw.as_ptr()
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

    /// `rdma_connect_locked()` with `pdata` as private data.
    ///
    /// # Safety
    ///
    /// Called from this id's event handler (its handler mutex is held).
    pub(crate) unsafe fn connect_locked(&self, pdata: &[u8]) -> Result<(), Errno> {
        // SAFETY: the id is live; by the function's safety requirements we
        // run in its handler; `pdata` outlives the call.
        errno(unsafe {
            ffi::rrdma_shim_cm_connect(self.as_ptr(), pdata.as_ptr().cast(), pdata.len() as u8)
        })
    }

    /// `rdma_accept()` with `pdata` as private data.
    ///
    /// # Safety
    ///
    /// Called from the handler of the connect request that made this id.
    pub(crate) unsafe fn accept(
        &self,
        pdata: &[u8],
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<(), Errno> {
        // SAFETY: the id is live; by the function's safety requirements its
        // handler mutex is held; `pdata` outlives the call.
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

    /// Hands the id to the CM, which destroys it once the running event
    /// handler returns non-zero; gives the context reference back now (the
    /// running handler holds a reference of its own).
    pub(crate) fn into_cm(self) {
        let ctx = self.ctx;
        core::mem::forget(self);
        // SAFETY: the CM destroys the id without delivering another event;
        // this reference was handed to it by `create`/`adopt` and is given
        // back only here (the value was forgotten, so `drop` does not run).
        drop(unsafe { foreign::from_c::<T>(ctx) });
    }
}

impl<T: Send + Sync> Drop for CmId<T> {
    /// Destroys the id, waiting for a running handler of it: never dropped
    /// from that handler, nor with a lock its handlers take.
    fn drop(&mut self) {
        // SAFETY: the id is live (type invariant) and destroyed only here.
        unsafe { ffi::rrdma_shim_cm_destroy_id(self.as_ptr()) };
        // SAFETY: the id is gone: no event uses the context any more.
        drop(unsafe { foreign::from_c::<T>(self.ctx) });
    }
}
