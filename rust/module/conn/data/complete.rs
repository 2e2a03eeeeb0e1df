// SPDX-License-Identifier: GPL-2.0

//! Completions: a batch of a path's operation slots (one poll of its send
//! CQ, or the teardown's flush) ends under the path's lock alone, and
//! reaches the file's ring and readers once per batch.

use super::*;

/// How [`Conn::end_slot`] left an operation's end.
pub(super) enum Ended {
    /// Done under the path's lock (a second completion of a slot:
    /// nothing).
    Done {
        /// The record for the file's ring, if the operation has one.
        record: Option<Completion>,
        /// Whether writes its fence completed went to the ring already.
        members_queued: bool,
    },
    /// It failed: the connection ends, and then the operation is reported
    /// (outside the path's lock; process context).
    Failed {
        op: OpCtx,
        errno: Errno,
        wc_status: u32,
        /// Whether writes its fence completed went to the ring already.
        members_queued: bool,
    },
}

impl Conn {
    /// The completions of path `p`'s operation slots in `done`, each
    /// `(slot, work completion status)`: one poll of its send CQ `qp`
    /// (softirq, a task that polls, or the CQ's work item), or the
    /// teardown's flush of what the provider never completed (`qp` gone).
    /// They end under one acquisition of the path's lock, not the
    /// connection's: their records
    /// reach the file's ring under one acquisition of its lock per
    /// [`ffi::POLL_BATCH`], and the file's readers are woken once for them
    /// all. What needs the connection's lock is left to its follow-up work
    /// ([`Followups`]), except a failed operation's end, which comes in
    /// process context (`caller` holds its [`Task`]; the shim hands failed
    /// completions to its work item): the connection ends first (outside
    /// the path's lock), then the operation is reported. A failure in
    /// atomic context breaks the shim's promise: it is logged, the
    /// operation is reported with `ECONNRESET`, and the follow-up work
    /// ends the connection.
    pub(crate) fn slots_done(
        self: &Arc<Self>,
        p: usize,
        qp: Option<QpRef<'_>>,
        done: impl Iterator<Item = (u32, u32)> + Clone,
        caller: Caller<'_>,
    ) {
        let Some(lock) = self.path(p) else {
            return;
        };
        if ffi::in_softirq() {
            self.shared.work.softirq();
        }
        // The status of a flushed operation says why the connection ended.
        let failures = done.clone().any(|(_, s)| s != wc::SUCCESS);
        let flush = match caller {
            Caller::Task(_) if failures => {
                let mut g = self.inner.lock();
                // On iWARP only a READ that succeeds invalidates its sink,
                // which is registered with remote write access in the
                // connection's protection domain: the peer could write
                // through another of its queue pairs to the pages of a
                // READ that failed. Every one stops before this batch
                // lets any operation's memory go (the connection ends
                // anyway).
                g.stop_qps(self.serial);
                g.state.flush_errno()
            }
            Caller::Atomic if failures => {
                ffi::internal_error!(
                    "connection {}: a failed completion in atomic context\n",
                    self.serial
                );
                ECONNRESET
            }
            _ => ECONNRESET,
        };
        let mut recs = [Completion::zeroed(); ffi::POLL_BATCH];
        let (mut n, mut queued) = (0, false);
        let mut due = Due::default();
        let mut g: Option<PathGuard<'_>> = None;
        for (slot, status) in done {
            let pg = g.get_or_insert_with(|| lock.lock());
            let Some(d) = pg.as_deref_mut() else {
                break;
            };
            let (rec, members) = match self.end_slot(d, slot, status, flush, qp, &mut due) {
                Ended::Done {
                    record,
                    members_queued,
                } => (record, members_queued),
                Ended::Failed {
                    mut op,
                    errno,
                    wc_status,
                    members_queued,
                } => {
                    match caller {
                        Caller::Task(t) => {
                            g = None;
                            let wr = crate::conn::FailedWr::Operation;
                            self.wc_failed(t, wc_status as c_int, wr);
                        }
                        Caller::Atomic => {
                            due.failed_wc.get_or_insert(wc_status);
                        }
                    }
                    let rec = op
                        .finish(errno.to_errno(), &self.shared.work)
                        .filter(|_| op.reports());
                    (rec, members_queued)
                }
            };
            queued |= members;
            if let Some(c) = rec {
                if n == recs.len() {
                    self.shared.complete(recs.iter().copied());
                    n = 0;
                }
                recs[n] = c;
                n += 1;
            }
        }
        drop(g);
        if n > 0 {
            self.shared.complete(recs[..n].iter().copied());
        } else if queued {
            self.shared.pushed();
        }
        if self.followups.room_waiters.load(Ordering::SeqCst) > 0 {
            due.flags |= Followups::ROOM;
        }
        self.ask_followups(due);
    }

    /// Ends the operation in slot `slot` of path data `d` (one of a batch,
    /// [`Self::slots_done`], which wakes whom it concerns) under the
    /// path's lock: `wc_status` is its work completion's, `flush` the
    /// errno of a flushed one, `qp` its queue pair (`None`: gone). One that
    /// ended well is reported here (to its synchronous caller or io_uring
    /// command, or with the record it returns for the file's ring); what
    /// needs the connection's lock goes into `due`.
    pub(super) fn end_slot(
        &self,
        d: &mut PathData,
        slot: u32,
        wc_status: u32,
        flush: Errno,
        qp: Option<QpRef<'_>>,
        due: &mut Due,
    ) -> Ended {
        let mut members = 0usize;
        let Some(mut op) = d.slots.take(slot) else {
            pr_debug!(
                "second completion of slot {} (status {}) ignored\n",
                slot,
                wc_status
            );
            return Ended::Done {
                record: None,
                members_queued: false,
            };
        };
        let errno = match wc::to_errno(wc_status) {
            // Flushed: the connection ended under it.
            Some(crate::abi::errno::ECANCELED) => Some(flush),
            e => e,
        };
        let status = errno.map_or(0, Errno::to_errno);
        if status == 0 && op.proves {
            d.slots.placed = d.slots.placed.max(op.covers);
        }
        if let (OpKind::Barrier { sent }, Some(u)) = (op.kind, op.uses.as_ref()) {
            u.sent.fence_ended(sent, status == 0);
        }
        if op.lease.take().is_some_and(|l| d.local.settle(l)) {
            due.flags |= Followups::PRUNE;
        }
        if op.uses.take().is_some_and(|u| u.done()) {
            due.flags |= Followups::SETTLE;
        }
        if let OpKind::Fence { id, .. } = op.kind {
            // The writes this fence follows are placed (or failed with
            // it): they complete with its status, in one trip through
            // the file's ring. Their regions stay referenced by their
            // cache entries, which a destroyed region's last use leaves
            // to the follow-up work to prune.
            let (slots, local) = (&mut d.slots, &mut d.local);
            let mut ring = self.shared.ring.lock();
            slots.take_members(id, |mut w| {
                if w.lease.take().is_some_and(|l| local.settle(l)) {
                    due.flags |= Followups::PRUNE;
                }
                if w.uses.take().is_some_and(|u| u.done()) {
                    due.flags |= Followups::SETTLE;
                }
                if let Some(c) = w.finish(status, &self.shared.work) {
                    ring.push(c);
                    members += 1;
                }
            });
        }
        let failed = 1 + members as u64;
        let members = members > 0;
        if let Some(e) = errno {
            crate::ffi::trace::op_failed(self.serial, op.opcode, e.get(), wc_status);
            // The fence's writes failed with it.
            self.failed.fetch_add(failed, Ordering::Relaxed);
            return Ended::Failed {
                op,
                errno: e,
                wc_status,
                members_queued: members,
            };
        }
        // The peer's transport answered: a sign of life (our control
        // messages may wait behind the data).
        self.heard();
        if op.fenced {
            // The writes that waited for this fence get theirs.
            if let Some(qp) = qp {
                if let Err(e) = self.post_open_group(d, qp) {
                    due.fence_err.get_or_insert(e);
                }
            }
        }
        // Its report takes only leaf locks (a synchronous caller's
        // status; io_uring's task work, or the CQE an IOPOLL poller posts
        // in place under the ring's lock, which it holds already), and
        // nothing it drops frees what must be freed in process context.
        let rec = op.finish(0, &self.shared.work).filter(|_| op.reports());
        Ended::Done {
            record: rec,
            members_queued: members,
        }
    }

    /// Completes, with the flush status, every operation the provider did
    /// not complete (the teardown, once the queue pair is destroyed).
    pub(in crate::conn) fn flush_ops(self: &Arc<Self>, t: &Task) {
        let paths = self.inner.lock().paths.len();
        for p in 0..paths {
            self.slots_done(
                p,
                None,
                (0..SLOTS_MAX).map(|slot| (slot, wc::WR_FLUSH_ERR)),
                Caller::Task(t),
            );
        }
    }
}
