// SPDX-License-Identifier: GPL-2.0

//! How a connection ends: every end (a user close, a peer's disconnect, a
//! failed or flushed work request, a broken protocol, device removal, a
//! timeout) goes through the state machine, which asks for the teardown
//! exactly once; the teardown drains and destroys every queue pair, frees
//! the registrations, leaves the device, destroys the ids and leaves the
//! file (see the module doc of `conn/mod.rs`). The teardown runs where it
//! is asked for if that is process context outside any handler, in the
//! handler of rdma_cm's device removal, and otherwise on the module's work
//! queue.

use core::sync::atomic::Ordering;

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, WorkItem};

use super::{Conn, Resources};
use crate::abi::{
    conn::{Action, Event, State},
    errno::{Errno, ECANCELED, ECONNRESET},
    wc, wire,
};
use crate::calling::Task;
use crate::cm_id::{CmId, InHandler};
use crate::ffi;

/// The kind of a work request whose completion failed, for the log line.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailedWr {
    /// A posted control-message receive.
    Receive,
    /// A control message's send.
    ControlSend,
    /// A registration (an export's grant or a data-path chunk).
    Registration,
    /// A data operation.
    Operation,
}

impl FailedWr {
    fn name(self) -> &'static str {
        match self {
            FailedWr::Receive => "a receive",
            FailedWr::ControlSend => "a control message's send",
            FailedWr::Registration => "a registration",
            FailedWr::Operation => "an operation",
        }
    }
}

impl_has_work! {
    impl HasWork<Self> for Conn { self.teardown_work }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::scoped(this, |this| {
            Conn::teardown(this, None);
            let tearing = &this.shared.reconnect.tearing;
            tearing.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

impl Conn {
    /// Queues the teardown on the module's work queue (from a handler or a
    /// completion, where it cannot run).
    pub(super) fn schedule_teardown(self: &Arc<Self>) {
        let wq = ffi::wq();
        // Counted for the storm guard until the work has run.
        let tearing = &self.shared.reconnect.tearing;
        tearing.fetch_add(1, Ordering::Relaxed);
        // Asked for once per queue pair (the state machine says so), and
        // the next is asked for only after this one ran: the work cannot be
        // queued already. Were it, the run already queued counts for both.
        if wq.enqueue::<Arc<Conn>, 0>(self.clone()).is_err() {
            tearing.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Ends the connection because of `ev` (a failed completion, a broken
    /// protocol), from any context: the teardown runs on the work queue.
    pub(super) fn fail(self: &Arc<Self>, ev: Event, why: &str, e: Errno) {
        self.fail_with(ev, || {
            pr_warn!(
                "connection {} closing: {} (errno {})\n",
                self.serial,
                why,
                e.get()
            )
        });
    }

    /// An operator's reset (a disk's sysfs `reset`): the connection ends
    /// as its peer's disconnect would end it. Connected, it fails and (if
    /// it reconnects) connects again after the first backoff; an attempt
    /// under way fails and the next follows its backoff; between attempts,
    /// nothing.
    pub(crate) fn reset(self: &Arc<Self>) {
        self.fail(Event::Disconnected, "reset asked", ECONNRESET);
    }

    /// As [`Self::fail`], with the ratelimited log line `log` prints.
    /// Returns whether this ended the connection (it had not ended yet).
    pub(super) fn fail_with(self: &Arc<Self>, ev: Event, log: impl FnOnce()) -> bool {
        self.end(ev, || {
            if crate::ffi::ratelimit() {
                log();
            }
        })
    }

    /// Ends the connection because of `ev` unless it has ended already:
    /// runs `before` (a log line), then schedules the teardown. Returns
    /// whether this ended it.
    pub(super) fn end(self: &Arc<Self>, ev: Event, before: impl FnOnce()) -> bool {
        let action = self.advance(&mut self.inner.lock(), ev);
        self.cv.notify_all();
        if action != Action::Teardown {
            return false;
        }
        before();
        self.schedule_teardown();
        true
    }

    /// A work request of kind `wr` failed with work completion status
    /// `wc_status`: the connection ends. A flush ends it only while it is
    /// still connected (see [`Self::flushed`]).
    pub(crate) fn wc_failed(self: &Arc<Self>, t: &Task, wc_status: c_int, wr: FailedWr) {
        let status = wc_status as u32;
        match wc::to_errno(status) {
            Some(e) if e == ECANCELED => self.flushed(t, wr),
            Some(e) => {
                self.fail_with(Event::QpFatal, || {
                    pr_warn!(
                        "connection {} closing: {} failed: {} (errno {})\n",
                        self.serial,
                        wr.name(),
                        wc::status_name(status),
                        e.get()
                    )
                });
            }
            None => {}
        }
    }

    /// A work request of kind `wr` completed flushed. While the connection
    /// is up, or accepted and not yet established, the provider moved its
    /// queue pair to the error state before a failed completion or a CM
    /// event said so (rxe reports a failure its requester finds only as
    /// flushes, and a responder's, such as a peer's Write with a bad key,
    /// only so; a peer's disconnect flushes before its CM event arrives):
    /// end it now, so that new operations get `EAGAIN` or the close errno
    /// instead of being posted and flushed in turn until keepalive
    /// notices. While connecting, it ends at establishment unless the CM
    /// reports why first (`abi::conn::step_gated`). In any other state it
    /// is the teardown's flush. A flushed receive is not logged: a peer
    /// that disconnects flushes the posted receives, and a disconnect is
    /// not an error.
    pub(crate) fn flushed(self: &Arc<Self>, _t: &Task, wr: FailedWr) {
        if wr == FailedWr::Receive {
            // Not even a ratelimit token: a disconnect is not an error.
            self.end(Event::Flushed, || {});
            return;
        }
        self.fail_with(Event::Flushed, || {
            pr_warn!(
                "connection {} closing: {} was flushed: its queue pair is in the \
                 error state (errno {})\n",
                self.serial,
                wr.name(),
                ECONNRESET.get()
            )
        });
    }

    /// Ends the connection because of `ev` and returns once it is torn
    /// down (process context, no lock held). If a teardown is already under
    /// way (device removal, a concurrent close, the work queue), waits for
    /// it: callers rely on the connection's resources being gone. That wait
    /// is bounded by a drain and is not interruptible, like `flush_work()`.
    /// A connection that reconnects is torn down to `Waiting` by a failure
    /// (its queue pair and registrations are gone), and for good by a user
    /// close, which also ends the reconnect.
    pub(crate) fn destroy(this: &Arc<Self>, ev: Event) {
        ffi::assert_unlocked(b"connection destroyed\0");
        loop {
            let action = this.advance(&mut this.inner.lock(), ev);
            if action == Action::Teardown {
                Self::teardown(this, None);
            }
            let mut g = this.inner.lock();
            loop {
                match g.state {
                    State::Closed { .. } => return,
                    State::Closing { .. } => this.cv.wait(g.guard()),
                    // A reconnect's teardown ran, and maybe its backoff and
                    // the next attempt's start: close again, for good.
                    _ if ev == Event::UserClose => break,
                    State::Waiting { .. } => return,
                    _ => this.cv.wait(g.guard()),
                }
            }
        }
    }

    /// The teardown, asked for by the state machine (the state is
    /// `Closing`): disconnects, drains and destroys the queue pair (every
    /// operation in flight completes, with an error), frees registrations,
    /// leaves the device, destroys the id (or hands it to the CM when run
    /// in its handler `in_handler`: device removal, a refused request),
    /// leaves the file. Returns what the handler must return to the CM.
    pub(super) fn teardown(this: &Arc<Self>, in_handler: Option<&InHandler>) -> c_int {
        let task = Task::checked(b"connection torn down\0");
        // The connection's own id, then its lanes'.
        let mut ids: [Option<CmId<Conn>>; wire::QPS_MAX as usize] = core::array::from_fn(|_| None);
        let (res, listener, device) = {
            let mut g = this.inner.lock();
            // Not in a handler of the id (the handler mutex keeps those
            // apart): bounded by the provider's connect.
            while g.connecting {
                this.cv.wait(g.guard());
            }
            for (id, path) in ids.iter_mut().zip(g.paths.iter_mut()).skip(1) {
                *id = path.lane.take();
                if core::mem::take(&mut path.up) {
                    this.shared.work.lane_down();
                }
            }
            ids[0] = g.id.take();
            (g.res.take(), g.listener.take(), g.device.take())
        };
        // Waiters (imports, revokes, synchronous operations) see the end.
        this.cv.notify_all();
        // The state has left `Connected`, `Waiting` and the attempt: no run
        // arms the timer again.
        this.timer.cancel();
        drop(listener);
        // Every queue pair stops before the first drain: a drain's
        // flushed READs let their pages go while the queue pairs after it
        // would still place the peer's writes (an iWARP READ's sink stays
        // registered in the connection's domain until its queue pair is
        // destroyed).
        super::data::stop_each(this.serial, ids.iter().flatten(), in_handler.is_none());
        for id in ids.iter_mut().flatten() {
            // Drained and destroyed: no completion callback runs any more.
            id.destroy_qp();
        }
        this.flush_ops(&task);
        // The paths' registrations, one path at a time outside the lock;
        // the lanes' paths go with them.
        this.drop_paths();
        if let Some(res) = res {
            let Resources { grants, pd, .. } = res;
            // Registrations before their domain.
            drop(grants);
            drop(pd);
        }
        if let Some(device) = device {
            device.remove_conn(this);
        }
        // The id whose handler runs this (device removal, a refused
        // request) goes back to the CM; the others are destroyed.
        let mut handed = 0;
        for id in ids.into_iter().flatten() {
            match in_handler {
                Some(h) if id.is_handled_by(h) => handed = id.into_cm(h),
                _ => drop(id),
            }
        }
        // Only the last teardown leaves the file (a close cannot turn a
        // reconnect's into the last: it waits for `Waiting` and closes
        // again).
        let retry = this.inner.lock().state.is_waiting();
        if !retry {
            this.shared.unregister(this);
        }
        let mut g = this.inner.lock();
        // Armed under the lock with the state change: a close that follows
        // cancels it.
        match this.advance(&mut g, Event::TornDown) {
            Action::Backoff => this.backoff(&mut g),
            _ => this.gave_up(&g),
        }
        drop(g);
        this.cv.notify_all();
        handed
    }
}
