// SPDX-License-Identifier: GPL-2.0

//! Synchronous operations (`RW_SYNC`): one posted and waited for, polling
//! for its completion first for as long as `abi::poll` says (adaptive by
//! default); and waits for send-queue room, with the log line of a caller
//! that found none.

use super::*;

/// Where a synchronous operation's status lands.
#[pin_data]
pub(crate) struct SyncWait {
    /// Set where the operation completes. A softirq-safe spinlock, a leaf:
    /// taken under its path's lock (and `Shared::ring`, for a fence's
    /// writes) by the completion, alone by the waiter.
    #[pin]
    pub(super) status: BhLock<Option<i32>>,
    /// When `status` was set (`ffi::now_ns`): where the completion was
    /// handled, before any wake-up, so a sleeping waiter's wake-up latency
    /// stays out of the mean that sets the polling window.
    done_ns: AtomicU64,
    /// Done once `status` is set; its wait is killable.
    done: ffi::SyncDone,
}

impl SyncWait {
    pub(super) fn new() -> Result<Arc<Self>> {
        let done = ffi::SyncDone::new()?;
        Arc::pin_init(
            pin_init!(Self {
                status <- new_bh_lock!(None, "SyncWait::status"),
                done_ns: AtomicU64::new(0),
                done,
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    pub(super) fn set(&self, status: i32) {
        // Before the status: the waiter reads it after it sees the status
        // under the same lock.
        self.done_ns.store(ffi::now_ns(), Ordering::Relaxed);
        *self.status.lock() = Some(status);
        self.done.done();
    }
}

impl Conn {
    /// Free and total send-queue operation entries over the first `n`
    /// paths (a wait for room).
    pub(super) fn sq_room(&self, n: usize) -> (u64, u64) {
        self.path_data
            .iter()
            .take(n)
            .fold((0, 0), |(free, all), l| match l.lock().as_ref() {
                Some(d) => (
                    free + u64::from(d.slots.sq_free),
                    all + u64::from(d.slots.depth),
                ),
                None => (free, all),
            })
    }

    /// Logs (rate-limited) why `what` could post nothing on this connection
    /// with nothing of its caller in flight, with `e` the errno it returns.
    pub(crate) fn warn_no_room(&self, what: &str, e: Errno) {
        let Some(lock) = self.path(0) else {
            return;
        };
        let pg = lock.lock();
        let Some(o) = pg.as_ref().map(|d| &d.slots) else {
            return;
        };
        let (sq_free, depth, free, sinks, fences) = (
            o.sq_free,
            o.depth,
            o.free.len(),
            o.sinks_free.len(),
            o.fences_free.len(),
        );
        drop(pg);
        crate::ffi::warn_user!(
            "{}: nothing posted (errno {}): {} of {} send entries, {} slots, {} READ sinks, {} fence sinks free\n",
            what,
            e.get(),
            sq_free,
            depth,
            free,
            sinks,
            fences
        );
    }

    /// Waits (interruptibly) until a completion frees room on the send
    /// queue, nothing is in flight any more, or the connection ends.
    pub(crate) fn wait_room(&self) -> Result<(), Errno> {
        let waiters = &self.followups.room_waiters;
        // Before the first look at the room: a completion that frees some
        // after it asks the follow-up work to wake us (`Followups::ROOM`).
        waiters.fetch_add(1, Ordering::SeqCst);
        let r = {
            let mut g = self.inner.lock();
            let (before, _) = self.sq_room(g.paths.len());
            let mut left = None;
            wait_until(&self.cv, g.guard(), &mut left, |i| {
                let (free, all) = self.sq_room(i.paths.len());
                free > before || free == all || !i.state.is_connected()
            })
        };
        waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Runs a synchronous operation: posts it (waiting for room) and waits
    /// for its status.
    pub(crate) fn run_sync(
        self: &Arc<Self>,
        import: &Import,
        work: OpWork<'_>,
        opcode: u32,
    ) -> Result<i32, Errno> {
        if let OpWork::Blocks(_, c) = work {
            import.wait_lane(c.len, true)?;
        }
        let w = SyncWait::new().map_err(|_| ENOMEM)?;
        let mut to = ReportTo {
            user_data: 0,
            opcode,
            waiter: Some(Waiter::Sync(w.clone())),
        };
        // Before the post: its completion may be handled (and timed) on
        // another CPU before `post_op` returns.
        let mut posted = ffi::now_ns();
        let p = loop {
            match self.post_op(import, work, &mut to)? {
                (Posted::Yes, p) => break p,
                (Posted::Full, _) => {
                    self.wait_room()?;
                    posted = ffi::now_ns();
                }
            }
        };
        self.busy_poll(p, &w);
        // Posted: a signal does not end the wait (a restart would post the
        // operation a second time while it is in flight, an EINTR leave
        // it in flight, its bytes landing after the caller moved on); its
        // completion does, or its connection's end (which flushes it). A
        // fatal signal does too: nothing of the dying task will look.
        w.done.wait()?;
        let status = *w.status.lock();
        if status == Some(0) {
            // Its time to completion feeds the mean that sets the next
            // one's window. Not the time to this task's wake-up: that
            // would make an operation that slept look slower than its
            // transport, and a mean that the wake-ups pushed past
            // `abi::poll::AUTO_MEAN_MAX_NS` would keep polling off for good.
            let took = w.done_ns.load(Ordering::Relaxed).saturating_sub(posted);
            let _ = self
                .sync_mean_ns
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                    Some(crate::abi::poll::mean_after(m, took))
                });
        }
        Ok(status.unwrap_or(0))
    }

    /// Busy polling: polls path `p`'s send CQ here until `w` has its status
    /// or the window (`abi::poll::window_ns`: twice the connection's mean
    /// completion time by default) is over, so that a short synchronous
    /// operation's end wakes nobody (neither the CQ's softirq nor this
    /// task). Completions of others that it finds are handled here too.
    /// Between empty polls the CPU goes to whatever else can run on it
    /// (`shim/poll.c`). The queue pair's teardown waits for the poll
    /// reference, which goes before this returns.
    pub(super) fn busy_poll(&self, p: usize, w: &SyncWait) {
        let mean = self.sync_mean_ns.load(Ordering::Relaxed);
        let ns = crate::abi::poll::window_ns(ffi::sync_poll(), mean);
        if ns == 0 {
            return;
        }
        let r = {
            let g = self.inner.lock();
            g.paths
                .get(p)
                .and_then(|x| path_qp(p, &g.id, &x.lane))
                .map(crate::verbs::Qp::poll_ref)
        };
        let Some(r) = r else {
            return;
        };
        let until = ffi::now_ns().saturating_add(ns);
        let mut polled = 0;
        while w.status.lock().is_none() && ffi::now_ns() < until {
            polled += r.poll();
        }
        self.shared.work.sync_polled(polled);
    }
}
