// SPDX-License-Identifier: GPL-2.0

//! Lock helpers (`shim/lock.c`): softirq-safe spinlocks for
//! `compat::BhLock`, and the debug kernel's check that no rrdma lock is
//! held across a wait.

use kernel::ffi::{c_char, c_int};

/// Checks, on a debug kernel, the rule that nothing waits for a
/// completion, an event handler or a work item with one of rrdma's locks
/// held: warns, naming `what` and the locks held, when the current task
/// holds one (and `might_sleep()` everywhere). `what` is NUL-terminated.
pub(crate) fn assert_unlocked(what: &'static [u8]) {
    // The shim reads a C string: stop at a NUL of ours.
    let what = if what.last() == Some(&0) {
        what
    } else {
        b"?\0"
    };
    // SAFETY: `what` ends with a NUL and is static.
    unsafe { rrdma_shim_assert_unlocked(what.as_ptr().cast()) }
}

/// How many of rrdma's locks the current task holds; `None` without
/// lockdep.
pub(crate) fn own_locks_held() -> Option<u32> {
    // SAFETY: no preconditions.
    u32::try_from(unsafe { rrdma_shim_own_locks_held() }).ok()
}

extern "C" {
    /// `spin_lock_bh()` (`compat::BhLock`).
    pub(crate) fn rrdma_shim_spin_lock_bh(lock: *mut kernel::bindings::spinlock_t);
    /// `spin_unlock_bh()`.
    pub(crate) fn rrdma_shim_spin_unlock_bh(lock: *mut kernel::bindings::spinlock_t);
    /// `spin_trylock_bh()`.
    #[cfg_attr(rrdma_compat = "k6_12", allow(dead_code))]
    pub(crate) fn rrdma_shim_spin_trylock_bh(lock: *mut kernel::bindings::spinlock_t) -> bool;
    /// `lockdep_assert_held()`.
    #[cfg_attr(rrdma_compat = "k6_12", allow(dead_code))]
    pub(crate) fn rrdma_shim_spin_assert_held(lock: *mut kernel::bindings::spinlock_t);
    /// The debug kernel's check that the current task holds none of
    /// rrdma's locks, before a wait for a completion or a handler (`what`,
    /// a NUL-terminated string, names it in the warning).
    pub(crate) fn rrdma_shim_assert_unlocked(what: *const c_char);
    /// How many of rrdma's locks the current task holds (-1 without
    /// lockdep).
    pub(crate) fn rrdma_shim_own_locks_held() -> c_int;
}
