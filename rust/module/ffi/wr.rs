// SPDX-License-Identifier: GPL-2.0

//! Work requests (`struct rrdma_shim_wr`) and the batch of operation
//! completions (`struct rrdma_shim_done`): the hot path's structs and
//! constants, and the scratch array an operation's work requests are
//! built in.

use super::layout::{c, u32_of, usize_of};
use crate::mr::Lent;

// The constants are the C header's (`layout.rs`).

/// `RRDMA_SHIM_NO_SLOT`: a work request without an operation slot.
pub(crate) const NO_SLOT: u32 = u32_of(c::RRDMA_SHIM_NO_SLOT);
/// `RRDMA_SHIM_COPIED_SLOT`: a write signaled so that the provider copies
/// its bytes before the operation completes; its completion is nothing.
pub(crate) const COPIED_SLOT: u32 = u32_of(c::RRDMA_SHIM_COPIED_SLOT);
/// `RRDMA_SHIM_WR_READ`.
const WR_READ: u32 = u32_of(c::RRDMA_SHIM_WR_READ);
/// `RRDMA_SHIM_WR_WRITE`.
const WR_WRITE: u32 = u32_of(c::RRDMA_SHIM_WR_WRITE);
/// `RRDMA_SHIM_WR_REG`.
const WR_REG: u32 = u32_of(c::RRDMA_SHIM_WR_REG);
/// `RRDMA_SHIM_WR_SINK_REG`: registers a READ sink (iWARP).
const WR_SINK_REG: u32 = u32_of(c::RRDMA_SHIM_WR_SINK_REG);
/// `RRDMA_SHIM_WR_SINK_READ`: an RDMA READ that invalidates its sink.
const WR_SINK_READ: u32 = u32_of(c::RRDMA_SHIM_WR_SINK_READ);
/// `RRDMA_SHIM_WR_SINK_REG_DMA`: registers a READ sink over a disk
/// request's pages (iWARP).
const WR_SINK_REG_DMA: u32 = u32_of(c::RRDMA_SHIM_WR_SINK_REG_DMA);
/// `RRDMA_SHIM_WR_READ_DMA`: an RDMA READ into a disk request's pages.
const WR_READ_DMA: u32 = u32_of(c::RRDMA_SHIM_WR_READ_DMA);
/// `RRDMA_SHIM_WR_WRITE_DMA`: an RDMA WRITE from a disk request's pages.
const WR_WRITE_DMA: u32 = u32_of(c::RRDMA_SHIM_WR_WRITE_DMA);
/// An opcode the shim refuses: what a work request becomes once handed to
/// the shim, so that it is never posted twice ([`spend`]).
const WR_SPENT: u32 = u32::MAX;
/// `RRDMA_SHIM_ACCESS_LOCAL_WRITE`.
pub(crate) const ACCESS_LOCAL_WRITE: u32 = u32_of(c::RRDMA_SHIM_ACCESS_LOCAL_WRITE);
/// `RRDMA_SHIM_ACCESS_REMOTE_READ`.
pub(crate) const ACCESS_REMOTE_READ: u32 = u32_of(c::RRDMA_SHIM_ACCESS_REMOTE_READ);
/// `RRDMA_SHIM_ACCESS_REMOTE_WRITE`.
pub(crate) const ACCESS_REMOTE_WRITE: u32 = u32_of(c::RRDMA_SHIM_ACCESS_REMOTE_WRITE);

/// `struct rrdma_shim_wr` (layout checked in `layout.rs`).
///
/// # Invariants
///
/// A local registration it names (`lkey`, `mr`) was [`Lent`], or is a
/// request's DMA mapping ([`super::DmaMap`]): it stays registered (mapped)
/// until the request, posted, completes. Neither `Clone` nor
/// settable outside `ffi` (whose `layout.rs` only reads offsets), and
/// posted at most once ([`spend`]). Which operation slot a request
/// completes (`slot`, `signaled`) is the slots' bookkeeping, not this
/// type's: a wrong slot would settle another operation's lease.
#[repr(C)]
pub(crate) struct ShimWr {
    pub(super) opcode: u32,
    pub(crate) signaled: u32,
    pub(crate) slot: u32,
    pub(super) sink: u32,
    pub(super) local_addr: u64,
    pub(super) lkey: u32,
    pub(crate) len: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(super) access: u32,
    pub(super) mr: *mut super::ShimMr,
}

/// `struct rrdma_shim_done`: one operation completion of a batch (the
/// slot its work request carried, the work completion's status; layout
/// checked in `layout.rs`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ShimDone {
    pub(crate) slot: u32,
    pub(crate) status: u32,
}

/// `RRDMA_SHIM_POLL_BATCH`: most completions in one batch.
pub(crate) const POLL_BATCH: usize = usize_of(c::RRDMA_SHIM_POLL_BATCH);

/// Room for the work requests of one operation, built and posted under
/// the lock of the connection that owns it (allocated once: posting
/// allocates nothing). [`WrScratch::start`] hands it out empty.
pub(crate) struct WrScratch(kernel::prelude::KVec<ShimWr>);

// SAFETY: `ShimWr` is plain data; the registration pointers in it are
// dereferenced only by `rrdma_shim_post`, and the registrations they name
// are held until the requests complete (`ShimWr`'s invariant).
unsafe impl Send for WrScratch {}
// SAFETY: as for `Send`; a shared reference gives no access to them.
unsafe impl Sync for WrScratch {}

impl WrScratch {
    /// Room for `n` work requests.
    pub(crate) fn new(n: usize) -> kernel::error::Result<Self> {
        Ok(Self(kernel::prelude::KVec::with_capacity(
            n,
            kernel::prelude::GFP_KERNEL,
        )?))
    }

    /// The scratch, emptied, for one operation's work requests.
    pub(crate) fn start(&mut self) -> &mut kernel::prelude::KVec<ShimWr> {
        // Not `Copy`: emptied one by one (an operation built a few).
        while crate::compat::vec_pop(&mut self.0).is_some() {}
        &mut self.0
    }

    /// How many work requests it holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl ShimWr {
    /// An unsignaled RDMA READ of `len` bytes at `remote_addr` (under
    /// `rkey`) into `local_addr` of `chunk`.
    pub(crate) fn read(
        local_addr: u64,
        chunk: Lent<'_>,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Self {
        Self {
            lkey: chunk.lkey(),
            ..Self::remote(WR_READ, local_addr, len, remote_addr, rkey)
        }
    }

    /// An unsignaled RDMA WRITE of `len` bytes at `local_addr` of `chunk`
    /// to `remote_addr` (under `rkey`).
    /// A WRITE of an operation that completes once sent: signaled (its
    /// completion is nothing, [`COPIED_SLOT`]) so that the provider copies
    /// its bytes before the operation's own completion, after which the
    /// caller may reuse the buffer. siw sends an unsignaled request of a
    /// page or more from the pages themselves, which TCP keeps (and may
    /// send again) until they are acknowledged. Other requests: unchanged.
    pub(crate) fn copy_before_completion(&mut self) {
        if matches!(self.opcode, WR_WRITE | WR_WRITE_DMA) {
            self.signaled = 1;
            self.slot = COPIED_SLOT;
        }
    }

    pub(crate) fn write(
        local_addr: u64,
        chunk: Lent<'_>,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Self {
        Self {
            lkey: chunk.lkey(),
            ..Self::remote(WR_WRITE, local_addr, len, remote_addr, rkey)
        }
    }

    /// An unsignaled RDMA READ into (`read`) or WRITE from `g`'s share of
    /// a request's DMA segments `map` (at most `map.sge(read)` of them: the
    /// shim refuses more), at `g.remote_off` under `rkey`, with the local
    /// DMA key of the queue pair's domain (which mapped them).
    pub(crate) fn dma(
        read: bool,
        g: &crate::abi::ops::DmaGather,
        map: &super::DmaMap<'_>,
        rkey: u32,
    ) -> Self {
        let opcode = if read { WR_READ_DMA } else { WR_WRITE_DMA };
        let segs = map.segs.get(g.seg..).unwrap_or(&[]);
        Self {
            // The segments' count, in the request's `lkey`.
            lkey: g.nsegs.min(segs.len() as u32),
            // C's `mr` is a union with `segs`, which the shim reads while
            // posting (the request keeps them until it ends).
            mr: segs.as_ptr().cast_mut().cast(),
            ..Self::remote(opcode, u64::from(g.seg_off), g.len, g.remote_off, rkey)
        }
    }

    /// An unsignaled RDMA READ of no bytes at `remote_addr` (under
    /// `rkey`, which the responder need not check: C9-88): on
    /// RoCE/InfiniBand its response follows the placement of every
    /// earlier write of its queue pair (a fence).
    pub(crate) fn read_empty(remote_addr: u64, rkey: u32) -> Self {
        Self::remote(WR_READ, 0, 0, remote_addr, rkey)
    }

    /// A request of `opcode` naming no local registration.
    fn remote(opcode: u32, local_addr: u64, len: u32, remote_addr: u64, rkey: u32) -> Self {
        // INVARIANT: it names no local registration.
        Self {
            opcode,
            signaled: 0,
            slot: NO_SLOT,
            sink: 0,
            local_addr,
            lkey: 0,
            len,
            remote_addr,
            rkey,
            access: 0,
            mr: core::ptr::null_mut(),
        }
    }

    /// A registration of READ sink `sink` (iWARP) over the `len` bytes at
    /// region offset `local_addr` of `chunk`'s pages, or, with no
    /// `chunk`, over the queue pair's scratch buffer (a write fence).
    pub(crate) fn sink_reg(chunk: Option<Lent<'_>>, sink: u32, local_addr: u64, len: u32) -> Self {
        Self {
            sink,
            mr: chunk.map_or(core::ptr::null_mut(), |c| c.as_ptr()),
            ..Self::remote(WR_SINK_REG, local_addr, len, 0, 0)
        }
    }

    /// A registration of READ sink `sink` (iWARP) over bytes `off` to
    /// `off + len` of a disk request's DMA segments `map`, which have no
    /// gap there and no more pages than a sink maps
    /// (`abi::ops::sink_ranges`).
    pub(crate) fn sink_reg_dma(map: &super::DmaMap<'_>, sink: u32, off: u64, len: u32) -> Self {
        Self {
            sink,
            // The segments' count, in the request's `lkey` (unused by a
            // sink registration).
            lkey: map.segs.len() as u32,
            // C's `mr` is a union with `segs`, which the shim reads while
            // posting (the request keeps them until it ends).
            mr: map.segs.as_ptr().cast_mut().cast(),
            ..Self::remote(WR_SINK_REG_DMA, off, len, 0, 0)
        }
    }

    /// An unsignaled RDMA READ of `len` bytes at `remote_addr` into READ
    /// sink `sink`, as its [`Self::sink_reg`] just registered it; the
    /// sink's key is invalid once it completes.
    pub(crate) fn sink_read(sink: u32, len: u32, remote_addr: u64, rkey: u32) -> Self {
        Self {
            sink,
            ..Self::remote(WR_SINK_READ, 0, len, remote_addr, rkey)
        }
    }

    /// A registration of `mr` with `access`.
    pub(crate) fn reg(mr: Lent<'_>, access: u32, signaled: bool) -> Self {
        Self {
            signaled: u32::from(signaled),
            access,
            mr: mr.as_ptr(),
            ..Self::remote(WR_REG, 0, 0, 0, 0)
        }
    }
}

/// Marks `wrs` as handed to the shim: the shim refuses them from now on,
/// so a request is posted at most once, while what it names is held.
pub(crate) fn spend(wrs: &mut [ShimWr]) {
    for w in wrs {
        w.opcode = WR_SPENT;
    }
}
