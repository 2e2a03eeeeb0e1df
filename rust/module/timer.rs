// SPDX-License-Identifier: GPL-2.0

//! A connection's timer: a delayed work item of the shim (the 6.12 kernel
//! crate has no delayed work) that runs the connection's tick on the
//! module's work queue (`entry/conn.rs`): keepalive while established,
//! the backoff and the attempt's deadline while reconnecting.
//!
//! References: every run queued holds one reference of the connection,
//! handed to C by [`Timer::arm`]. The run takes it back when it starts;
//! [`Timer::cancel`] takes it back when it finds the run still pending. So a
//! connection outlives every run of its timer, and the timer (freed with
//! the connection) never has a run pending when it is freed.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::ffi::c_void;
use kernel::sync::Arc;

use crate::abi::errno::{Errno, ENOMEM};
use crate::conn::Conn;
use crate::ffi;
use crate::foreign;

/// A connection's timer.
///
/// # Invariants
///
/// `raw` came from `rrdma_shim_timer_new()` and is freed only by `drop`.
/// `owner` is null until the first [`Timer::arm`], then the connection
/// every run is queued for, for good.
pub(crate) struct Timer {
    raw: NonNull<ffi::ShimTimer>,
    owner: AtomicPtr<c_void>,
}

// SAFETY: the shim's timer calls may be made from any thread; `owner` is
// atomic.
unsafe impl Send for Timer {}
// SAFETY: as above: every method takes `&self` and is safe concurrently.
unsafe impl Sync for Timer {}

impl Timer {
    /// A timer with nothing queued.
    pub(crate) fn new() -> Result<Self, Errno> {
        // SAFETY: no preconditions.
        let raw = NonNull::new(unsafe { ffi::rrdma_shim_timer_new() }).ok_or(ENOMEM)?;
        // INVARIANT: just allocated; no owner yet.
        Ok(Self {
            raw,
            owner: AtomicPtr::new(core::ptr::null_mut()),
        })
    }

    /// Queues a run of `conn`'s tick `delay` jiffies from now, unless one
    /// is pending (with `reset`, a pending run moves to `delay` from now).
    /// A timer serves one connection: arming it for another is refused (a
    /// bug; nothing is queued).
    pub(crate) fn arm(&self, conn: &Arc<Conn>, delay: u64, reset: bool) {
        let me = foreign::addr_of(conn);
        let owner = match self.owner.compare_exchange(
            core::ptr::null_mut(),
            me,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => me,
            Err(o) => o,
        };
        if owner != me {
            ffi::internal_error!("connection timer armed for another connection: refused\n");
            return;
        }
        let ctx = foreign::into_c(conn.clone());
        // SAFETY: `raw` is live (type invariant); `ctx` carries the
        // reference the run takes back (`entry/conn.rs`).
        let queued =
            unsafe { ffi::rrdma_shim_timer_arm(self.raw.as_ptr(), ctx, delay as _, reset) };
        if !queued {
            // SAFETY: a run is pending already and holds its own reference;
            // C did not keep `ctx`'s (the same pointer, still covered).
            drop(unsafe { foreign::from_c::<Conn>(ctx) });
        }
    }

    /// Cancels a pending run and waits for a running one to return. Not
    /// from the timer's own run (it would wait for itself).
    pub(crate) fn cancel(&self) {
        // SAFETY: `raw` is live (type invariant).
        if unsafe { ffi::rrdma_shim_timer_cancel(self.raw.as_ptr()) } {
            let owner = self.owner.load(Ordering::Acquire);
            // SAFETY: a run was pending, so `arm` handed C a reference of
            // `owner` for it, which will not run now: taken back once, here.
            drop(unsafe { foreign::from_c::<Conn>(owner) });
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: `raw` is live (type invariant) and has no run pending: a
        // pending run holds a reference of the connection that owns this
        // timer, which is being dropped. A run may be returning (the one
        // that dropped the last reference), which the work queue allows.
        unsafe { ffi::rrdma_shim_timer_free(self.raw.as_ptr()) };
    }
}
