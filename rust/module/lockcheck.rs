// SPDX-License-Identifier: GPL-2.0

//! The lock rule's self-check.
//!
//! Nothing that waits for a completion, an rdma_cm handler or a work item
//! (a drain, destroying a queue pair or a cm_id, cancelling the timer)
//! runs with one of rrdma's locks held: the waited-for callback may need
//! that lock, and lockdep cannot see such a wait. The shim checks the rule
//! on every such call on a lockdep kernel (`ffi::assert_unlocked`), by
//! counting the held locks whose lock class is rrdma's own. That count
//! relies on how each kernel lays lock classes out; this module checks at
//! load, on a lockdep kernel, that it does see rrdma's locks (a mutex and a
//! softirq-safe spinlock, as `Conn::inner` and a path's lock are), so the
//! rule's check cannot go blind unnoticed.

use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use crate::compat::{new_bh_lock, BhLock};
use crate::ffi;

/// Holds a mutex and a softirq-safe spinlock of rrdma's and checks that
/// the rule's check counts them. Logs the outcome on a lockdep kernel;
/// `EINVAL` if the check is blind.
pub(crate) fn self_check() -> Result {
    let Some(before) = ffi::own_locks_held() else {
        return Ok(());
    };
    let mutex: Arc<Mutex<()>> = Arc::pin_init(new_mutex!((), "lockcheck::mutex"), GFP_KERNEL)?;
    let spin: Arc<BhLock<()>> = Arc::pin_init(new_bh_lock!((), "lockcheck::spin"), GFP_KERNEL)?;
    let outer = mutex.lock();
    let in_mutex = ffi::own_locks_held();
    let inner = spin.lock();
    let in_both = ffi::own_locks_held();
    drop(inner);
    drop(outer);
    if before != 0 || in_mutex != Some(1) || in_both != Some(2) {
        pr_err!(
            "lock rule check is blind: counted {}, {:?}, {:?} of rrdma's locks held, not 0, 1, 2\n",
            before,
            in_mutex,
            in_both
        );
        return Err(EINVAL);
    }
    pr_info!("lock rule checked: no rrdma lock is held across a drain or a teardown\n");
    Ok(())
}
