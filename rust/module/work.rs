// SPDX-License-Identifier: GPL-2.0

//! What the module ran on behalf of the fabric: counts of the callbacks
//! that the RDMA core and rdma_cm made into a file's connections.
//!
//! Everything the module does for a connection starts either in a system
//! call of the file's own process or in one of these callbacks (the entry
//! points of `entry/conn.rs`). On an exporter, whose memory a peer reads
//! and writes with one-sided operations, the callbacks are the only work
//! the peer can cause, and a one-sided operation causes none: the bench
//! shows that these counts do not move while the peer's operations run.
//! Shown in fdinfo (`rrdma-work-*`); they only grow.

use core::sync::atomic::{AtomicU64, Ordering};

/// A kind of callback.
#[derive(Clone, Copy)]
pub(crate) enum Callback {
    /// An rdma_cm event of a connection's id.
    CmEvent,
    /// A control message received.
    CtrlRecv,
    /// A completion of a work request the connection posted (registration,
    /// control send) or of a failed one, or a batch of its operations'
    /// completions (one poll of a send CQ, see `shim/cq.c`).
    Completion,
}

/// Callback counts of one file's connections, connections gone included,
/// and the iWARP write fences they posted (`rrdma-write-fences`: one per
/// batch or group of writes, see `Conn::post_ops`).
pub(crate) struct FabricWork {
    cm_events: AtomicU64,
    ctrl_recv: AtomicU64,
    completions: AtomicU64,
    fences: AtomicU64,
    /// Fences callers asked for (`RRDMA_OP_FENCE`), one per path they
    /// went on (`rrdma-op-fences`: only grows).
    op_fences: AtomicU64,
    /// Fences callers asked for that completed at once, with nothing to
    /// wait for (`rrdma-op-fences-at-once`: only grows).
    op_fences_now: AtomicU64,
    /// Data lanes established (`rrdma-lanes-up`: now).
    lanes_up: AtomicU64,
    /// Operations posted on a data lane (`rrdma-lane-ops`: only grows).
    lane_ops: AtomicU64,
    /// Completions a synchronous operation's busy polling handled
    /// (`rrdma-work-sync-polled`: only grows; module parameter
    /// `sync_poll_us`).
    sync_polled: AtomicU64,
    /// Completion records read(2) gathered after its first look
    /// (`rrdma-work-read-gathered`: only grows, `abi::gather`).
    read_gathered: AtomicU64,
    /// io_uring commands whose IOPOLL poller found their completion
    /// (`rrdma-work-uring-polled`: only grows).
    uring_polled: AtomicU64,
    /// io_uring commands issued to rrdma and not ended yet: posted, or
    /// waiting for room (`rrdma-uring-in-flight`: now). A closed ring's
    /// commands end in io_uring's exit work, after the close returned.
    uring_in_flight: AtomicU64,
    /// Queue pairs that allocated their READ and fence sinks (iWARP), at
    /// their first operation (`rrdma-sink-allocs`: only grows).
    sink_allocs: AtomicU64,
    /// Batches of operation completions handled in softirq, of those
    /// `completions` counts (`rrdma-work-softirq`: only grows; module
    /// parameter `cq_softirq`).
    softirq: AtomicU64,
}

impl FabricWork {
    pub(crate) const fn new() -> Self {
        Self {
            cm_events: AtomicU64::new(0),
            ctrl_recv: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            fences: AtomicU64::new(0),
            op_fences: AtomicU64::new(0),
            op_fences_now: AtomicU64::new(0),
            lanes_up: AtomicU64::new(0),
            lane_ops: AtomicU64::new(0),
            sync_polled: AtomicU64::new(0),
            read_gathered: AtomicU64::new(0),
            uring_polled: AtomicU64::new(0),
            uring_in_flight: AtomicU64::new(0),
            sink_allocs: AtomicU64::new(0),
            softirq: AtomicU64::new(0),
        }
    }

    /// Counts a batch of operation completions handled in softirq.
    pub(crate) fn softirq(&self) {
        self.softirq.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a queue pair that allocated its sinks.
    pub(crate) fn sink_alloc(&self) {
        self.sink_allocs.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` completions handled by busy polling.
    pub(crate) fn sync_polled(&self, n: u32) {
        self.sync_polled.fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// Counts records a read(2) gathered after its first look.
    pub(crate) fn read_gathered(&self, n: usize) {
        self.read_gathered.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts an io_uring command completed by its IOPOLL poller.
    pub(crate) fn uring_polled(&self) {
        self.uring_polled.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an io_uring command issued ([`Self::uring_ended`] when it
    /// ends, or is not taken).
    pub(crate) fn uring_issued(&self) {
        self.uring_in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an issued io_uring command ended.
    pub(crate) fn uring_ended(&self) {
        self.uring_in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts a data lane established.
    pub(crate) fn lane_up(&self) {
        self.lanes_up.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an established data lane gone.
    pub(crate) fn lane_down(&self) {
        self.lanes_up.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts an operation posted on a data lane.
    pub(crate) fn lane_op(&self) {
        self.lane_ops.fetch_add(1, Ordering::Relaxed);
    }

    /// Operations posted on a data lane so far.
    pub(crate) fn lane_ops(&self) -> u64 {
        self.lane_ops.load(Ordering::Relaxed)
    }

    /// Counts one write fence posted.
    pub(crate) fn fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a caller's fence posted on one path.
    pub(crate) fn op_fence(&self) {
        self.op_fences.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a caller's fence that completed at once.
    pub(crate) fn op_fence_now(&self) {
        self.op_fences_now.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one callback. Relaxed: a statistic, ordered with nothing.
    pub(crate) fn count(&self, kind: Callback) {
        let c = match kind {
            Callback::CmEvent => &self.cm_events,
            Callback::CtrlRecv => &self.ctrl_recv,
            Callback::Completion => &self.completions,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The fdinfo lines: each key NUL-terminated, with its count.
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 14] {
        [
            (
                b"rrdma-work-cm-events\0",
                self.cm_events.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-work-ctrl-recv\0",
                self.ctrl_recv.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-work-completions\0",
                self.completions.load(Ordering::Relaxed),
            ),
            (b"rrdma-write-fences\0", self.fences.load(Ordering::Relaxed)),
            (b"rrdma-op-fences\0", self.op_fences.load(Ordering::Relaxed)),
            (
                b"rrdma-op-fences-at-once\0",
                self.op_fences_now.load(Ordering::Relaxed),
            ),
            (b"rrdma-lanes-up\0", self.lanes_up.load(Ordering::Relaxed)),
            (b"rrdma-lane-ops\0", self.lane_ops.load(Ordering::Relaxed)),
            (
                b"rrdma-work-sync-polled\0",
                self.sync_polled.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-work-read-gathered\0",
                self.read_gathered.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-work-uring-polled\0",
                self.uring_polled.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-uring-in-flight\0",
                self.uring_in_flight.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-sink-allocs\0",
                self.sink_allocs.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-work-softirq\0",
                self.softirq.load(Ordering::Relaxed),
            ),
        ]
    }
}
