// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`shim/qp.c`, `cq.c`, `poll.c`, `ctrl.c`, `post.c`):
//! their lifetime, polling, control messages and posting.

use kernel::ffi::{c_int, c_void};

use super::{IbPd, RdmaCmId, ShimWr};

/// Opaque `struct rrdma_shim_qp`: a QP with its CQs and control buffers.
#[repr(C)]
pub(crate) struct ShimQp {
    _opaque: [u8; 0],
}

extern "C" {
    /// Creates the RC QP of `id` with its CQs and control buffers.
    pub(crate) fn rrdma_shim_qp_create(
        id: *mut RdmaCmId,
        pd: *mut IbPd,
        owner: *mut c_void,
        lane: u32,
        sq_depth: u32,
        nops: u32,
        nrecv: u32,
        nrecv_idle: u32,
        nsend: u32,
        nsend_idle: u32,
        msg_len: u32,
        nsinks: u32,
        data_sinks: u32,
        sink_pages: u32,
        dma_sge: u32,
        dma_sge_rd: u32,
        out: *mut *mut ShimQp,
    ) -> c_int;
    /// Stops posting and moves the QP to the error state, without waiting.
    pub(crate) fn rrdma_shim_qp_stop(q: *mut ShimQp) -> c_int;
    /// Stops posting and drains the QP (flushes everything outstanding).
    pub(crate) fn rrdma_shim_qp_drain(q: *mut ShimQp);
    /// Destroys a drained QP, its CQs, buffers and sinks; returns how many
    /// sinks it had.
    pub(crate) fn rrdma_shim_qp_destroy(q: *mut ShimQp) -> u32;
    /// Allocates the QP's READ and fence sinks once (may sleep; needs a
    /// poll reference): 1 if allocated now, 0 if they were, or -errno.
    pub(crate) fn rrdma_shim_qp_sinks_alloc(q: *mut ShimQp) -> c_int;
    /// Whether the QP's sinks are allocated (or it has none).
    pub(crate) fn rrdma_shim_qp_has_sinks(q: *mut ShimQp) -> bool;
    /// SGEs a WRITE_DMA may gather on the QP, or a READ_DMA (`read`)
    /// scatter into (at least 1).
    pub(crate) fn rrdma_shim_qp_dma_sge(q: *mut ShimQp, read: bool) -> u32;
    /// Busy polling: polls the QP's send CQ once unless its work item is
    /// polling; returns the completions handled. Needs a poll reference.
    pub(crate) fn rrdma_shim_qp_poll(q: *mut ShimQp) -> c_int;
    /// Takes a poll reference: the QP is not destroyed until it is put.
    pub(crate) fn rrdma_shim_qp_poll_get(q: *mut ShimQp);
    /// Puts a poll reference.
    pub(crate) fn rrdma_shim_qp_poll_put(q: *mut ShimQp);
    /// Posts the receive buffers beyond those of the QP's creation, once
    /// (may sleep): 1 if it did now, 0 if it had, or -errno.
    pub(crate) fn rrdma_shim_qp_ctrl_grow(q: *mut ShimQp) -> c_int;
    /// Sends one control message.
    pub(crate) fn rrdma_shim_ctrl_send(q: *mut ShimQp, msg: *const c_void, len: u32) -> c_int;
    /// Posts `n` work requests in order; `posted` says how many were.
    pub(crate) fn rrdma_shim_post(
        q: *mut ShimQp,
        wrs: *const ShimWr,
        n: u32,
        posted: *mut u32,
    ) -> c_int;
}
