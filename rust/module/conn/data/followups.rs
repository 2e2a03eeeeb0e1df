// SPDX-License-Identifier: GPL-2.0

//! What completions, handled without the connection's lock, leave for it:
//! a write fence that could not be posted, a destroyed region's
//! registrations to prune, revoke acknowledgements and orphan removal, a
//! task waiting for send-queue room; run by the connection's follow-up work
//! item in process context.

use super::*;

/// What completions handled without the connection's lock leave for the
/// connection's follow-up work ([`Conn::run_followups`]): flags in `due`.
pub(in crate::conn) struct Followups {
    pub(super) due: AtomicU32,
    /// The errno of the first write fence a completion could not post.
    pub(super) fence_errno: AtomicI32,
    /// The status of a failed operation handled in atomic context.
    pub(super) failed_wc: AtomicU32,
    /// Tasks in [`Conn::wait_room`].
    pub(super) room_waiters: AtomicU32,
}

impl Followups {
    /// A destroyed region's cached registrations lost their last operation.
    pub(super) const PRUNE: u32 = 1 << 0;
    /// An import's count reached zero while a revoke's acknowledgement or
    /// the removal of its entry waited for that (`imports::Uses`).
    pub(super) const SETTLE: u32 = 1 << 1;
    /// A write fence could not be posted: the connection fails.
    pub(super) const FENCE_FAILED: u32 = 1 << 2;
    /// Send-queue room came while a task waits for it.
    pub(super) const ROOM: u32 = 1 << 3;
    /// An operation failed where its connection could not be ended (atomic
    /// context): the connection fails.
    pub(super) const OP_FAILED: u32 = 1 << 4;

    pub(in crate::conn) const fn new() -> Self {
        Self {
            due: AtomicU32::new(0),
            fence_errno: AtomicI32::new(0),
            failed_wc: AtomicU32::new(0),
            room_waiters: AtomicU32::new(0),
        }
    }
}

/// What one batch of completions leaves for the follow-up work.
#[derive(Default)]
pub(super) struct Due {
    pub(super) flags: u32,
    pub(super) fence_err: Option<Errno>,
    /// The work completion status of an operation that failed in atomic
    /// context.
    pub(super) failed_wc: Option<u32>,
}

impl_has_work! {
    impl HasWork<Self, 3> for Conn { self.followup_work }
}

/// The follow-up work of completions handled without the connection's lock
/// ([`Followups`]).
impl WorkItem<3> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::scoped(this, |this| this.run_followups());
    }
}

impl Conn {
    /// Hands what `due` holds to the follow-up work (any context).
    pub(super) fn ask_followups(self: &Arc<Self>, due: Due) {
        let mut flags = due.flags;
        if let Some(e) = due.fence_err {
            let _ = self.followups.fence_errno.compare_exchange(
                0,
                e.to_errno(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            flags |= Followups::FENCE_FAILED;
        }
        if let Some(s) = due.failed_wc {
            self.followups.failed_wc.store(s, Ordering::Release);
            flags |= Followups::OP_FAILED;
        }
        if flags == 0 {
            return;
        }
        self.followups.due.fetch_or(flags, Ordering::AcqRel);
        // Queued already: that run sees the flags (it takes them first).
        // The clone is not the last reference: the caller's covers it.
        let _ = ffi::wq().enqueue::<Arc<Conn>, 3>(self.clone());
    }

    /// The follow-up work: what completions handled without the
    /// connection's lock left for it (process context).
    pub(super) fn run_followups(self: &Arc<Self>) {
        let due = self.followups.due.swap(0, Ordering::AcqRel);
        if due & Followups::FENCE_FAILED != 0 {
            let e = self.followups.fence_errno.swap(0, Ordering::AcqRel);
            let e = Errno::from_status(e).unwrap_or(crate::abi::errno::EIO);
            self.fail(Event::QpFatal, "cannot post a write fence", e);
        }
        if due & Followups::OP_FAILED != 0 {
            let task = Task::checked(b"the follow-up work\0");
            let s = self.followups.failed_wc.load(Ordering::Acquire);
            self.wc_failed(&task, s as c_int, crate::conn::FailedWr::Operation);
        }
        if due & Followups::PRUNE != 0 {
            self.prune_destroyed();
        }
        if due & (Followups::SETTLE | Followups::ROOM) != 0 {
            let mut g = self.inner.lock();
            let mut unsent = None;
            if due & Followups::SETTLE != 0 {
                g.imports.settle();
                unsent = ctrl::send_due_acks(&mut g, &self.shared.ctrl);
            }
            // A task that waits for room checked it under this lock: it is
            // waiting on the condition variable by now.
            drop(g);
            self.cv.notify_all();
            if let Some(e) = unsent {
                self.fail(
                    Event::QpFatal,
                    "no memory for a revoke's acknowledgement",
                    e,
                );
            }
        }
    }
}
