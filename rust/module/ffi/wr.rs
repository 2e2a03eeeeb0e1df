// SPDX-License-Identifier: GPL-2.0

//! Work requests (`struct rrdma_shim_wr`) and the batch of operation
//! completions (`struct rrdma_shim_done`): the hot path's structs and
//! constants, and the scratch array an operation's work requests are
//! built in.

use super::layout::{c, u32_of, usize_of};
use super::ShimMr;

// The constants are the C header's (`layout.rs`).

/// `RRDMA_SHIM_NO_SLOT`: a work request without an operation slot.
pub(crate) const NO_SLOT: u32 = u32_of(c::RRDMA_SHIM_NO_SLOT);
/// `RRDMA_SHIM_WR_READ`.
pub(crate) const WR_READ: u32 = u32_of(c::RRDMA_SHIM_WR_READ);
/// `RRDMA_SHIM_WR_WRITE`.
pub(crate) const WR_WRITE: u32 = u32_of(c::RRDMA_SHIM_WR_WRITE);
/// `RRDMA_SHIM_WR_REG`.
pub(crate) const WR_REG: u32 = u32_of(c::RRDMA_SHIM_WR_REG);
/// `RRDMA_SHIM_WR_SINK_REG`: registers a READ sink (iWARP).
pub(crate) const WR_SINK_REG: u32 = u32_of(c::RRDMA_SHIM_WR_SINK_REG);
/// `RRDMA_SHIM_WR_SINK_READ`: an RDMA READ that invalidates its sink.
pub(crate) const WR_SINK_READ: u32 = u32_of(c::RRDMA_SHIM_WR_SINK_READ);
/// `RRDMA_SHIM_ACCESS_LOCAL_WRITE`.
pub(crate) const ACCESS_LOCAL_WRITE: u32 = u32_of(c::RRDMA_SHIM_ACCESS_LOCAL_WRITE);
/// `RRDMA_SHIM_ACCESS_REMOTE_READ`.
pub(crate) const ACCESS_REMOTE_READ: u32 = u32_of(c::RRDMA_SHIM_ACCESS_REMOTE_READ);
/// `RRDMA_SHIM_ACCESS_REMOTE_WRITE`.
pub(crate) const ACCESS_REMOTE_WRITE: u32 = u32_of(c::RRDMA_SHIM_ACCESS_REMOTE_WRITE);

/// `struct rrdma_shim_wr` (layout checked in `layout.rs`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ShimWr {
    pub(crate) opcode: u32,
    pub(crate) signaled: u32,
    pub(crate) slot: u32,
    pub(crate) sink: u32,
    pub(crate) local_addr: u64,
    pub(crate) lkey: u32,
    pub(crate) len: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) access: u32,
    pub(crate) mr: *mut ShimMr,
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
// dereferenced only by `rrdma_shim_qp_post`, called under the lock that
// owns the scratch while the registrations they name are held.
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
        crate::compat::vec_clear(&mut self.0);
        &mut self.0
    }
}

impl ShimWr {
    /// An unsignaled RDMA READ or WRITE (`opcode`) of `len` bytes between
    /// `local_addr` (under `lkey`) and `remote_addr` (under `rkey`).
    pub(crate) fn rdma(
        opcode: u32,
        local_addr: u64,
        lkey: u32,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Self {
        Self {
            opcode,
            signaled: 0,
            slot: NO_SLOT,
            sink: 0,
            local_addr,
            lkey,
            len,
            remote_addr,
            rkey,
            access: 0,
            mr: core::ptr::null_mut(),
        }
    }

    /// A registration of READ sink `sink` (iWARP) over the `len` bytes at
    /// region offset `local_addr` of `chunk`'s pages, or, with a null
    /// `chunk`, over the queue pair's scratch buffer (a write fence).
    pub(crate) fn sink_reg(chunk: *mut ShimMr, sink: u32, local_addr: u64, len: u32) -> Self {
        Self {
            sink,
            mr: chunk,
            ..Self::rdma(WR_SINK_REG, local_addr, 0, len, 0, 0)
        }
    }

    /// An unsignaled RDMA READ of `len` bytes at `remote_addr` into READ
    /// sink `sink`, as its [`Self::sink_reg`] just registered it; the
    /// sink's key is invalid once it completes.
    pub(crate) fn sink_read(sink: u32, len: u32, remote_addr: u64, rkey: u32) -> Self {
        Self {
            sink,
            ..Self::rdma(WR_SINK_READ, 0, 0, len, remote_addr, rkey)
        }
    }

    /// A registration of `mr` with `access`.
    pub(crate) fn reg(mr: *mut ShimMr, access: u32, signaled: bool) -> Self {
        Self {
            opcode: WR_REG,
            signaled: u32::from(signaled),
            slot: NO_SLOT,
            sink: 0,
            local_addr: 0,
            lkey: 0,
            len: 0,
            remote_addr: 0,
            rkey: 0,
            access,
            mr,
        }
    }
}
