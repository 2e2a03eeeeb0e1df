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

impl Conn {
    /// Posts one checked operation on `import` from or to `region`, which
    /// reports to `to`, on the submitting CPU's path; returns the outcome
    /// and that path. One acquisition of the connection's lock, and one of
    /// the path's, when the operation's registrations are cached;
    /// otherwise they are allocated outside the locks, which are taken
    /// again.
    pub(crate) fn post_op(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        to: &mut ReportTo,
    ) -> Result<(Posted, usize), Errno> {
        let mut g = Some(self.inner.lock());
        let p = g.as_ref().map_or(0, |i| i.pick_path());
        let mut pg = None;
        let posted = self.post_locked(&mut g, &mut pg, p, import, region, c, to, None)?;
        Ok((posted, p))
    }

    /// Posts the operations `ops` gives, all on this connection and one
    /// path, under one acquisition of its lock and one of the path's
    /// (released only around the allocations of an operation that is the
    /// first to touch a chunk); on iWARP, with
    /// `fence` (the region of a batch of two writes or more), its writes
    /// share one fence (`FenceGroup`). Stops at the first operation that
    /// finds no room or is refused; returns how many were posted, and the
    /// refusal's errno.
    pub(crate) fn post_ops<'a>(
        self: &Arc<Self>,
        ops: impl Iterator<Item = (&'a Import, &'a Arc<Region>, &'a Checked, ReportTo)>,
        fence: Option<&Arc<Region>>,
    ) -> (usize, Option<Errno>) {
        let mut g = Some(self.inner.lock());
        // The whole run goes on one queue pair: its writes share a fence.
        let p = g.as_ref().map_or(0, |i| i.pick_path());
        // The fence's sink is reserved before the first write.
        if fence.is_some() {
            if let Err(e) = self.ready_sinks(&mut g, p) {
                return (0, Some(self.refused(&mut g, e)));
            }
        }
        let Some(lock) = self.path(p) else {
            return (0, Some(ENOTCONN));
        };
        let mut pg: Option<PathGuard<'_>> = None;
        let mut batch = match (fence, g.as_ref()) {
            (Some(_), Some(inner)) => pg
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
                &mut to,
                batch.as_mut(),
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
                Ok(op) => drop(op),
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
    /// free what is left of that allocation.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_locked<'g>(
        self: &'g Arc<Self>,
        g: &mut InnerGuard<'g>,
        pg: &mut Option<PathGuard<'g>>,
        p: usize,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        to: &mut ReportTo,
        mut batch: Option<&mut FenceGroup>,
    ) -> Result<Posted, Errno> {
        let lock = self.path(p).ok_or(ENOTCONN)?;
        let mut prep = Prep::default();
        // The cache can change between the allocation and the post (a
        // destroyed region's registrations are pruned): plan again then.
        for _ in 0..4 {
            let inner = g.get_or_insert_with(|| self.inner.lock());
            let r = match pg.get_or_insert_with(|| lock.lock()).as_deref_mut() {
                Some(d) => self.try_post(
                    inner,
                    d,
                    p,
                    import,
                    region,
                    c,
                    to,
                    batch.as_deref_mut(),
                    &mut prep,
                ),
                None => Err(ENOTCONN),
            };
            if prep.pd.is_some()
                || matches!(
                    r,
                    Ok(Attempt::Prepare(..) | Attempt::Failed(..) | Attempt::Sinks)
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
                Attempt::Failed(e, op) => {
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

    /// Plans and posts under the connection's lock (`inner`) and path
    /// `p`'s (its data state `d`) with what `prep` allocated; what is left
    /// of `prep` is for the caller to free once the locks are released.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn try_post(
        self: &Arc<Self>,
        inner: &mut crate::conn::ConnInner,
        d: &mut PathData,
        p: usize,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        to: &mut ReportTo,
        batch: Option<&mut FenceGroup>,
        prep: &mut Prep,
    ) -> Result<Attempt, Errno> {
        // A write outside a batch joins the open group while a fence is in
        // flight (`Slots::open`), and so does an iWARP write of an io_uring
        // submission under a plug, whose end posts the group's fence.
        // Decided under the path's lock: a fence completion that posts the
        // open group takes it too.
        let join = batch.is_none()
            && (d.slots.fences_posted > 0
                || (to.uring.is_some()
                    && c.dir == Dir::Write
                    && inner.res.as_ref().is_some_and(|r| r.iwarp)
                    && self.plugged()));
        if !inner.state.is_connected() {
            return Err(inner.errno());
        }
        // The import's one lookup: its check, its count, its keys.
        let target = inner.imports.usable(import.entry())?;
        let plan = Plan::new(inner, d, import, region, c, batch.is_some() || join)?;
        let (paths, id, res) = (&inner.paths, &inner.id, &mut inner.res);
        let Some(Path { lane, .. }) = paths.get(p) else {
            return Err(ENOTCONN);
        };
        let PathData {
            slots: o,
            wr_scratch,
            local,
        } = d;
        // The group's fence is reserved by its first write.
        let new_group = plan.unfenced && batch.is_none() && o.open.is_none();
        let Some(qp) = path_qp(p, id, lane) else {
            return Err(ENOTCONN);
        };
        let Some(res) = res.as_mut() else {
            return Err(ENOTCONN);
        };
        if !o.sinks_ready {
            return Ok(Attempt::Sinks);
        }
        if plan.wrs + if new_group { 2 } else { 0 } > o.sq_free
            || o.free.len() < 1 + usize::from(new_group)
            || (plan.sinks as usize) > o.sinks_free.len()
            || ((plan.fence || new_group) && o.fences_free.is_empty())
        {
            return Ok(Attempt::Done(Posted::Full));
        }
        if !plan.covered_by(prep, &res.pd) {
            return Ok(Attempt::Prepare(plan, res.pd.clone()));
        }
        let uses = target.uses().clone();
        let (mrs, spare) = (&mut prep.mrs, &mut prep.spare);
        let wrs = wr_scratch.start();
        if plan.wrs as usize > wrs.capacity() {
            // A plan fits in the send queue's operation entries, at most
            // `SLOTS_MAX`.
            ffi::internal_error!(
                "an operation's plan of {} work requests exceeds the scratch list ({})\n",
                plan.wrs,
                wrs.capacity()
            );
            return Err(E2BIG);
        }
        let rk = key(region);
        if let Some((reservation, chunks)) = prep.node.take() {
            if local.tree.get(&rk).is_none() {
                local.tree.insert(reservation.into_node(
                    rk,
                    LocalReg {
                        chunks,
                        region: region.clone(),
                        inflight: 0,
                    },
                ));
            }
        }
        let Some(reg) = local.tree.get_mut(&rk) else {
            return Ok(Attempt::Again);
        };
        // Every chunk is registered, or has a registration ready to post.
        for i in 0..plan.nchunks {
            let chunk = (plan.first + i as u64) as usize;
            if reg.chunks.get(chunk).is_none() && !mrs.iter().any(|m| m.0 == chunk) {
                return Ok(Attempt::Again);
            }
        }
        // Build: each chunk's registration right before its first segment.
        // The sinks are the last `plan.sinks` free ones, taken once built.
        let nfree = o.sinks_free.len();
        let sink_of = |j: usize| {
            nfree
                .checked_sub(j + 1)
                .and_then(|i| o.sinks_free.get(i).copied())
        };
        let mut nsinks = 0;
        let mut last_chunk = usize::MAX;
        for s in ops::segments(c, plan.lshift, import.chunk_shift) {
            let lc = ops::chunk_of(s.local_off, plan.lshift) as usize;
            let pending = mrs
                .iter_mut()
                .find(|m| m.0 == lc && reg.chunks.get(lc).is_none());
            let (lkey, chunk_mr) = match (reg.chunks.get(lc), pending) {
                (Some(m), _) => (m.lkey(), m.as_ptr()),
                (None, Some(m)) => {
                    if lc != last_chunk {
                        m.2 = wrs.len() as u32;
                        // Within capacity (the plan counted it).
                        let _ = wrs.push(
                            ShimWr::reg(m.1.as_ptr(), ffi::ACCESS_LOCAL_WRITE, false),
                            GFP_KERNEL,
                        );
                    }
                    (m.1.lkey(), m.1.as_ptr())
                }
                (None, None) => return Ok(Attempt::Again),
            };
            last_chunk = lc;
            let rc = ops::chunk_of(s.remote_off, import.chunk_shift) as usize;
            let rkey = target.rkey(rc).ok_or(ENOTCONN)?;
            // Within capacity (the plan counted every request).
            match (c.dir, plan.iwarp) {
                (Dir::Read, true) => {
                    let Some(k) = sink_of(nsinks) else {
                        // The plan checked there were enough.
                        return Ok(Attempt::Again);
                    };
                    nsinks += 1;
                    let _ = wrs.push(
                        ShimWr::sink_reg(chunk_mr, k, s.local_off, s.len),
                        GFP_KERNEL,
                    );
                    let _ = wrs.push(ShimWr::sink_read(k, s.len, s.remote_off, rkey), GFP_KERNEL);
                }
                (Dir::Read, false) => {
                    let _ = wrs.push(
                        ShimWr::rdma(ffi::WR_READ, s.local_off, lkey, s.len, s.remote_off, rkey),
                        GFP_KERNEL,
                    );
                }
                (Dir::Write, _) => {
                    let _ = wrs.push(
                        ShimWr::rdma(ffi::WR_WRITE, s.local_off, lkey, s.len, s.remote_off, rkey),
                        GFP_KERNEL,
                    );
                }
            }
        }
        let mut fence = None;
        if plan.fence {
            // The fence: a READ of the last byte written, into a fence sink
            // over the queue pair's scratch buffer.
            if let (Some(last), Some(&k)) = (wrs.last(), o.fences_free.last()) {
                let (addr, rkey) = (last.remote_addr + u64::from(last.len) - 1, last.rkey);
                let _ = wrs.push(ShimWr::sink_reg(core::ptr::null_mut(), k, 0, 1), GFP_KERNEL);
                let _ = wrs.push(ShimWr::sink_read(k, 1, addr, rkey), GFP_KERNEL);
                fence = Some(k);
            }
        }
        if nsinks != plan.sinks as usize
            || fence.is_some() != plan.fence
            || wrs.len() > plan.wrs as usize
        {
            // The plan no longer holds (it counted what this builds; a
            // chunk registered meanwhile only takes a request less).
            return Ok(Attempt::Again);
        }
        // A write that leaves its fence to its batch's or its group's: the
        // batch's fence must still be waiting in its slot (a reconnect
        // flushed it); the fence will read the last byte this write places.
        let mut op = OpCtx {
            reg: rk,
            uses: Some(uses),
            user_data: to.user_data,
            opcode: to.opcode,
            wrs: 0,
            bytes: c.len,
            sync: None,
            uring: None,
            sinks: NO_SINK,
            batch: None,
            fenced: plan.fence,
            kind: OpKind::User,
        };
        let mut unfenced_last = None;
        if plan.unfenced {
            let id = match (batch.as_ref(), o.open.as_ref()) {
                (Some(b), _) if o.holds_fence(b.slot, b.id) => b.id,
                (Some(_), _) => return Err(ECONNRESET),
                (None, Some(o)) => o.id,
                (None, None) => {
                    // Room checked above (`new_group`).
                    let id = FENCE_IDS.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = o.reserve_fence(id) else {
                        return Ok(Attempt::Done(Posted::Full));
                    };
                    o.open = Some(FenceGroup {
                        slot,
                        id,
                        last: None,
                    });
                    id
                }
            };
            op.batch = Some(id);
            unfenced_last = match (wrs.last(), op.uses.as_ref()) {
                (Some(w), Some(u)) => {
                    Some((u.clone(), w.remote_addr + u64::from(w.len) - 1, w.rkey))
                }
                _ => None,
            };
        }
        let n = wrs.len() as u32;
        let Some(slot) = crate::compat::vec_pop(&mut o.free) else {
            return Ok(Attempt::Done(Posted::Full));
        };
        // Where it reports: taken from `to` only now, past every refusal.
        op.sync = to.sync.take();
        op.uring = to.uring.take();
        if let Some(u) = op.uring.as_ref() {
            u.poll_on(qp);
        }
        // What it gives back to the send queue when it completes: what
        // was built (a chunk registered since the plan takes one less).
        op.wrs = n;
        // The sinks the requests name (the plan checked there were enough).
        for _ in 0..nsinks {
            op.sinks = o.hold_sink(false, op.sinks);
        }
        if fence.is_some() {
            op.sinks = o.hold_sink(true, op.sinks);
        }
        // The last request carries the slot: its completion completes the
        // operation. A write of a batch goes unsignaled (its batch's fence
        // completes it), and completes on its own only with an error.
        if let Some(last) = wrs.last_mut() {
            last.signaled = u32::from(op.batch.is_none());
            last.slot = slot;
        }
        // Counted before the post: its completion (under this path's lock,
        // which is held) counts it down.
        if let Some(u) = op.uses.as_ref() {
            u.started();
        }
        o.ops[slot as usize] = Some(op);
        // SAFETY: every registration the requests name is in the cache (or
        // installed below once posted) and stays there while an operation
        // uses it; the remote keys belong to the peer's registrations.
        let (posted, r) = unsafe { qp.post(&wrs[..]) };
        // Install what was posted; free the rest after the locks.
        while let Some((chunk, mr, at)) = crate::compat::vec_pop(mrs) {
            let kept = if at < posted {
                reg.chunks.set(chunk, mr)
            } else {
                Err(mr)
            };
            if let Err(mr) = kept {
                // Within capacity: cannot fail.
                let _ = spare.push(mr, GFP_KERNEL);
            }
        }
        if posted < n {
            // The signaled request was not posted: no completion will come
            // for the slot. What was posted fails with the queue pair.
            // Its sinks go back to the pool; the queue pair, failed, takes
            // them down with it.
            let op = o.ops[slot as usize].take();
            let _ = o.free.push(slot, GFP_KERNEL);
            if let Some(op) = op.as_ref() {
                o.put_sinks(op.sinks);
                if let Some(u) = op.uses.as_ref() {
                    u.done();
                }
            }
            o.sq_free -= posted;
            let e = r.err().unwrap_or(crate::abi::errno::EIO);
            return Ok(Attempt::Failed(e, op));
        }
        o.sq_free -= n;
        reg.inflight += 1;
        if p != 0 {
            self.shared.work.lane_op();
        }
        if plan.fence {
            o.fences_posted += 1;
            self.shared.work.fence();
        }
        if unfenced_last.is_some() {
            match (batch, o.open.as_mut()) {
                (Some(b), _) => b.last = unfenced_last,
                (None, Some(o)) => o.last = unfenced_last,
                (None, None) => {}
            }
        }
        Ok(Attempt::Done(Posted::Yes))
    }
}
