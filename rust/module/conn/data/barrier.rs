// SPDX-License-Identifier: GPL-2.0

//! Fences a caller asks for (`RRDMA_OP_FENCE`): one on an import completes
//! once every write posted before it on the import's connection is
//! placed. Each path whose writes' placement is not yet known
//! ([`Slots::unplaced`]) gets a fence of its own, after those writes on its
//! queue pair, after the fence of the path's open group if it has writes
//! (so that they complete first): on iWARP a one-byte READ into a fence
//! sink (as a write's fence), on RoCE/InfiniBand an empty READ, whose
//! response follows their placement (no key is checked for it, C9-88, and
//! every export may be read). With none to post, the fence completes at once; with
//! several, the last of them reports (`FenceJoin`). The first fence after
//! a connection's end that may have lost writes sent (`SentLedger::take_loss`)
//! fails at once with `ECONNRESET`. A disk's flush on RoCE completes at
//! once: it covers the writes that completed before it, which are placed.

use super::*;

/// Where a caller's fence that went on several paths reports: once, when
/// the last of them ends, with the first failure's status.
#[pin_data]
pub(super) struct FenceJoin {
    /// A softirq-safe spinlock, a leaf: taken under a path's lock by the
    /// completion of one of the fences.
    #[pin]
    state: BhLock<JoinState>,
}

struct JoinState {
    /// Fences not ended yet.
    left: u32,
    /// The first failure's status (0: none yet).
    status: i32,
    /// Where the fence reports, taken by the last.
    to: Option<ReportTo>,
}

impl FenceJoin {
    fn new() -> Result<Arc<Self>, Errno> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_bh_lock!(
                    JoinState {
                        left: 0,
                        status: 0,
                        to: None,
                    },
                    "FenceJoin::state"
                ),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| ENOMEM)
    }

    /// `n` of its fences ended with `status`: if they were the last, where
    /// to report and with which status.
    pub(super) fn arrive(&self, n: u32, status: i32) -> Option<(ReportTo, i32)> {
        let mut s = self.state.lock();
        if s.status == 0 {
            s.status = status;
        }
        s.left = s.left.saturating_sub(n);
        if s.left > 0 {
            return None;
        }
        let status = s.status;
        s.to.take().map(|to| (to, status))
    }
}

/// How one attempt at a caller's fence went.
enum Barrier {
    Done(Posted),
    /// Several paths need a fence: a [`FenceJoin`] is allocated outside
    /// the locks first.
    Join,
    /// Path `p`'s sinks are allocated outside the locks first.
    Sinks(usize),
}

/// Reports a fence that ends before anything is posted with `status`, to
/// `to`: its waiter or the file's ring.
fn report_now(shared: &crate::shared::Shared, to: &mut ReportTo, status: i32) {
    if let Some(c) = to.report(status, 0, &shared.work) {
        shared.complete(core::iter::once(c));
    }
}

impl Conn {
    /// Posts a caller's fence on `import`, which reports to `to`; returns
    /// how it went and the first path it went on. A fence that ends at
    /// once (nothing to wait for, or a loss to report) has reported when
    /// this returns.
    pub(super) fn post_barrier(
        self: &Arc<Self>,
        import: &Import,
        to: &mut ReportTo,
    ) -> Result<(Posted, usize), Errno> {
        let mut join = None;
        for _ in 0..4 {
            match self.try_barrier(import, to, &mut join)? {
                (Barrier::Done(posted), p) => return Ok((posted, p)),
                (Barrier::Join, _) => join = Some(FenceJoin::new()?),
                (Barrier::Sinks(p), _) => {
                    let mut g = None;
                    self.ready_sinks(&mut g, p)
                        .map_err(|e| self.refused(&mut g, e))?;
                }
            }
        }
        Ok((Posted::Full, 0))
    }

    /// One attempt at a caller's fence, under the connection's lock and
    /// each path's in turn: first every path that needs one is found and
    /// checked for room (which only completions change meanwhile, and
    /// they only add to it), then each gets its fence.
    fn try_barrier(
        self: &Arc<Self>,
        import: &Import,
        to: &mut ReportTo,
        join: &mut Option<Arc<FenceJoin>>,
    ) -> Result<(Barrier, usize), Errno> {
        let g = self.inner.lock();
        if !g.state.is_connected() {
            return Err(g.errno());
        }
        let target = g.imports.usable(import.entry())?;
        let uses = target.uses().clone();
        let rkey = target.rkey(0).ok_or(ENOTCONN)?;
        let iwarp = g.res.as_ref().ok_or(ENOTCONN)?.iwarp;
        if uses.sent.take_loss() {
            report_now(&self.shared, to, ECONNRESET.to_errno());
            return Ok((Barrier::Done(Posted::Yes), 0));
        }
        let sent = uses.sent.count();
        // The fence's requests: a READ sink's registration and the READ,
        // or an empty READ.
        let nwrs = if iwarp { 2 } else { 1 };
        // A disk's flush covers the writes that completed before it, and
        // on RoCE a write completes once placed: it needs no fence (and no
        // `FenceJoin`, which would allocate on a disk's I/O path now that
        // its writes spread over the lanes).
        let placed_once_done = !iwarp && self.shared.backs_disk();
        let mut need = 0u32;
        let paths = g.paths.iter().enumerate().filter(|_| !placed_once_done);
        for (p, x) in paths {
            let (Some(lock), Some(_)) = (self.path(p), path_qp(p, &g.id, &x.lane)) else {
                continue;
            };
            let pg = lock.lock();
            let Some(o) = pg.as_deref().map(|d| &d.slots) else {
                continue;
            };
            if !o.unplaced() {
                continue;
            }
            if iwarp && !o.sinks_ready {
                return Ok((Barrier::Sinks(p), p));
            }
            if o.sq_free < nwrs || o.free.is_empty() || (iwarp && o.fences_free.is_empty()) {
                return Ok((Barrier::Done(Posted::Full), p));
            }
            need |= 1 << p;
        }
        let first = need.trailing_zeros() as usize;
        if need == 0 {
            // Every write posted before it is known placed.
            uses.sent.fence_ended(sent, true);
            self.shared.work.op_fence_now();
            report_now(&self.shared, to, 0);
            return Ok((Barrier::Done(Posted::Yes), 0));
        }
        let many = need.count_ones() > 1;
        let join = match (many, join.take()) {
            (false, _) => None,
            (true, None) => return Ok((Barrier::Join, first)),
            (true, Some(j)) => {
                {
                    let mut s = j.state.lock();
                    s.left = need.count_ones();
                    s.status = 0;
                    s.to = Some(ReportTo {
                        user_data: to.user_data,
                        opcode: to.opcode,
                        waiter: to.waiter.take(),
                    });
                }
                Some(j)
            }
        };
        let mut posted_any = false;
        for (p, x) in g.paths.iter().enumerate() {
            if need & (1 << p) == 0 {
                continue;
            }
            let (Some(lock), Some(qp)) = (self.path(p), path_qp(p, &g.id, &x.lane)) else {
                // Found above under the same connection lock: cannot be.
                continue;
            };
            let mut pg = lock.lock();
            let Some(d) = pg.as_deref_mut() else {
                continue;
            };
            let mut op = OpCtx {
                lease: None,
                uses: Some(uses.clone()),
                user_data: to.user_data,
                opcode: to.opcode,
                wrs: nwrs,
                bytes: 0,
                waiter: None,
                sinks: NO_SINK,
                batch: None,
                fenced: false,
                covers: d.slots.wseq,
                proves: true,
                join: join.clone(),
                kind: OpKind::Barrier { sent },
            };
            if p == first {
                // An IOPOLL ring's command polls its first path's CQ.
                match join.as_ref() {
                    Some(j) => {
                        if let Some(w) = j.state.lock().to.as_ref().and_then(|t| t.waiter.as_ref())
                        {
                            w.poll_on(qp);
                        }
                    }
                    None => {
                        op.waiter = to.waiter.take();
                        if let Some(w) = op.waiter.as_ref() {
                            w.poll_on(qp);
                        }
                    }
                }
            }
            // Writes of the path's open group (waiting for a fence in
            // flight, or for an io_uring plug's end) get their group's
            // fence first, so that they complete before this one does.
            let posted = match self.post_open_group(d, qp.to_ref()) {
                Ok(()) => post_one(d, qp.to_ref(), op, rkey, iwarp),
                Err(e) => Err((e, op)),
            };
            let (e, mut op) = match posted {
                Ok(()) => {
                    self.shared.work.op_fence();
                    posted_any = true;
                    continue;
                }
                Err(refused) => refused,
            };
            // The queue pair refused it: the connection fails. A fence
            // with others posted before it ends as they do, failed; one
            // with nothing posted gives its report back.
            drop(pg);
            if posted_any {
                // This one and those not posted after it end now, failed;
                // the last of those posted reports.
                uses.sent.fence_ended(sent, false);
                let unposted = (need >> p).count_ones();
                if let Some((t, status)) = op
                    .join
                    .take()
                    .and_then(|j| j.arrive(unposted, e.to_errno()))
                {
                    let mut t = t;
                    report_now(&self.shared, &mut t, status);
                }
            } else if let Some(j) = op.join.take() {
                if let Some(t) = j.state.lock().to.take() {
                    to.waiter = t.waiter;
                }
            } else {
                to.waiter = op.waiter.take();
            }
            drop(g);
            self.fail(Event::QpFatal, "cannot post a fence", e);
            if posted_any {
                return Ok((Barrier::Done(Posted::Yes), first));
            }
            return Err(self.inner.lock().errno_gone());
        }
        Ok((Barrier::Done(Posted::Yes), first))
    }
}

/// Posts `op`, a caller's fence on one path (data state `d`, queue pair
/// `qp`, room checked), reading the import's first byte (under `rkey`);
/// gives it back with the errno if the queue pair refused it.
// The operation is moved back once, on the way out of a failed post.
#[allow(clippy::result_large_err)]
fn post_one(
    d: &mut PathData,
    qp: QpRef<'_>,
    mut op: OpCtx,
    rkey: u32,
    iwarp: bool,
) -> Result<(), (Errno, OpCtx)> {
    let o = &mut d.slots;
    let Some(slot) = crate::compat::vec_pop(&mut o.free) else {
        // Room was checked under the same locks: cannot be.
        return Err((EAGAIN, op));
    };
    let mut fence: [ShimWr; 2];
    let mut empty: [ShimWr; 1];
    let wrs: &mut [ShimWr] = if iwarp {
        let k = o.hold_sink(true, NO_SINK);
        op.sinks = k;
        fence = [
            ShimWr::sink_reg(None, k, 0, 1),
            ShimWr::sink_read(k, 1, 0, rkey),
        ];
        &mut fence
    } else {
        empty = [ShimWr::read_empty(0, rkey)];
        &mut empty
    };
    if let Some(last) = wrs.last_mut() {
        last.signaled = 1;
        last.slot = slot;
    }
    let n = wrs.len() as u32;
    // Counted before the post, as an operation is.
    if let Some(u) = op.uses.as_ref() {
        u.started();
    }
    o.ops[slot as usize] = Some(op);
    let (posted, r) = qp.post(wrs);
    if posted < n {
        let op = o.ops[slot as usize].take();
        let _ = o.free.push(slot, GFP_KERNEL);
        o.sq_free -= posted;
        let Some(mut op) = op else {
            return Ok(());
        };
        o.put_sinks(op.sinks);
        op.sinks = NO_SINK;
        if let Some(u) = op.uses.as_ref() {
            u.done();
        }
        return Err((r.err().unwrap_or(crate::abi::errno::EIO), op));
    }
    o.sq_free -= n;
    Ok(())
}
