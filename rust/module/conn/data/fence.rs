// SPDX-License-Identifier: GPL-2.0

//! iWARP write fences: a write completes once a one-byte READ after it
//! (its fence) does. Within a `SUBMIT` batch one fence follows the batch's
//! last write; outside, a write posted while a fence is in flight joins
//! the queue pair's open group, whose fence
//! the next fence completion posts (group commit), and so do the writes of
//! an io_uring submission under a plug, whose end posts it, and those of a
//! `SUBMIT` that spans several connections, whose end posts it.

use super::*;

/// How a run of operations posted together ([`Conn::post_ops`]) fences
/// its iWARP writes that complete once placed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunFence {
    /// Each write as alone: its own fence, or the open group's while a
    /// fence is in flight.
    Alone,
    /// The run's writes share one fence, after its last (`batch_end`).
    Batch,
    /// The run's writes join their queue pair's open group, whose fence
    /// the caller has posted ([`Conn::post_deferred`]) once every run of its
    /// `SUBMIT` on this connection is: a `SUBMIT` whose operations
    /// alternate between connections has one fence per connection (per
    /// queue pair its runs used), not one per run. (With a fence per run,
    /// 32 writes over 16 connections took 2 fences per connection, and
    /// ran at 0.57x the rate of one connection on siw.)
    Group,
}

/// Writes that share one fence (iWARP): they go unsignaled without a
/// fence of their own, and one fence after the last of them, reserved up
/// front with its slot, send-queue entries and fence sink, completes them
/// all. Two owners hold one:
/// - a `SUBMIT` batch (`Conn::post_ops`), whose fence follows its last
///   write (`batch_end`);
/// - a queue pair's open group (`Slots::open`): while a write fence is in
///   flight, writes posted outside a batch (io_uring commands, single
///   operations) join it, and the next fence completion posts its fence
///   (group commit); the writes of an io_uring submission of several
///   commands join it too, fence in flight or not, and the end of the
///   submission (its plug) posts the fence if none is in flight, and so
///   do those of a `SUBMIT` on several connections ([`RunFence::Group`]).
///   A write with no fence in flight, no plug and no such `SUBMIT` has
///   its own, so a lone write waits for one round trip.
pub(super) struct FenceGroup {
    /// The fence's slot.
    pub(super) slot: u32,
    /// The fence's id, which its writes carry (`OpCtx::batch`).
    pub(super) id: u64,
    /// The last write posted without a fence: its import's count, the
    /// remote address of its last byte and that byte's key.
    pub(super) last: Option<(Arc<Uses>, u64, u32)>,
}

impl_has_work! {
    impl HasWork<Self, 2> for Conn { self.unplug_work }
}

/// An io_uring submission's plug closed where nothing may sleep
/// ([`Conn::unplugged`]): its group's fence is posted here.
impl WorkItem<2> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::scoped(this, |this| this.post_deferred());
    }
}

/// Ids of batch fences.
pub(super) static FENCE_IDS: AtomicU64 = AtomicU64::new(1);

impl Conn {
    /// Begins a batch of writes on a path (data state `d`) that share
    /// one fence: on iWARP, with room for the fence now and no fence in
    /// flight; `None` otherwise (the writes then join the open group, or
    /// fence themselves). Every batch that begins goes to `batch_end`.
    pub(super) fn batch_begin(
        &self,
        inner: &crate::conn::ConnInner,
        d: &mut PathData,
    ) -> Option<FenceGroup> {
        if !inner.state.is_connected() || !inner.res.as_ref().is_some_and(|r| r.iwarp) {
            return None;
        }
        let slots = &mut d.slots;
        // With a fence in flight, the batch's writes join the open group
        // (`Slots::open`): one fence for them and the group's.
        if slots.fences_posted > 0 {
            return None;
        }
        let id = FENCE_IDS.fetch_add(1, Ordering::Relaxed);
        let slot = slots.reserve_fence(id)?;
        Some(FenceGroup {
            slot,
            id,
            last: None,
        })
    }

    /// Ends a batch on path `p` (under the connection's lock, `inner`, and
    /// the path's, `d`): posts its fence after its last write, or takes its
    /// reservation back (to drop outside the locks) if every write fenced
    /// itself or none was posted. An error: the fence could not be posted
    /// (the connection is to fail).
    pub(super) fn batch_end(
        &self,
        inner: &crate::conn::ConnInner,
        d: &mut PathData,
        p: usize,
        b: FenceGroup,
    ) -> Result<Option<OpCtx>, Errno> {
        if !d.slots.holds_fence(b.slot, b.id) {
            // A teardown flushed it, and its writes with it.
            return Ok(None);
        }
        match b.last {
            Some(last) => {
                let qp = inner
                    .paths
                    .get(p)
                    .and_then(|x| path_qp(p, &inner.id, &x.lane));
                match qp {
                    Some(qp) => self
                        .post_fence(d, qp.to_ref(), b.slot, b.id, last)
                        .map(|()| None),
                    // Going: the teardown completes the fence and its
                    // writes.
                    None => Ok(None),
                }
            }
            None => Ok(d.slots.take(b.slot)),
        }
    }

    /// Posts the open group's fence after its writes (a fence completed,
    /// or a plug closed) on `qp`, the path's queue pair. A group whose
    /// first write was refused stays reserved, empty, for the next write
    /// or the teardown.
    pub(super) fn post_open_group(&self, d: &mut PathData, qp: QpRef<'_>) -> Result<(), Errno> {
        match d.slots.open.take() {
            Some(FenceGroup {
                slot,
                id,
                last: Some(last),
            }) => self.post_fence(d, qp, slot, id, last),
            // Empty (or none): it stays.
            open => {
                d.slots.open = open;
                Ok(())
            }
        }
    }

    /// Whether the current task submits under a plug (io_uring's, around a
    /// submission of several commands) that calls this connection back
    /// when it closes ([`Conn::unplugged`]); registers the callback.
    pub(super) fn plugged(self: &Arc<Self>) -> bool {
        // SAFETY: C keeps the address only in the plug's callback, which
        // holds the reference handed to it below when it is new.
        match unsafe { ffi::rrdma_shim_plug(foreign::addr_of(self)) } {
            2 => {
                // INVARIANT: the new callback owns one reference, taken
                // back in `rrdma_rust_conn_unplug`.
                let _ = foreign::into_c(self.clone());
                true
            }
            1 => true,
            _ => false,
        }
    }

    /// The plug of an io_uring submission closed (`from_schedule`: its task
    /// is on its way to sleep with it open, and nothing may sleep here):
    /// the submission's writes get their group's fence.
    pub(crate) fn unplugged(this: Arc<Self>, from_schedule: bool) {
        if from_schedule {
            // Queued already: that run posts it.
            let _ = ffi::wq().enqueue::<Arc<Conn>, 2>(this);
        } else {
            this.post_deferred();
        }
    }

    /// Posts each path's open group's fence unless a fence in flight on
    /// that path will (its completion posts it, group commit). Also the end
    /// of a `SUBMIT` that posted runs of writes on this connection with
    /// [`RunFence::Group`]: called once its last operation on the
    /// connection is posted, and after a refusal too.
    pub(crate) fn post_deferred(self: &Arc<Self>) {
        let r = {
            let g = self.inner.lock();
            // Only iWARP writes join open groups; while disconnected, the
            // teardown ends what is left in them.
            if !g.res.as_ref().is_some_and(|r| r.iwarp) {
                return;
            }
            let mut r = Ok(());
            for (p, x) in g.paths.iter().enumerate() {
                let (Some(lock), Some(qp)) = (self.path(p), path_qp(p, &g.id, &x.lane)) else {
                    continue;
                };
                let mut pg = lock.lock();
                if let Some(d) = pg.as_deref_mut().filter(|d| d.slots.fences_posted == 0) {
                    r = r.and(self.post_open_group(d, qp.to_ref()));
                }
            }
            r
        };
        if let Err(e) = r {
            self.fail(Event::QpFatal, "cannot post a write fence", e);
        }
    }

    /// Posts the write fence reserved in `slot` of `d` (batch or group
    /// `id`) on `qp`: a one-byte READ of `last` (the import's count, the
    /// remote address and key of the last byte its writes placed) into the
    /// fence's sink. Its completion completes its writes.
    pub(super) fn post_fence(
        &self,
        d: &mut PathData,
        qp: QpRef<'_>,
        slot: u32,
        id: u64,
        last: (Arc<Uses>, u64, u32),
    ) -> Result<(), Errno> {
        let (uses, addr, rkey) = last;
        let slots = &mut d.slots;
        let Some(Some(fence)) = slots.ops.get_mut(slot as usize) else {
            return Ok(());
        };
        let k = fence.sinks;
        if k == NO_SINK {
            // `reserve_fence` takes a sink with the slot: its writes would
            // wait for a fence that never comes. End the connection.
            crate::ffi::internal_error!("a write fence without its sink\n");
            return Err(crate::abi::errno::EIO);
        }
        let mut wrs = [
            ShimWr::sink_reg(None, k, 0, 1),
            ShimWr::sink_read(k, 1, addr, rkey),
        ];
        wrs[1].signaled = 1;
        wrs[1].slot = slot;
        // Counted before the post, as an operation is.
        uses.started();
        // The sink maps the queue pair's scratch buffer: no registration of
        // a region.
        let (posted, r) = qp.post(&mut wrs);
        if posted < 2 {
            uses.done();
            return Err(r.err().unwrap_or(crate::abi::errno::EIO));
        }
        fence.kind = OpKind::Fence { id, posted: true };
        fence.covers = slots.wseq;
        fence.uses = Some(uses);
        fence.fenced = true;
        slots.fences_posted += 1;
        self.shared.work.fence();
        Ok(())
    }
}
