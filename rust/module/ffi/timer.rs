// SPDX-License-Identifier: GPL-2.0

//! A connection's timer, a delayed work item (`shim/conn_timer.c`,
//! used by `timer.rs`).

use kernel::ffi::{c_ulong, c_void};

/// Opaque `struct rrdma_shim_timer`: a delayed work item (`timer.rs`).
#[repr(C)]
pub(crate) struct ShimTimer {
    _opaque: [u8; 0],
}

extern "C" {
    /// A timer that calls `rrdma_rust_conn_timer()`; NULL without memory.
    pub(crate) fn rrdma_shim_timer_new() -> *mut ShimTimer;
    /// Queues a run with `ctx` after `delay` jiffies; false if one is
    /// pending already: nothing changes then, or with `reset`, the pending
    /// run moves to `delay` from now.
    pub(crate) fn rrdma_shim_timer_arm(
        t: *mut ShimTimer,
        ctx: *mut c_void,
        delay: c_ulong,
        reset: bool,
    ) -> bool;
    /// `cancel_delayed_work_sync()`: whether a run was pending (and will
    /// not happen).
    pub(crate) fn rrdma_shim_timer_cancel(t: *mut ShimTimer) -> bool;
    /// Frees a timer with no run pending.
    pub(crate) fn rrdma_shim_timer_free(t: *mut ShimTimer);
}
