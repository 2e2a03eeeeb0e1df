// SPDX-License-Identifier: GPL-2.0

//! One attempt to post an operation under the connection's lock and its
//! path's: plan it against the path's registration cache (one lookup),
//! install what was allocated for it, build its work requests from
//! registrations lent under its lease, and post them all or nothing.

use super::*;

impl Conn {
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
        dma: bool,
        to: &mut ReportTo,
        batch: Option<&mut FenceGroup>,
        group: bool,
        prep: &mut Prep,
    ) -> Result<Attempt, Errno> {
        // A write outside a batch joins the open group while a fence is in
        // flight (`Slots::open`), and so does an iWARP write of a `SUBMIT`
        // run that says so (`group`) or of an io_uring submission under a
        // plug, whose ends post the group's fence. Decided under the
        // path's lock: a fence completion that posts the open group takes
        // it too.
        let join = batch.is_none()
            && !c.sent
            && (d.slots.fences_posted > 0
                || (c.dir == Dir::Write
                    && inner.res.as_ref().is_some_and(|r| r.iwarp)
                    && (group
                        || (to.waiter.as_ref().is_some_and(Waiter::is_uring) && self.plugged()))));
        if !inner.state.is_connected() {
            return Err(inner.errno());
        }
        // A lane picked before the locks were let go (`Prepare`) may have
        // been replaced meanwhile by a reconnect's, not established yet:
        // nothing would complete an operation posted there if it failed
        // before joining. The caller tries again (`EAGAIN`).
        if p != 0 && !inner.paths.get(p).is_some_and(|x| x.up) {
            return Err(EAGAIN);
        }
        // The import's one lookup: its check, its count, its keys.
        let target = inner.imports.usable(import.entry())?;
        let PathData {
            slots: o,
            wr_scratch,
            local,
        } = d;
        // A region destroyed since the caller looked it up takes no more
        // operations: a cache entry made now could outlive the destroy's
        // prune (`Conn::forget_region`, which takes this lock after the
        // region is marked, if it found an entry counted: an entry made
        // below was counted before this check, `CacheCount`).
        if region.is_destroyed() {
            return Err(ENOENT);
        }
        let rk = key(region);
        // The cache entry a first touch allocated outside the locks.
        if let Some((reservation, chunks, count)) = prep.node.take() {
            if local.tree.get(&rk).is_none() {
                let entry = LocalReg::new(chunks, region.clone(), count);
                local.tree.insert(reservation.into_node(rk, entry));
            }
        }
        // The region's one lookup in the cache.
        let reg = local.tree.get_mut(&rk);
        let batched = batch.is_some() || join;
        // A disk request's own pages, mapped for this queue pair's device
        // (until the request ends, or `post_locked` unmaps them if it is
        // not posted); `EXDEV`: to stage.
        let map = match dma {
            true => Some(map_request(inner, p, c, to)?),
            false => None,
        };
        let plan = match Plan::new(inner, o, reg.as_deref(), import, c, batched, map.as_ref()) {
            // More work requests than an operation may take: staged, it
            // takes fewer.
            Err(e) if e == E2BIG && dma => return Err(EXDEV),
            // A small own queue pair's, for an operation that found a lane
            // up (`Conn::wait_lane`) before a reconnect took it: as for
            // the reconnect.
            Err(e) if e == E2BIG && p == 0 && inner.res.as_ref().is_some_and(|r| r.own_small) => {
                return Err(EAGAIN)
            }
            r => r?,
        };
        let (paths, id, res) = (&inner.paths, &inner.id, &inner.res);
        let Some(Path { lane, .. }) = paths.get(p) else {
            return Err(ENOTCONN);
        };
        // The group's fence is reserved by its first write.
        let new_group = plan.unfenced && batch.is_none() && o.open.is_none();
        let (Some(qp), Some(res)) = (path_qp(p, id, lane), res.as_ref()) else {
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
        let Some(reg) = reg else {
            return Ok(Attempt::Again);
        };
        if plan.wrs as usize > wr_scratch.capacity() {
            // A plan fits in the send queue's operation entries, at most
            // `SLOTS_MAX`.
            ffi::internal_error!(
                "an operation's plan of {} work requests exceeds the scratch list ({})\n",
                plan.wrs,
                wr_scratch.capacity()
            );
            return Err(E2BIG);
        }
        // What was allocated enters the cache now, and leaves it again
        // below unless its registration's work request was posted.
        for f in prep.mrs.iter_mut() {
            reg.install(f);
        }
        let mut lease = Some(reg.lend());
        let wrs = wr_scratch.start();
        let step = Step {
            plan: &plan,
            import,
            reg,
            c,
            target: &target,
            dma: map.as_ref(),
        };
        let built = step.build(o, wrs, &mut prep.mrs, lease.as_ref());
        let (nsinks, fence) = match built {
            Ok(b) => b,
            Err(a) => {
                finish_attempt(reg, prep, wrs, lease.take(), 0);
                return a;
            }
        };
        // A write that leaves its fence to its batch's or its group's: the
        // batch's fence must still be waiting in its slot (a reconnect
        // flushed it); the fence will read the last byte this write places.
        let mut op = OpCtx {
            lease: None,
            uses: Some(target.uses().clone()),
            user_data: to.user_data,
            opcode: to.opcode,
            wrs: 0,
            bytes: c.len,
            waiter: None,
            sinks: NO_SINK,
            batch: None,
            fenced: plan.fence,
            covers: o.wseq + u64::from(c.dir == Dir::Write),
            proves: !plan.iwarp || c.dir == Dir::Read || plan.fence,
            join: None,
            kind: OpKind::User,
        };
        let mut unfenced_last = None;
        if plan.unfenced {
            let id = match (batch.as_ref(), o.open.as_ref()) {
                (Some(b), _) if o.holds_fence(b.slot, b.id) => b.id,
                (Some(_), _) => {
                    finish_attempt(reg, prep, wrs, lease.take(), 0);
                    return Err(ECONNRESET);
                }
                (None, Some(o)) => o.id,
                (None, None) => {
                    // Room checked above (`new_group`).
                    let id = FENCE_IDS.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = o.reserve_fence(id) else {
                        finish_attempt(reg, prep, wrs, lease.take(), 0);
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
            finish_attempt(reg, prep, wrs, lease.take(), 0);
            return Ok(Attempt::Done(Posted::Full));
        };
        // Where it reports: taken from `to` only now, past every refusal.
        op.waiter = to.waiter.take();
        if let Some(w) = op.waiter.as_ref() {
            w.poll_on(qp);
        }
        // What it gives back to the send queue when it completes: what
        // was built (a chunk registered since the plan takes one less).
        op.wrs = n;
        // The sinks the requests name (the plan checked there were enough).
        for _ in 0..nsinks {
            op.sinks = o.hold_sink(false, op.sinks);
        }
        if fence {
            op.sinks = o.hold_sink(true, op.sinks);
        }
        // A write that completes once sent frees its buffer then: on iWARP
        // each of its requests is signaled, so that siw copies its bytes
        // rather than leave the pages to TCP (`copy_before_completion`).
        if c.sent && plan.iwarp {
            wrs.iter_mut().for_each(ShimWr::copy_before_completion);
        }
        // The last request carries the slot: its completion completes the
        // operation. A write of a batch goes unsignaled (its batch's fence
        // completes it), and completes on its own only with an error.
        if let Some(last) = wrs.last_mut() {
            last.signaled = u32::from(op.batch.is_none());
            last.slot = slot;
        }
        // Counted before the post: its completion (under this path's lock,
        // which is held) counts it down and settles the lease.
        if let Some(u) = op.uses.as_ref() {
            u.started();
        }
        op.lease = lease.take();
        o.ops[slot as usize] = Some(op);
        let (posted, r) = qp.post(wrs);
        if posted < n && posted > 0 && dma {
            // Some of them reach the request's pages: it stays in its
            // slot until the teardown completes it, with the flush status:
            // not as a member of a fence group (whose fence may still
            // complete, and would complete it as placed), nor as a fence,
            // and giving back only the entries it took.
            if let Some(op) = o.ops[slot as usize].as_mut() {
                op.batch = None;
                op.fenced = false;
                op.wrs = posted;
            }
            finish_attempt(reg, prep, wrs, None, posted);
            o.sq_free -= posted;
            if c.dir == Dir::Write {
                o.wseq += 1;
            }
            return Ok(Attempt::FailedKept(
                r.err().unwrap_or(crate::abi::errno::EIO),
            ));
        }
        if posted < n {
            // The signaled request was not posted: no completion will come
            // for the slot. What was posted fails with the queue pair.
            // Its sinks go back to the pool; the queue pair, failed, takes
            // them down with it. A lease of which some request was posted
            // stays out: the cache entry stays until the connection ends.
            let mut op = o.ops[slot as usize].take();
            let _ = o.free.push(slot, GFP_KERNEL);
            if let Some(op) = op.as_mut() {
                o.put_sinks(op.sinks);
                if let Some(u) = op.uses.as_ref() {
                    u.done();
                }
                lease = op.lease.take().filter(|_| posted == 0);
            }
            finish_attempt(reg, prep, wrs, lease, posted);
            o.sq_free -= posted;
            if posted > 0 && c.dir == Dir::Write {
                // Some of its bytes may still land: until the connection
                // has failed, a caller's fence must not find the path
                // placed (it posts one, which fails with the queue pair).
                o.wseq += 1;
            }
            let e = r.err().unwrap_or(crate::abi::errno::EIO);
            return Ok(Attempt::Failed(e, op));
        }
        finish_attempt(reg, prep, wrs, None, posted);
        o.sq_free -= n;
        if c.dir == Dir::Write {
            o.wseq += 1;
            // Sent (iWARP): placed once a fence says so; until then a
            // connection's end may lose it (`SentLedger`).
            if c.sent && plan.iwarp {
                target.uses().sent.sent();
            }
        }
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

/// Ends an attempt that posted `posted` of its work requests `wrs`: none
/// of them can be posted any more, what it installed and did not post
/// leaves the cache (back to `prep`, for a next attempt or to free after
/// the locks), and a lease none of whose requests was posted is given
/// back.
fn finish_attempt(
    reg: &mut LocalReg,
    prep: &mut Prep,
    wrs: &mut [ShimWr],
    lease: Option<Lease>,
    posted: u32,
) {
    ffi::spend(wrs);
    for f in prep.mrs.iter_mut() {
        reg.uninstall_unposted(f, posted);
    }
    if let Some(l) = lease {
        reg.unlend(l);
    }
}

/// Maps the pages of the disk request `to` reports to for path `p`'s
/// queue pair.
fn map_request<'t>(
    inner: &crate::conn::ConnInner,
    p: usize,
    c: &Checked,
    to: &'t mut ReportTo,
) -> Result<ffi::DmaMap<'t>, Errno> {
    let lane = &inner.paths.get(p).ok_or(ENOTCONN)?.lane;
    let qp = path_qp(p, &inner.id, lane).ok_or(ENOTCONN)?;
    let rq = to.waiter.as_mut().and_then(Waiter::blk_mut).ok_or(EINVAL)?;
    // A device that cannot map them: staged, they need no mapping.
    let map = rq.dma_map(qp).map_err(|_| EXDEV)?;
    if ops::dma_bytes(map.segs) != Some(c.len) {
        ffi::internal_error!(
            "a disk request of {} bytes mapped to {} segments of another size\n",
            c.len,
            map.segs.len()
        );
        return Err(EIO);
    }
    Ok(map)
}

/// What building an operation's work requests reads.
struct Step<'a> {
    plan: &'a Plan,
    import: &'a Import,
    reg: &'a LocalReg,
    c: &'a Checked,
    target: &'a Usable<'a>,
    /// A disk request's pages (the local side: no registration).
    dma: Option<&'a ffi::DmaMap<'a>>,
}

impl Step<'_> {
    /// Builds the operation's work requests into `wrs` (empty): each chunk's
    /// registration (one `fresh` installed) right before its first
    /// segment, and its segments from registrations lent under `lease`.
    /// Returns the READ sinks taken and whether it ends with a fence, or
    /// the attempt's outcome if the plan no longer holds.
    // The outcome is moved once, on the way out of a failed attempt.
    #[allow(clippy::result_large_err)]
    fn build(
        &self,
        o: &Slots,
        wrs: &mut KVec<ShimWr>,
        fresh: &mut [Fresh],
        lease: Option<&Lease>,
    ) -> Result<(usize, bool), Result<Attempt, Errno>> {
        let (plan, c, reg) = (self.plan, self.c, self.reg);
        let again = Err(Ok(Attempt::Again));
        let Some(lease) = lease else {
            return again;
        };
        // The sinks are the last `plan.sinks` free ones, taken once built.
        let nfree = o.sinks_free.len();
        let sink_of = |j: usize| {
            nfree
                .checked_sub(j + 1)
                .and_then(|i| o.sinks_free.get(i).copied())
        };
        let mut nsinks = 0;
        let shift = self.import.chunk_shift;
        match self.dma {
            // On iWARP a READ per remote chunk, into a sink registered over
            // that range of the request's pages (the plan checked they fit).
            Some(m) if plan.iwarp && c.dir == Dir::Read => {
                for r in ops::dma_ranges(c.len, c.remote_off, shift) {
                    let rc = ops::chunk_of(r.remote_off, shift) as usize;
                    let rkey = self.target.rkey(rc).ok_or(Err(ENOTCONN))?;
                    let Some(k) = sink_of(nsinks) else {
                        return again;
                    };
                    nsinks += 1;
                    let _ = wrs.push(ShimWr::sink_reg_dma(m, k, r.off, r.len), GFP_KERNEL);
                    let _ = wrs.push(ShimWr::sink_read(k, r.len, r.remote_off, rkey), GFP_KERNEL);
                }
            }
            // Elsewhere a request per remote chunk and per `sge` segments,
            // with the local DMA key.
            Some(m) => {
                let sge = m.sge(c.dir == Dir::Read);
                for g in ops::dma_gathers(m.segs, c.remote_off, shift, sge) {
                    let rc = ops::chunk_of(g.remote_off, shift) as usize;
                    let rkey = self.target.rkey(rc).ok_or(Err(ENOTCONN))?;
                    let w = ShimWr::dma(c.dir == Dir::Read, &g, m, rkey);
                    let _ = wrs.push(w, GFP_KERNEL);
                }
            }
            None => {}
        }
        for s in
            ops::segments(c, plan.lshift, self.import.chunk_shift).filter(|_| self.dma.is_none())
        {
            let lc = ops::chunk_of(s.local_off, plan.lshift) as usize;
            let Some(chunk) = reg.lent(lease, lc) else {
                return again;
            };
            if let Some(f) = fresh
                .iter_mut()
                .find(|f| f.chunk == lc && f.installed && f.at == NOT_BUILT)
            {
                f.at = wrs.len() as u32;
                let w = ShimWr::reg(chunk, ffi::ACCESS_LOCAL_WRITE, false);
                // Within capacity (the plan counted it).
                let _ = wrs.push(w, GFP_KERNEL);
            }
            let rc = ops::chunk_of(s.remote_off, self.import.chunk_shift) as usize;
            let rkey = self.target.rkey(rc).ok_or(Err(ENOTCONN))?;
            // Within capacity (the plan counted every request).
            let _ = match (c.dir, plan.iwarp) {
                (Dir::Read, true) => {
                    let Some(k) = sink_of(nsinks) else {
                        // The plan checked there were enough.
                        return again;
                    };
                    nsinks += 1;
                    let w = ShimWr::sink_reg(Some(chunk), k, s.local_off, s.len);
                    let _ = wrs.push(w, GFP_KERNEL);
                    wrs.push(ShimWr::sink_read(k, s.len, s.remote_off, rkey), GFP_KERNEL)
                }
                (Dir::Read, false) => wrs.push(
                    ShimWr::read(s.local_off, chunk, s.len, s.remote_off, rkey),
                    GFP_KERNEL,
                ),
                (Dir::Write, _) => wrs.push(
                    ShimWr::write(s.local_off, chunk, s.len, s.remote_off, rkey),
                    GFP_KERNEL,
                ),
            };
        }
        let mut fence = false;
        if plan.fence {
            // The fence: a READ of the last byte written, into a fence sink
            // over the queue pair's scratch buffer.
            if let (Some(last), Some(&k)) = (wrs.last(), o.fences_free.last()) {
                let (addr, rkey) = (last.remote_addr + u64::from(last.len) - 1, last.rkey);
                let _ = wrs.push(ShimWr::sink_reg(None, k, 0, 1), GFP_KERNEL);
                let _ = wrs.push(ShimWr::sink_read(k, 1, addr, rkey), GFP_KERNEL);
                fence = true;
            }
        }
        if nsinks != plan.sinks as usize || fence != plan.fence || wrs.len() > plan.wrs as usize {
            // The plan no longer holds (it counted what this builds; a
            // chunk registered meanwhile only takes a request less).
            return again;
        }
        Ok((nsinks, fence))
    }
}
