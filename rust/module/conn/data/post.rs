// SPDX-License-Identifier: GPL-2.0

//! Posting operations: one (`post_op`: io_uring, `RW_SYNC`) or a run of a
//! `SUBMIT` on one connection (`post_ops`), each planned and posted all or
//! nothing under the connection's lock and its path's.

use super::*;

/// How posting went.
pub(crate) enum Posted {
    /// Posted; its completion will come.
    Yes,
    /// No room now (send queue or slots); nothing was done.
    Full,
}

/// What an operation on an import does.
#[derive(Clone, Copy)]
pub(crate) enum OpWork<'a> {
    /// Moves blocks between a local region and the import (checked).
    Blocks(&'a Arc<Region>, &'a Checked),
    /// A fence on the import (`RRDMA_OP_FENCE`, `barrier.rs`).
    Fence,
    /// An rrdma-blk request's blocks, from or to its own pages (those of
    /// the `Waiter::Blk` it reports to), mapped for the queue pair's
    /// device with the local DMA key; the region (its disk's staging) holds
    /// the cache entry the operation leases, and none of its chunks is
    /// registered for it (on iWARP a READ's sink is registered over the
    /// request's pages, and invalidated by the READ). `EXDEV` where the
    /// queue pair cannot take it so (an iWARP READ whose pages one sink
    /// cannot map: a gap between segments, too many pages; more work
    /// requests than an operation may take): the caller stages its bytes.
    Request(&'a Arc<Region>, &'a Checked),
}

/// Which queue pair of its connection an operation goes on.
#[derive(Clone, Copy)]
pub(crate) enum OnPath {
    /// The submitting CPU's lane once it is established, else the first
    /// lane that is where the own queue pair is small, else the own.
    Cpu,
    /// An rrdma-blk request with tag `tag`. One from or to its own pages
    /// ([`OpWork::Request`]) on RoCE goes on the queue pair `tag` picks
    /// among the connection's own and its established lanes (the first
    /// asks for the lanes, which open on the work queue): there a write
    /// completes once placed, so a read after it finds its bytes on any
    /// queue pair, and rxe paces each queue pair's WRITEs (128 packets
    /// unacknowledged), so one disk's writes spread over its lanes move
    /// more at once. Any other goes on the connection's own: on iWARP a
    /// read after a write that completed once sent must find its bytes
    /// and fences are per queue pair; a staged request's chunks are then
    /// registered on one queue pair only.
    Disk(u32),
}

impl Conn {
    /// Posts one checked operation on `import` (`work`: from or to a
    /// region, or a fence), which reports to `to`, on the submitting CPU's
    /// path (a fence: on each path that needs one); returns the outcome
    /// and that path (a fence's first). One acquisition of the
    /// connection's lock, and one of the path's, when the operation's
    /// registrations are cached; otherwise they are allocated outside the
    /// locks, which are taken again.
    pub(crate) fn post_op(
        self: &Arc<Self>,
        import: &Import,
        work: OpWork<'_>,
        to: &mut ReportTo,
    ) -> Result<(Posted, usize), Errno> {
        self.post_op_on(import, work, to, OnPath::Cpu)
    }

    /// As [`Conn::post_op`], on the queue pair `on` picks.
    pub(crate) fn post_op_on(
        self: &Arc<Self>,
        import: &Import,
        work: OpWork<'_>,
        to: &mut ReportTo,
        on: OnPath,
    ) -> Result<(Posted, usize), Errno> {
        let (region, c, dma) = match work {
            OpWork::Blocks(region, c) => (region, c, false),
            OpWork::Request(region, c) => (region, c, true),
            OpWork::Fence => return self.post_barrier(import, to),
        };
        let mut g = Some(self.inner.lock());
        let p = match (g.as_deref_mut(), on) {
            (Some(i), OnPath::Cpu) => self.path_for_ops(i, ffi::this_cpu()),
            (Some(i), OnPath::Disk(tag)) if dma && i.res.as_ref().is_some_and(|r| !r.iwarp) => {
                self.path_for_ops(i, tag)
            }
            _ => 0,
        };
        if let Some(i) = g.as_deref_mut() {
            self.ready_path(i, p)?;
        }
        let mut pg = None;
        let posted =
            self.post_locked(&mut g, &mut pg, p, import, region, c, dma, to, None, false)?;
        Ok((posted, p))
    }

    /// Posts the operations `ops` gives, all on this connection and one
    /// path, under one acquisition of its lock and one of the path's
    /// (released only around the allocations of an operation that is the
    /// first to touch a chunk); on iWARP, its writes are fenced as `fence`
    /// says ([`RunFence`]). The run goes on `cpu`'s path: the CPU its
    /// `SUBMIT` started on, so that the task's moving to another CPU
    /// between runs does not give a connection's runs two queue pairs (and
    /// their group two fences). Stops at the first operation that
    /// finds no room or is refused; returns how many were posted, and the
    /// refusal's errno.
    pub(crate) fn post_ops<'a>(
        self: &Arc<Self>,
        ops: impl Iterator<Item = (&'a Import, &'a Arc<Region>, &'a Checked, ReportTo)>,
        fence: RunFence,
        cpu: u32,
    ) -> (usize, Option<Errno>) {
        let mut g = Some(self.inner.lock());
        // The whole run goes on one queue pair: its writes share a fence.
        let p = g.as_deref_mut().map_or(0, |i| self.path_for_ops(i, cpu));
        if let Some(Err(e)) = g.as_deref_mut().map(|i| self.ready_path(i, p)) {
            return (0, Some(e));
        }
        // The fence's sink is reserved before the first write.
        if fence != RunFence::Alone {
            if let Err(e) = self.ready_sinks(&mut g, p) {
                return (0, Some(self.refused(&mut g, e)));
            }
        }
        let Some(lock) = self.path(p) else {
            return (0, Some(ENOTCONN));
        };
        let mut pg: Option<PathGuard<'_>> = None;
        let mut batch = match (fence, g.as_ref()) {
            (RunFence::Batch, Some(inner)) => pg
                .insert(lock.lock())
                .as_deref_mut()
                .and_then(|d| self.batch_begin(inner, d)),
            _ => None,
        };
        let mut posted = 0;
        let mut err = None;
        for (import, region, c, mut to) in ops {
            let r = self.post_locked(
                &mut g,
                &mut pg,
                p,
                import,
                region,
                c,
                false,
                &mut to,
                batch.as_mut(),
                fence == RunFence::Group,
            );
            match r {
                Ok(Posted::Yes) => posted += 1,
                Ok(Posted::Full) => break,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if let Some(b) = batch {
            let inner = g.get_or_insert_with(|| self.inner.lock());
            let r = match pg.get_or_insert_with(|| lock.lock()).as_deref_mut() {
                Some(d) => self.batch_end(inner, d, p, b),
                None => Ok(None),
            };
            drop(pg);
            drop(g);
            match r {
                Ok(None) => {}
                // The fence's room given back (none of its writes went):
                // a caller waiting for room may fit now, and no
                // completion will come to say so.
                Ok(Some(op)) => {
                    drop(op);
                    if self.followups.room_waiters.load(Ordering::SeqCst) > 0 {
                        self.cv.notify_all();
                    }
                }
                // The queue pair failed: its teardown completes the fence,
                // and its writes, with the flush status.
                Err(e) => self.fail(Event::QpFatal, "cannot post a write fence", e),
            }
        }
        (posted, err)
    }

    /// `e`, the errno an operation was refused with, as the caller sees
    /// it: for `ENOTCONN` (its queue pair gone or failed under it), the
    /// errno the connection's state refuses operations with now (`EAGAIN`
    /// while it reconnects).
    pub(super) fn refused<'g>(&'g self, g: &mut InnerGuard<'g>, e: Errno) -> Errno {
        if e != ENOTCONN {
            return e;
        }
        g.get_or_insert_with(|| self.inner.lock()).errno_gone()
    }

    /// Posts one operation on path `p` with the connection's lock held in
    /// `g` and the path's in `pg` (each taken if released, in that order),
    /// releasing both to allocate what a first-touched chunk needs and to
    /// free what is left of that allocation. `group`: an iWARP write that
    /// completes once placed joins the path's open group (its caller
    /// posts the group's fence, [`RunFence::Group`]). `dma`: the local
    /// side is the request `to` reports to ([`OpWork::Request`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_locked<'g>(
        self: &'g Arc<Self>,
        g: &mut InnerGuard<'g>,
        pg: &mut Option<PathGuard<'g>>,
        p: usize,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        dma: bool,
        to: &mut ReportTo,
        mut batch: Option<&mut FenceGroup>,
        group: bool,
    ) -> Result<Posted, Errno> {
        let lock = self.path(p).ok_or(ENOTCONN)?;
        let mut prep = Prep::default();
        // The cache can change between the allocation and the post (a
        // destroyed region's registrations are pruned): plan again then.
        for _ in 0..4 {
            let inner = g.get_or_insert_with(|| self.inner.lock());
            let mut r = match pg.get_or_insert_with(|| lock.lock()).as_deref_mut() {
                Some(d) => self.try_post(
                    inner,
                    d,
                    p,
                    import,
                    region,
                    c,
                    dma,
                    to,
                    batch.as_deref_mut(),
                    group,
                    &mut prep,
                ),
                None => Err(ENOTCONN),
            };
            // A request's pages mapped for a post that did not keep it
            // are unmapped while the locks still keep the device.
            if dma && !matches!(r, Ok(Attempt::Done(Posted::Yes) | Attempt::FailedKept(_))) {
                let w = match r.as_mut() {
                    Ok(Attempt::Failed(_, Some(op))) => op.waiter.as_mut(),
                    _ => to.waiter.as_mut(),
                };
                if let Some(rq) = w.and_then(Waiter::blk_mut) {
                    rq.dma_unmap();
                }
            }
            if prep.pd.is_some()
                || matches!(
                    r,
                    Ok(Attempt::Prepare(..)
                        | Attempt::Failed(..)
                        | Attempt::FailedKept(..)
                        | Attempt::Sinks)
                )
            {
                // Registrations and sinks are allocated and freed, and a
                // connection fails, outside the locks.
                *pg = None;
                *g = None;
            }
            match r.map_err(|e| self.refused(g, e))? {
                Attempt::Done(posted) => return Ok(posted),
                Attempt::Prepare(plan, pd) => {
                    drop(core::mem::take(&mut prep));
                    prep = Prep::new(&plan, pd, region)?;
                }
                Attempt::Again => prep = Prep::default(),
                Attempt::Sinks => self.ready_sinks(g, p).map_err(|e| self.refused(g, e))?,
                Attempt::FailedKept(e) => {
                    // Its slot keeps it: the teardown completes it.
                    self.fail(Event::QpFatal, "cannot post an operation", e);
                    return Ok(Posted::Yes);
                }
                Attempt::Failed(e, mut op) => {
                    // Refused: who waits for it is the caller's again (an
                    // io_uring command's CQE comes from the error return).
                    if let Some(w) = op.as_mut().and_then(|o| o.waiter.take()) {
                        to.waiter = Some(w);
                    }
                    drop(op);
                    self.fail(Event::QpFatal, "cannot post an operation", e);
                    // The errno of the connection it failed, not the
                    // provider's (siw's ENOTCONN for a closing queue pair).
                    return Err(self.inner.lock().errno_gone());
                }
            }
        }
        Ok(Posted::Full)
    }
}
