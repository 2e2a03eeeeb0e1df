// SPDX-License-Identifier: GPL-2.0

//! Owned verbs objects of a connection: its protection domain ([`Pd`]) and
//! its queue pair with completion queues and control buffers ([`Qp`]).
//!
//! Each connection has a protection domain of its own, so a key granted on
//! one connection is valid on that connection's queue pair only (a peer
//! guessing keys, which carry 8 random bits on rxe, cannot reach another
//! connection's registrations). Registrations ([`crate::mr::Mr`]) hold a
//! reference on their domain, and the domain holds its device context, so
//! the domain goes after its last registration and before its device.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::errno::{Errno, ENOMEM};
use crate::abi::Result;
use crate::device::DeviceCtx;
use crate::ffi::{self, IbPd, RdmaCmId, ShimQp, ShimWr};

/// A protection domain on a device.
///
/// # Invariants
///
/// `raw` was allocated by `rrdma_shim_alloc_pd` on `device`'s device and
/// is deallocated only by `drop`.
pub(crate) struct Pd {
    raw: NonNull<IbPd>,
    /// Keeps the device until the domain is gone (device removal waits).
    device: Arc<DeviceCtx>,
}

// SAFETY: a PD may be used and deallocated from any thread.
unsafe impl Send for Pd {}
// SAFETY: `&Pd` only hands out the pointer for verbs that take the device's
// own locks.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a protection domain on `device`.
    pub(crate) fn new(device: &Arc<DeviceCtx>) -> Result<Arc<Self>> {
        let mut raw = ptr::null_mut();
        // SAFETY: the device is live while `device` is held (device removal
        // waits for the last reference), and `raw` is a valid out-pointer.
        crate::abi::to_result(unsafe { ffi::rrdma_shim_alloc_pd(device.raw(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: allocated just above on `device`.
        Ok(Arc::new(
            Self {
                raw,
                device: device.clone(),
            },
            GFP_KERNEL,
        )?)
    }

    /// The device the domain is on.
    pub(crate) fn device(&self) -> &Arc<DeviceCtx> {
        &self.device
    }

    /// The raw PD, for registrations and the queue pair.
    pub(crate) fn as_ptr(&self) -> *mut IbPd {
        self.raw.as_ptr()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: by the type invariant; every registration and queue pair
        // on it is gone (they hold references on it).
        unsafe { ffi::rrdma_shim_dealloc_pd(self.raw.as_ptr()) };
    }
}

/// Sizes of a queue pair.
#[derive(Clone, Copy)]
pub(crate) struct QpSizes {
    /// Which of its connection's queue pairs this is (0: the connection's
    /// own; a data lane has one receive and no send buffer), reported with
    /// every operation's completion.
    pub(crate) lane: u32,
    /// Send-queue entries for work requests other than control sends.
    pub(crate) send: u32,
    /// Operation slots (completion contexts).
    pub(crate) ops: u32,
    /// Control receive buffers.
    pub(crate) recv: u32,
    /// Control receive buffers posted from the start (1 to `recv`); the
    /// others once the queue pair grows ([`Qp::ctrl_grow`]).
    pub(crate) recv_idle: u32,
    /// Control send buffers.
    pub(crate) ctrl_send: u32,
    /// Control send buffers usable from the start (1 to `ctrl_send`, or 0
    /// with none); the others once the queue pair grows.
    pub(crate) ctrl_send_idle: u32,
    /// Bytes per control buffer.
    pub(crate) msg_len: u32,
    /// READ sinks (iWARP; 0 elsewhere), each counted against the device's
    /// `max_mr` from their allocation, at the queue pair's first operation
    /// that needs one ([`Qp::sink_alloc`]), for as long as the queue pair
    /// lives.
    pub(crate) sinks: u32,
    /// Pages a READ sink maps (a chunk's).
    pub(crate) sink_pages: u32,
    /// One-page sinks for write fences (iWARP; 0 elsewhere), counted as
    /// `sinks` are; their indices follow the READ sinks'.
    pub(crate) fence_sinks: u32,
    /// Segments of a disk request one WRITE may gather (the queue pair's
    /// `max_send_sge`; the shim takes at most `RRDMA_SHIM_DMA_SGE`).
    pub(crate) dma_sge: u32,
    /// Segments one READ of a disk request may scatter into (at most
    /// `dma_sge`: the shim clamps it).
    pub(crate) dma_sge_rd: u32,
}

/// An RC queue pair with its completion queues and control buffers.
///
/// # Invariants
///
/// `raw` was created by `rrdma_shim_qp_create` on a cm_id that outlives it
/// (the owner drops the queue pair before the id), with completion callbacks
/// whose owner pointer stays valid until `drop` returns; it is drained and
/// destroyed only by `drop`. `_pd` is the domain it was created in; the
/// `sinks` READ and fence sinks the shim allocates for it (once,
/// [`SinkAlloc`]) are counted on its device until `drop`.
pub(crate) struct Qp {
    raw: NonNull<ShimQp>,
    _pd: Arc<Pd>,
    sinks: u32,
}

// SAFETY: posting and control sends take the shim's own lock; the queue pair
// may be destroyed from any thread.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl Qp {
    /// Creates the queue pair of `id` in `pd`; its completions call back
    /// with `owner`.
    ///
    /// # Safety
    ///
    /// `id` is live, has no queue pair, and outlives the returned value;
    /// `owner` stays valid for the completion callbacks until the returned
    /// value is dropped.
    pub(crate) unsafe fn new(
        id: *mut RdmaCmId,
        pd: &Arc<Pd>,
        owner: *mut c_void,
        sizes: &QpSizes,
    ) -> Result<Self, Errno> {
        let mut raw = ptr::null_mut();
        let sinks = sizes.sinks + sizes.fence_sinks;
        // SAFETY: by the function's safety requirements; `pd` is live.
        let ret = unsafe {
            ffi::rrdma_shim_qp_create(
                id,
                pd.as_ptr(),
                owner,
                sizes.lane,
                sizes.send,
                sizes.ops,
                sizes.recv,
                sizes.recv_idle,
                sizes.ctrl_send,
                sizes.ctrl_send_idle,
                sizes.msg_len,
                sizes.sinks + sizes.fence_sinks,
                sizes.sinks,
                sizes.sink_pages,
                sizes.dma_sge,
                sizes.dma_sge_rd,
                &mut raw,
            )
        };
        let Some(raw) = NonNull::new(raw).filter(|_| ret == 0) else {
            return Err(Errno::new(-ret).unwrap_or(ENOMEM));
        };
        // INVARIANT: created just above, by the function's safety
        // requirements, with no sinks yet.
        Ok(Self {
            raw,
            _pd: pd.clone(),
            sinks,
        })
    }

    /// Posts `wrs` in order, as [`QpRef::post`] does.
    pub(crate) fn post(&self, wrs: &mut [ShimWr]) -> (u32, Result<(), Errno>) {
        self.to_ref().post(wrs)
    }

    /// A borrowed handle, for posting.
    pub(crate) fn to_ref(&self) -> QpRef<'_> {
        // INVARIANT: the queue pair lives as long as `self` is borrowed.
        QpRef {
            raw: self.raw,
            _live: PhantomData,
        }
    }

    /// Posts the receive buffers the queue pair was created without
    /// ([`QpSizes::recv_idle`]) and adds the send buffers
    /// ([`QpSizes::ctrl_send_idle`]), unless it did already: before it
    /// carries a request or revoke of ours, whose answer needs one. `true`
    /// if it did now; an error after a failed post has moved the queue
    /// pair to the error state (its flushes end the connection). Allocates
    /// (may sleep: process context, no spinlock held).
    pub(crate) fn ctrl_grow(&self) -> Result<bool, Errno> {
        // SAFETY: the queue pair is live (type invariant).
        let ret = unsafe { ffi::rrdma_shim_qp_ctrl_grow(self.raw.as_ptr()) };
        crate::abi::to_result(ret.min(0)).map(|()| ret == 1)
    }

    /// Sends one control message (never blocks; `EAGAIN` when every
    /// control send buffer is in flight, `ENOTCONN` once draining).
    pub(crate) fn ctrl_send(&self, msg: &[u8]) -> Result<(), Errno> {
        // SAFETY: the queue pair is live (type invariant); `msg` is valid
        // for its length and copied before the call returns.
        let ret = unsafe {
            ffi::rrdma_shim_ctrl_send(self.raw.as_ptr(), msg.as_ptr().cast(), msg.len() as u32)
        };
        crate::abi::to_result(ret)
    }
}

/// A queue pair borrowed for posting: the owner's ([`Qp::to_ref`]), or the
/// one whose completion is being handled ([`QpRef::from_raw`]).
///
/// # Invariants
///
/// `raw` is a live queue pair, not destroyed for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct QpRef<'a> {
    raw: NonNull<ShimQp>,
    _live: PhantomData<&'a Qp>,
}

impl QpRef<'_> {
    /// The queue pair `raw` (`None` for null).
    ///
    /// # Safety
    ///
    /// A non-null `raw` is a live queue pair, not destroyed for `'a`: its
    /// completion callback runs (the queue pair's destruction waits for
    /// its callbacks).
    pub(crate) unsafe fn from_raw<'a>(raw: *mut ShimQp) -> Option<QpRef<'a>> {
        // INVARIANT: by the function's safety requirements.
        NonNull::new(raw).map(|raw| QpRef {
            raw,
            _live: PhantomData,
        })
    }

    /// Posts `wrs` in order; returns how many were posted and the errno of
    /// the first refused one. Spends every request (`ffi::spend`): none
    /// can be posted again.
    pub(crate) fn post(&self, wrs: &mut [ShimWr]) -> (u32, Result<(), Errno>) {
        let mut posted = 0;
        // SAFETY: the queue pair is live (type invariant); every local
        // registration a request names stays registered until the request
        // completes (`ShimWr`'s invariant), and none was posted before.
        let ret = unsafe {
            ffi::rrdma_shim_post(
                self.raw.as_ptr(),
                wrs.as_ptr(),
                wrs.len() as u32,
                &mut posted,
            )
        };
        ffi::spend(wrs);
        (posted, crate::abi::to_result(ret))
    }
}

/// A poll reference of a queue pair, for busy polling its send CQ
/// ([`Qp::poll_ref`]).
///
/// # Invariants
///
/// Holds one of the shim's poll references on `raw`, which keeps the
/// queue pair from being destroyed (`rrdma_shim_qp_destroy` waits for
/// none to be left); put on drop.
pub(crate) struct PollRef {
    raw: NonNull<ShimQp>,
}

// SAFETY: the shim's poll is serialized by its own lock, and a reference
// may be put from any thread.
unsafe impl Send for PollRef {}

impl PollRef {
    /// Polls the send CQ once (its completions are handled as the CQ's
    /// work item would, here); none if the work item is polling. Calls
    /// the connection's completion handlers: never with a lock they take.
    pub(crate) fn poll(&self) -> u32 {
        // SAFETY: the queue pair is live (type invariant).
        let n = unsafe { ffi::rrdma_shim_qp_poll(self.raw.as_ptr()) };
        n.max(0) as u32
    }
}

impl Drop for PollRef {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `Qp::poll_ref` (type invariant).
        unsafe { ffi::rrdma_shim_qp_poll_put(self.raw.as_ptr()) };
    }
}

impl Qp {
    /// The shim's queue pair, for an io_uring command that polls it
    /// ([`ffi::UringCmd::poll_on`]).
    pub(crate) fn raw(&self) -> *mut ffi::ShimQp {
        self.raw.as_ptr()
    }

    /// The protection domain it was created in.
    pub(crate) fn pd(&self) -> &Pd {
        &self._pd
    }

    /// A poll reference: until it is dropped, the queue pair outlives
    /// this borrow (its teardown waits). Hold it only while polling: the
    /// teardown waits for it.
    pub(crate) fn poll_ref(&self) -> PollRef {
        // SAFETY: the queue pair is live (type invariant, and `&self`).
        unsafe { ffi::rrdma_shim_qp_poll_get(self.raw.as_ptr()) };
        // INVARIANT: the reference was just taken.
        PollRef { raw: self.raw }
    }

    /// Whether the queue pair's READ and fence sinks are allocated (or it
    /// has none).
    pub(crate) fn has_sinks(&self) -> bool {
        // SAFETY: the queue pair is live (type invariant).
        unsafe { ffi::rrdma_shim_qp_has_sinks(self.raw.as_ptr()) }
    }

    /// How many DMA segments one WRITE on it may gather, or one READ
    /// (`read`) scatter into (`ffi::ShimWr::dma`).
    pub(crate) fn dma_sge(&self, read: bool) -> u32 {
        // SAFETY: the queue pair is live (type invariant).
        unsafe { ffi::rrdma_shim_qp_dma_sge(self.raw.as_ptr(), read) }
    }

    /// What allocates the queue pair's sinks outside the caller's lock
    /// ([`SinkAlloc::run`]); it holds a poll reference, so the teardown
    /// waits for it.
    pub(crate) fn sink_alloc(&self) -> SinkAlloc {
        SinkAlloc {
            r: self.poll_ref(),
            pd: self._pd.clone(),
            sinks: self.sinks,
        }
    }

    /// Moves the queue pair to the error state now, without waiting for
    /// the drain (which `drop` still does): from the return, nothing the
    /// peer sends on it is placed in our memory, and nothing is posted.
    pub(crate) fn stop(&self) -> Result<(), Errno> {
        // SAFETY: the queue pair is live (type invariant).
        crate::abi::to_result(unsafe { ffi::rrdma_shim_qp_stop(self.raw.as_ptr()) })
    }
}

/// The allocation of a queue pair's READ and fence sinks (iWARP), at its
/// first operation that needs one ([`Qp::sink_alloc`]).
pub(crate) struct SinkAlloc {
    r: PollRef,
    pd: Arc<Pd>,
    sinks: u32,
}

impl SinkAlloc {
    /// Allocates the sinks unless they are (may sleep: no lock held that
    /// completions take), counted on the device (`ENOMEM` when its
    /// registrations are all taken). The queue pair gives the count back
    /// when it is destroyed.
    pub(crate) fn run(self) -> Result<(), Errno> {
        let dev = self.pd.device();
        dev.take_mrs(self.sinks)?;
        // SAFETY: the poll reference keeps the queue pair from being
        // destroyed (`PollRef`'s invariant).
        let ret = unsafe { ffi::rrdma_shim_qp_sinks_alloc(self.r.raw.as_ptr()) };
        if ret != 1 {
            dev.put_mrs(self.sinks);
        }
        crate::abi::to_result(ret.min(0))
    }
}

impl Drop for Qp {
    /// Stops posting, drains (every outstanding work request completes or
    /// is flushed) and destroys the queue pair and its completion queues.
    /// Waits for the completion callbacks: never dropped with a lock they
    /// take.
    fn drop(&mut self) {
        // SAFETY: the queue pair is live (type invariant).
        unsafe { ffi::rrdma_shim_qp_drain(self.raw.as_ptr()) };
        // SAFETY: drained; its id is still alive (type invariant).
        let sinks = unsafe { ffi::rrdma_shim_qp_destroy(self.raw.as_ptr()) };
        // What `SinkAlloc::run` counted, if it allocated them.
        self._pd.device().put_mrs(sinks);
    }
}
