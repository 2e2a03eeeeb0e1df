// SPDX-License-Identifier: GPL-2.0

//! Kernel helpers Rust cannot reach on every supported kernel: time,
//! random bits, the CPU and context, `PAGE_SIZE`, signals, and the
//! ratelimited warnings ([`warn_user!`], [`internal_error!`]).

use kernel::ffi::c_ulong;

/// The kernel's `jiffies` (it wraps: compare with `wrapping_sub`).
pub(crate) fn jiffies() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_jiffies() as u64 }
}

/// `jiffies_to_msecs()`.
pub(crate) fn jiffies_to_msecs(j: u64) -> u32 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_jiffies_to_msecs(j as c_ulong) }
}

/// `PAGE_SIZE` as `u64`.
pub(crate) fn page_size() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_page_size() as u64 }
}

/// Whether the current task has a signal pending (a long allocation loop
/// stops with `EINTR`).
pub(crate) fn should_stop() -> bool {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_should_stop() }
}

/// 64 random bits (`get_random_u64()`).
pub(crate) fn random_u64() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_random_u64() }
}

/// The monotonic clock, in ns.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_now_ns() }
}

/// Gives the CPU to whatever else can run on it (a task that waits by
/// looking again and again; process context, no lock held).
pub(crate) fn yield_cpu() {
    // SAFETY: no preconditions beyond the context above, which
    // `might_sleep()` in the shim checks on debug kernels.
    unsafe { rrdma_shim_yield() }
}

/// Whether a softirq runs the caller (a send CQ's poll).
pub(crate) fn in_softirq() -> bool {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_in_softirq() }
}

/// A scope of the current task's allocation flags, restored when the
/// value is dropped, on the task that entered it (not `Send`). Process
/// context only: in softirq it would mark the task the softirq
/// interrupted.
pub(crate) struct AllocScope {
    saved: u32,
    restore: unsafe extern "C" fn(u32),
    _task: core::marker::PhantomData<*const ()>,
}

impl AllocScope {
    /// Allocations start no I/O (`memalloc_noio_save()`): a connection's
    /// work items allocate under its lock, which a disk's `queue_rq` takes,
    /// and reclaim's I/O could be that disk's.
    pub(crate) fn noio() -> Self {
        // SAFETY: no preconditions; `Drop` restores what it returns with
        // its pair, on the same task (the value is not `Send`).
        let saved = unsafe { rrdma_shim_noio_save() };
        Self {
            saved,
            restore: rrdma_shim_noio_restore,
            _task: core::marker::PhantomData,
        }
    }

    /// Allocations come from the memory reserves and never reclaim
    /// (`memalloc_noreclaim_save()`, `PF_MEMALLOC`): the work that brings
    /// a disk's connection back, which swap may be waiting for with memory
    /// exhausted (swap over NFS and nbd do the same).
    pub(crate) fn reserves() -> Self {
        // SAFETY: as in `noio`.
        let saved = unsafe { rrdma_shim_reserves_save() };
        Self {
            saved,
            restore: rrdma_shim_reserves_restore,
            _task: core::marker::PhantomData,
        }
    }
}

impl Drop for AllocScope {
    fn drop(&mut self) {
        // SAFETY: `saved` came from the save that pairs with `restore`, on
        // this task.
        unsafe { (self.restore)(self.saved) }
    }
}

/// The CPU the caller runs on (it may move right after: a hint).
pub(crate) fn this_cpu() -> u32 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_this_cpu() }
}

/// Whether a warning a peer or userspace can trigger may be printed now
/// (one ratelimit for the module).
pub(crate) fn ratelimit() -> bool {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_warn_ratelimit() }
}

/// `pr_warn!` for conditions userspace can trigger at will: ratelimited so
/// that a misbehaving program cannot flood the log.
macro_rules! warn_user {
    ($($arg:tt)*) => {
        if $crate::ffi::ratelimit() {
            kernel::pr_warn!($($arg)*);
        }
    };
}
pub(crate) use warn_user;

/// Logs a condition the code rules out ("cannot happen"), ratelimited,
/// with one prefix, `internal error:`, that the test harness treats as a
/// kernel report: such a line is a defect of rrdma, never the user's.
macro_rules! internal_error {
    ($fmt:literal $($arg:tt)*) => {
        if $crate::ffi::ratelimit() {
            kernel::pr_err!("internal error: {}", format_args!($fmt $($arg)*));
        }
    };
}
pub(crate) use internal_error;

extern "C" {
    /// Whether a user-triggered warning may be printed now (ratelimited).
    pub(crate) fn rrdma_shim_warn_ratelimit() -> bool;
    /// The kernel's `jiffies`.
    pub(crate) fn rrdma_shim_jiffies() -> c_ulong;
    /// `jiffies_to_msecs(j)`.
    pub(crate) fn rrdma_shim_jiffies_to_msecs(j: c_ulong) -> u32;
    /// `cond_resched()`, then whether a fatal signal is pending.
    pub(crate) fn rrdma_shim_should_stop() -> bool;
    /// `PAGE_SIZE`.
    pub(crate) fn rrdma_shim_page_size() -> c_ulong;
    /// `get_random_u64()`.
    pub(crate) fn rrdma_shim_random_u64() -> u64;
    /// `raw_smp_processor_id()`.
    pub(crate) fn rrdma_shim_this_cpu() -> u32;
    /// `in_serving_softirq()`.
    pub(crate) fn rrdma_shim_in_softirq() -> bool;
    /// `memalloc_noio_save()`.
    pub(crate) fn rrdma_shim_noio_save() -> u32;
    /// `memalloc_noio_restore()`.
    pub(crate) fn rrdma_shim_noio_restore(flags: u32);
    /// `memalloc_noreclaim_save()`.
    pub(crate) fn rrdma_shim_reserves_save() -> u32;
    /// `memalloc_noreclaim_restore()`.
    pub(crate) fn rrdma_shim_reserves_restore(flags: u32);
    /// The monotonic clock, in ns.
    pub(crate) fn rrdma_shim_now_ns() -> u64;
    /// `yield()`, after `might_sleep()`.
    pub(crate) fn rrdma_shim_yield();
}
