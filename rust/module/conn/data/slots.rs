// SPDX-License-Identifier: GPL-2.0

//! A path's operation slots: each holds one operation in flight
//! ([`OpCtx`]: where it reports, what it holds), with the send queue's room
//! and the iWARP READ and fence sinks' free lists. Preallocated: posting
//! and completing an operation never allocate.

use super::*;

/// An operation in flight.
pub(super) struct OpCtx {
    /// Its lease on its region's entry in its path's registration cache
    /// (none: a fence): the entry keeps the region and the registrations
    /// its requests name while it is in flight, so that ending it never
    /// frees them (which cannot be done in softirq).
    pub(super) lease: Option<Lease>,
    /// The in-flight count of its import (a fence's: its last write's,
    /// once posted).
    pub(super) uses: Option<Arc<Uses>>,
    pub(super) user_data: u64,
    pub(super) opcode: u32,
    pub(super) wrs: u32,
    pub(super) bytes: u64,
    /// Who waits for its end, if not the file's ring.
    pub(super) waiter: Option<Waiter>,
    /// The first of the READ and fence sinks it holds (iWARP), chained
    /// through [`Slots::sink_next`]; [`NO_SINK`] if none. Free again once
    /// it completes.
    pub(super) sinks: u32,
    /// A write posted unsignaled without its own fence: the id of its
    /// batch's fence, whose completion completes it (a completion of its
    /// own comes only with an error).
    pub(super) batch: Option<u64>,
    /// Whether its completion is a write fence's (a write with its own
    /// fence, or a posted batch fence): one fewer in flight.
    pub(super) fenced: bool,
    /// Its path's write count ([`Slots::wseq`]) once it was posted.
    pub(super) covers: u64,
    /// Whether its success proves every write posted before it on its
    /// queue pair placed: on iWARP one that ends with a READ, on
    /// RoCE/InfiniBand (acknowledged in order) any.
    pub(super) proves: bool,
    /// A fence a caller asked for that went on several paths: where their
    /// last completion reports.
    pub(super) join: Option<Arc<FenceJoin>>,
    /// What the operation is.
    pub(super) kind: OpKind,
}

/// The end of a chain of sinks.
pub(super) const NO_SINK: u32 = u32::MAX;

impl OpCtx {
    /// Whether its end is reported to userspace (a batch fence's is not).
    pub(super) fn reports(&self) -> bool {
        matches!(self.kind, OpKind::User | OpKind::Barrier { .. })
    }

    /// Reports its end with `status` to its waiter (see
    /// [`ReportTo::report`]); otherwise returns the record for the file's
    /// ring. One fence of a caller's that went on several paths reports
    /// only as the last of them, with the first failure's status.
    pub(super) fn finish(&mut self, mut status: i32, work: &FabricWork) -> Option<Completion> {
        if let Some(j) = self.join.take() {
            let (to, first) = j.arrive(1, status)?;
            status = first;
            self.user_data = to.user_data;
            self.opcode = to.opcode;
            self.waiter = to.waiter;
        }
        let mut to = ReportTo {
            user_data: self.user_data,
            opcode: self.opcode,
            waiter: self.waiter.take(),
        };
        to.report(status, self.bytes, work)
    }
}

/// Who waits for an operation's end, when the file's ring does not.
pub(crate) enum Waiter {
    /// A synchronous caller (`RW_SYNC`).
    Sync(Arc<SyncWait>),
    /// An io_uring command.
    Uring(ffi::UringCmd),
    /// A request of an rrdma-blk disk.
    Blk(ffi::BlkRequest),
}

impl Waiter {
    /// Tells it the end with `status`, having moved `bytes`: wakes the
    /// synchronous caller, completes the io_uring command (counted in
    /// `work` if its IOPOLL poller took it) or ends the block request.
    /// Any context, softirq included.
    pub(super) fn tell(self, status: i32, bytes: u64, work: &FabricWork) {
        match self {
            Waiter::Sync(s) => s.set(status),
            Waiter::Uring(u) => {
                // The CQE's `res`: the bytes moved, or the negative errno.
                let res = match status {
                    0 => i32::try_from(bytes).unwrap_or(i32::MAX),
                    e => e,
                };
                if u.complete(res) {
                    work.uring_polled();
                }
                work.uring_ended();
            }
            Waiter::Blk(r) => r.end(status),
        }
    }

    /// The block request, if it is one.
    pub(super) fn blk_mut(&mut self) -> Option<&mut ffi::BlkRequest> {
        match self {
            Waiter::Blk(r) => Some(r),
            _ => None,
        }
    }

    /// Whether it is an io_uring command.
    pub(super) fn is_uring(&self) -> bool {
        matches!(self, Waiter::Uring(_))
    }

    /// An io_uring command's IOPOLL polls queue pair `qp`'s completions.
    pub(super) fn poll_on(&self, qp: &crate::verbs::Qp) {
        if let Waiter::Uring(u) = self {
            u.poll_on(qp);
        }
    }
}

/// Kinds of [`OpCtx`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum OpKind {
    /// An operation of userspace.
    User,
    /// A fence of userspace's (`RRDMA_OP_FENCE`) on one path; `sent` is
    /// its import's count of writes sent when it was posted
    /// (`SentLedger::count`).
    Barrier { sent: u64 },
    /// A batch's write fence (see [`FenceGroup`]), not reported itself.
    /// `id` tells it from any later occupant of its slot; `posted` whether
    /// its work requests went out.
    Fence { id: u64, posted: bool },
}

/// Operation slots (one completion context each in the shim) and the send
/// queue's room, for the queue pair's `depth` operation entries.
/// Preallocated for [`SLOTS_MAX`] with the operations' contexts in place:
/// posting and completing an operation never allocate.
pub(in crate::conn) struct Slots {
    pub(super) ops: KVec<Option<OpCtx>>,
    pub(super) free: KVec<u32>,
    /// Operation entries of the current queue pair (0 without one); the
    /// slots below it are the ones the shim has completion contexts for.
    pub(super) depth: u32,
    pub(super) sq_free: u32,
    /// The queue pair's READ sinks no operation holds (iWARP).
    pub(super) sinks_free: KVec<u32>,
    /// The queue pair's READ sinks (indices below it; the fence sinks'
    /// follow).
    pub(super) sinks: u32,
    /// The queue pair's fence sinks no operation holds (iWARP).
    pub(super) fences_free: KVec<u32>,
    /// The queue pair's fence sinks (indices from `sinks`).
    pub(super) fences: u32,
    /// Whether the free lists hold the queue pair's sinks: they are
    /// allocated at its first operation ([`Conn::ready_sinks`]), so until
    /// then an iWARP queue pair's lists are empty. True without sinks.
    pub(super) sinks_ready: bool,
    /// Per sink, the next sink its operation holds ([`NO_SINK`]: none).
    pub(super) sink_next: KVec<u32>,
    /// Write fences posted and not yet completed (iWARP).
    pub(super) fences_posted: u32,
    /// Writes waiting for their fence: posted by the next fence
    /// completion, or by the end of their `SUBMIT` or io_uring plug when
    /// no fence is in flight (`Conn::post_deferred`).
    pub(super) open: Option<FenceGroup>,
    /// Writes posted on the queue pair, counted from 1.
    pub(super) wseq: u64,
    /// The last write posted (by [`Self::wseq`]) known placed: writes
    /// after it need a fence.
    pub(super) placed: u64,
}

impl Slots {
    pub(in crate::conn) fn new() -> Result<Self> {
        let mut ops = KVec::with_capacity(SLOTS_MAX as usize, GFP_KERNEL)?;
        for _ in 0..SLOTS_MAX {
            ops.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            ops,
            free: KVec::with_capacity(SLOTS_MAX as usize, GFP_KERNEL)?,
            depth: 0,
            sq_free: 0,
            sinks_free: KVec::with_capacity(SINKS_MAX as usize, GFP_KERNEL)?,
            sinks: 0,
            fences_free: KVec::with_capacity(SLOTS_MAX as usize / 2, GFP_KERNEL)?,
            fences: 0,
            sinks_ready: true,
            sink_next: {
                let n = (SINKS_MAX + SLOTS_MAX / 2) as usize;
                let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
                for _ in 0..n {
                    v.push(NO_SINK, GFP_KERNEL)?;
                }
                v
            },
            fences_posted: 0,
            open: None,
            wseq: 0,
            placed: 0,
        })
    }

    /// A new queue pair with `depth` operation entries (at most
    /// [`SLOTS_MAX`]), `sinks` READ sinks (at most [`SINKS_MAX`]) and
    /// `fences` fence sinks (at most half of [`SLOTS_MAX`]), or none (0),
    /// not allocated yet ([`Self::fill_sinks`] once they are). Every slot
    /// is empty: nothing was posted yet, or the teardown flushed it.
    pub(in crate::conn) fn reset(&mut self, depth: u32, sinks: u32, fences: u32) {
        let depth = depth.min(SLOTS_MAX);
        while crate::compat::vec_pop(&mut self.free).is_some() {}
        for i in (0..depth).rev() {
            // Within capacity: cannot fail.
            let _ = self.free.push(i, GFP_KERNEL);
        }
        while crate::compat::vec_pop(&mut self.sinks_free).is_some() {}
        while crate::compat::vec_pop(&mut self.fences_free).is_some() {}
        self.sinks = sinks.min(SINKS_MAX);
        self.fences = fences.min(SLOTS_MAX / 2);
        self.sinks_ready = self.sinks == 0 && self.fences == 0;
        self.depth = depth;
        self.sq_free = depth;
        self.fences_posted = 0;
        self.open = None;
        self.wseq = 0;
        self.placed = 0;
    }

    /// Whether writes posted on the queue pair may not be placed yet.
    pub(super) fn unplaced(&self) -> bool {
        self.wseq > self.placed
    }

    /// The queue pair's sinks are allocated: every one is free.
    pub(super) fn fill_sinks(&mut self) {
        if self.sinks_ready {
            return;
        }
        for i in (0..self.sinks).rev() {
            // Within capacity: cannot fail.
            let _ = self.sinks_free.push(i, GFP_KERNEL);
        }
        for i in (0..self.fences).rev() {
            // Within capacity: cannot fail.
            let _ = self.fences_free.push(self.sinks + i, GFP_KERNEL);
        }
        self.sinks_ready = true;
    }

    /// The work requests one operation may take (`abi::ops::max_wrs`'s
    /// budget): the operation entries, and on iWARP no more than two per
    /// READ sink (a READ segment takes two and a sink).
    pub(in crate::conn) fn op_budget(&self) -> u32 {
        Self::budget(self.depth, self.sinks)
    }

    /// [`Self::op_budget`] of a queue pair that [`Self::reset`] would give
    /// `depth` entries and `sinks` READ sinks.
    pub(in crate::conn) fn budget(depth: u32, sinks: u32) -> u32 {
        let (depth, sinks) = (depth.min(SLOTS_MAX), sinks.min(SINKS_MAX));
        if sinks > 0 {
            depth.min(2 * sinks)
        } else {
            depth
        }
    }

    /// Takes the operation in `slot` (once) and frees the slot and its
    /// sinks.
    pub(super) fn take(&mut self, slot: u32) -> Option<OpCtx> {
        let op = self.ops.get_mut(slot as usize)?.take()?;
        // Within capacity: every slot fits.
        let _ = self.free.push(slot, GFP_KERNEL);
        self.sq_free += op.wrs;
        self.put_sinks(op.sinks);
        if op.fenced {
            self.fences_posted = self.fences_posted.saturating_sub(1);
        }
        if let OpKind::Fence { id, .. } = op.kind {
            if self.open.as_ref().is_some_and(|o| o.id == id) {
                // Flushed before it was posted.
                self.open = None;
            }
        }
        Some(op)
    }

    /// Reserves a slot, its two send entries and a fence sink for write
    /// fence `id` (`None`: no room).
    pub(super) fn reserve_fence(&mut self, id: u64) -> Option<u32> {
        if self.sq_free < 2 || self.fences_free.is_empty() {
            return None;
        }
        let slot = crate::compat::vec_pop(&mut self.free)?;
        let sinks = self.hold_sink(true, NO_SINK);
        self.sq_free -= 2;
        self.ops[slot as usize] = Some(OpCtx {
            lease: None,
            uses: None,
            user_data: 0,
            opcode: 0,
            wrs: 2,
            bytes: 0,
            waiter: None,
            sinks,
            batch: None,
            fenced: false,
            covers: 0,
            proves: true,
            join: None,
            kind: OpKind::Fence { id, posted: false },
        });
        Some(slot)
    }

    /// Takes one free sink (a fence sink if `fence`, else a READ sink) and
    /// chains it before `head`; returns the new head (`head` if none is
    /// free: the plan checked there were enough).
    pub(super) fn hold_sink(&mut self, fence: bool, head: u32) -> u32 {
        let list = if fence {
            &mut self.fences_free
        } else {
            &mut self.sinks_free
        };
        let Some(k) = crate::compat::vec_pop(list) else {
            return head;
        };
        if let Some(n) = self.sink_next.get_mut(k as usize) {
            *n = head;
        }
        k
    }

    /// Takes every write of batch fence `id` still in flight and hands it
    /// to `f` (one pass over the slots: a write that failed on its own was
    /// taken then, and its slot may hold another operation now).
    pub(super) fn take_members(&mut self, id: u64, mut f: impl FnMut(OpCtx)) {
        for s in 0..self.depth {
            if matches!(self.ops.get(s as usize), Some(Some(op)) if op.batch == Some(id)) {
                if let Some(op) = self.take(s) {
                    f(op);
                }
            }
        }
    }

    /// Whether `slot` holds batch fence `id`, not yet posted.
    pub(super) fn holds_fence(&self, slot: u32, id: u64) -> bool {
        matches!(
            self.ops.get(slot as usize),
            Some(Some(op)) if op.kind == OpKind::Fence { id, posted: false }
        )
    }

    /// Frees the READ and fence sinks of the chain from `head`.
    pub(super) fn put_sinks(&mut self, mut head: u32) {
        while let Some(&next) = self.sink_next.get(head as usize) {
            // Within capacity: every sink fits.
            let _ = if head < self.sinks {
                self.sinks_free.push(head, GFP_KERNEL)
            } else {
                self.fences_free.push(head, GFP_KERNEL)
            };
            head = next;
        }
    }
}

/// Where an operation's end is reported: its `waiter`, or else the
/// file's completion ring (`user_data`, `opcode`). The posted operation
/// takes the waiter.
pub(crate) struct ReportTo {
    pub(crate) user_data: u64,
    pub(crate) opcode: u32,
    pub(crate) waiter: Option<Waiter>,
}

impl ReportTo {
    /// Reports an end with `status`, having moved `bytes`, to its waiter
    /// ([`Waiter::tell`]); otherwise returns the record for the file's
    /// ring.
    pub(super) fn report(
        &mut self,
        status: i32,
        bytes: u64,
        work: &FabricWork,
    ) -> Option<Completion> {
        match self.waiter.take() {
            Some(w) => {
                w.tell(status, bytes, work);
                None
            }
            None => Some(Completion {
                user_data: self.user_data,
                status,
                opcode: self.opcode,
                bytes: if status == 0 { bytes } else { 0 },
            }),
        }
    }
}
