// SPDX-License-Identifier: GPL-2.0

//! rrdma-blk's disks (`shim/blk.c`): a disk, owned, and one request of it,
//! ended exactly once.

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};

use super::layout::{c, u32_of};
use crate::abi::ops::DmaSeg;
use crate::abi::Result;

/// `struct rrdma_shim_blk_shape`: a disk's shape.
#[repr(C)]
pub(crate) struct BlkShape {
    pub(crate) sectors: u64,
    pub(crate) block_size: u32,
    pub(crate) io_bytes: u32,
    pub(crate) depth: u32,
    pub(crate) read_only: u32,
}

/// `struct rrdma_shim_blk_io`: one request as the shim hands it over.
#[repr(C)]
pub(crate) struct BlkIo {
    pub(crate) pos: u64,
    pub(crate) len: u32,
    pub(crate) tag: u32,
    pub(crate) op: u32,
    /// Non-zero: its bytes are in its own pages, to be mapped for the
    /// queue pair it is posted on ([`BlkRequest::dma_map`]); zero: in its
    /// staging slot.
    pub(crate) zero_copy: u32,
    /// Non-zero: the disk is being removed (`rrdma_shim_blk_destroy`): a
    /// request that would wait for its connection fails instead.
    pub(crate) dying: u32,
    pub(crate) pad: u32,
}

/// `RRDMA_SHIM_BLK_STAGE`: the queue call's answer to a request offered
/// with zero copy that its queue pair cannot take so: stage its bytes and
/// queue it again.
pub(crate) const BLK_STAGE: i32 = super::layout::i32_of(c::RRDMA_SHIM_BLK_STAGE);

/// `struct rrdma_shim_blk_status`: what a disk's sysfs files show.
#[repr(C)]
pub(crate) struct BlkStatus {
    pub(crate) peer: super::ShimAddr,
    pub(crate) fences: u64,
    pub(crate) reconnects: u64,
    pub(crate) zero_copy: u64,
    pub(crate) staged: u64,
    pub(crate) on_lanes: u64,
    pub(crate) state: u32,
    pub(crate) pad: u32,
}

/// `RRDMA_SHIM_BLK_UP`: the disk's connection is up.
pub(crate) const BLK_UP: u32 = u32_of(c::RRDMA_SHIM_BLK_UP);
/// `RRDMA_SHIM_BLK_RECONNECTING`: it failed and connects again.
pub(crate) const BLK_RECONNECTING: u32 = u32_of(c::RRDMA_SHIM_BLK_RECONNECTING);
/// `RRDMA_SHIM_BLK_DOWN`: it ended for good.
pub(crate) const BLK_DOWN: u32 = u32_of(c::RRDMA_SHIM_BLK_DOWN);

/// `RRDMA_SHIM_BLK_READ`.
pub(crate) const BLK_READ: u32 = u32_of(c::RRDMA_SHIM_BLK_READ);
/// `RRDMA_SHIM_BLK_WRITE`: completes once sent.
pub(crate) const BLK_WRITE: u32 = u32_of(c::RRDMA_SHIM_BLK_WRITE);
/// `RRDMA_SHIM_BLK_WRITE_FUA`: completes once placed.
pub(crate) const BLK_WRITE_FUA: u32 = u32_of(c::RRDMA_SHIM_BLK_WRITE_FUA);
/// `RRDMA_SHIM_BLK_FLUSH`: the writes completed before it, placed.
pub(crate) const BLK_FLUSH: u32 = u32_of(c::RRDMA_SHIM_BLK_FLUSH);

/// `struct rrdma_blk` (opaque).
#[repr(C)]
pub(crate) struct ShimBlk {
    _p: [u8; 0],
}

/// `struct request` (opaque).
#[repr(C)]
pub(crate) struct Request {
    _p: [u8; 0],
}

extern "C" {
    fn rrdma_shim_blk_create(
        owner: *mut c_void,
        index: u32,
        shape: *const BlkShape,
        pages: *mut *mut c_void,
        err: *mut c_int,
    ) -> *mut ShimBlk;
    fn rrdma_shim_blk_destroy(b: *mut ShimBlk);
    fn rrdma_shim_blk_close(b: *mut ShimBlk, force: bool) -> c_int;
    fn rrdma_shim_blk_end(rq: *mut Request, status: c_int);
    fn rrdma_shim_blk_dma_unmap(rq: *mut Request);
    fn rrdma_shim_blk_dma_map(
        rq: *mut Request,
        pd: *mut super::IbPd,
        segs: *mut *const DmaSeg,
        nsegs: *mut u32,
    ) -> c_int;
    fn rrdma_shim_capable_sys_admin() -> bool;
    fn rrdma_shim_module_get();
    fn rrdma_shim_module_put();
}

/// A reference to this module: `rmmod` is refused while one exists.
pub(crate) struct ModuleRef(());

impl ModuleRef {
    /// Takes a reference (the module is live: its code is running).
    pub(crate) fn take() -> Self {
        // SAFETY: called from the module's own code, so it is not gone.
        unsafe { rrdma_shim_module_get() };
        Self(())
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: the reference `take` took.
        unsafe { rrdma_shim_module_put() };
    }
}

/// Whether the caller has CAP_SYS_ADMIN (audited as `capable()` is).
pub(crate) fn capable_sys_admin() -> bool {
    // SAFETY: no preconditions; reads the current task's credentials.
    unsafe { rrdma_shim_capable_sys_admin() }
}

/// A disk the shim added; removed when dropped.
///
/// # Invariants
///
/// `self.0` came from `rrdma_shim_blk_create` and is destroyed only by
/// `Drop`.
pub(crate) struct Disk(NonNull<ShimBlk>);

// SAFETY: the shim's disk may be used and removed from any thread.
unsafe impl Send for Disk {}
// SAFETY: `close` takes the disk's own mutex.
unsafe impl Sync for Disk {}

impl Disk {
    /// Adds disk `rrdmab{index}` of `shape` over the staging `pages`.
    ///
    /// # Safety
    ///
    /// `owner` stays valid for `rrdma_rust_blk_queue` until this value is
    /// dropped; `pages` holds `shape.depth` slots of `shape.io_bytes` and
    /// stays valid, with its pages, until then too.
    pub(crate) unsafe fn add(
        owner: *const c_void,
        index: u32,
        shape: &BlkShape,
        pages: *mut *mut c_void,
    ) -> Result<Self> {
        let mut err: c_int = 0;
        // SAFETY: the caller's promise; `shape` and `err` are valid.
        let b = unsafe { rrdma_shim_blk_create(owner.cast_mut(), index, shape, pages, &mut err) };
        match NonNull::new(b) {
            // INVARIANT: created here, destroyed by `Drop`.
            Some(b) => Ok(Self(b)),
            None => Err(crate::abi::to_result(err)
                .err()
                .unwrap_or(crate::abi::errno::EIO)),
        }
    }

    /// Closes the disk to new openers: `EBUSY` if something holds it open
    /// (mounted, swap, an open file) and not `force`. Sleeps.
    pub(crate) fn close(&self, force: bool) -> Result {
        // SAFETY: by the type invariant, the disk exists.
        crate::abi::to_result(unsafe { rrdma_shim_blk_close(self.0.as_ptr(), force) })
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        // SAFETY: by the type invariant; it waits for the requests in flight.
        unsafe { rrdma_shim_blk_destroy(self.0.as_ptr()) };
    }
}

/// A request of a disk being posted: ended exactly once, by
/// [`BlkRequest::end`]. Not `Clone`.
pub(crate) struct BlkRequest(NonNull<Request>);

// SAFETY: blk-mq keeps a started request valid until it is ended, from
// any context.
unsafe impl Send for BlkRequest {}
// SAFETY: a shared reference gives no access to the request.
unsafe impl Sync for BlkRequest {}

impl BlkRequest {
    /// # Safety
    ///
    /// `rq` is a started request of an rrdma disk, which the caller ends
    /// only through this value if it keeps it (its queue call then
    /// returns 0).
    pub(crate) unsafe fn new(rq: NonNull<Request>) -> Self {
        Self(rq)
    }

    /// Its segments mapped for the device of `qp` (once: a later call for
    /// the same device finds them mapped), with the local DMA key of
    /// `qp`'s domain: `ENOMEM` if the device cannot map them, `EINVAL`
    /// for a request not offered with zero copy. Any context; the caller
    /// keeps the device (holds a lock its removal takes) until the request
    /// is posted or [`Self::dma_unmap`] unmaps it.
    pub(crate) fn dma_map(&mut self, qp: &crate::verbs::Qp) -> Result<DmaMap<'_>> {
        let (mut segs, mut n) = (core::ptr::null(), 0u32);
        // SAFETY: the request is started and not ended (`new`'s contract),
        // and the queue pair's domain is live (`&Qp`); the out pointers
        // are valid.
        let ret =
            unsafe { rrdma_shim_blk_dma_map(self.0.as_ptr(), qp.pd().as_ptr(), &mut segs, &mut n) };
        crate::abi::to_result(ret)?;
        if segs.is_null() {
            return Err(crate::abi::errno::EINVAL);
        }
        // SAFETY: the shim gave `n` segments in the request's own data,
        // which stay as they are until it ends or is mapped again, and
        // `self` is borrowed mutably (so neither) for the slice's life.
        let segs = unsafe { core::slice::from_raw_parts(segs, n as usize) };
        Ok(DmaMap {
            segs,
            max_sge: qp.dma_sge(false),
            max_sge_rd: qp.dma_sge(true),
        })
    }

    /// Unmaps its segments if [`Self::dma_map`] mapped them: it was not
    /// posted. Any context.
    pub(crate) fn dma_unmap(&mut self) {
        // SAFETY: the request is started and not ended (`new`'s contract);
        // `&mut self` ends every `DmaMap` of it.
        unsafe { rrdma_shim_blk_dma_unmap(self.0.as_ptr()) };
    }

    /// Ends it with `status` (0, or a negative errno: an I/O error); a
    /// staged read's bytes are copied from its staging slot first, and a
    /// request's DMA mapping goes. Any context.
    pub(crate) fn end(self, status: i32) {
        // SAFETY: by `new`'s contract, the request is started and not yet
        // ended; `self` is consumed.
        unsafe { rrdma_shim_blk_end(self.0.as_ptr(), status) };
    }
}

/// A request's segments mapped for a queue pair's device
/// ([`BlkRequest::dma_map`]).
///
/// # Invariants
///
/// The segments stay mapped, for the device whose local DMA key the
/// shim names them with, until the request ends: a work request that
/// names them keeps the request from ending (it holds it) until it
/// completes.
pub(crate) struct DmaMap<'a> {
    pub(crate) segs: &'a [DmaSeg],
    /// Segments one WRITE of the queue pair may gather ([`Self::sge`]).
    max_sge: u32,
    /// Segments one READ of the queue pair may scatter into.
    max_sge_rd: u32,
}

impl DmaMap<'_> {
    /// Segments one work request may take: a READ scatters into up to
    /// `max_sge_rd`, a WRITE gathers up to `max_sge` (the shim refuses
    /// more).
    pub(crate) fn sge(&self, read: bool) -> u32 {
        if read {
            self.max_sge_rd
        } else {
            self.max_sge
        }
    }
}
