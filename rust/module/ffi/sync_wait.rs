// SPDX-License-Identifier: GPL-2.0

//! A synchronous operation's wait (`shim/sync_wait.c`): a C `struct
//! completion`, because the wait must be killable and the kernel crate's
//! `CondVar` has no killable wait.

use core::ptr::NonNull;

use crate::abi::errno::{Errno, EINTR, ENOMEM};

/// `struct rrdma_shim_sync` (opaque).
#[repr(C)]
pub(crate) struct ShimSync {
    _opaque: [u8; 0],
}

/// Owns a `struct rrdma_shim_sync` (freed on drop): done once, waited for
/// by its owner.
pub(crate) struct SyncDone(NonNull<ShimSync>);

// SAFETY: the shim's object has no thread affinity: `complete_all()` may
// run in any context, the wait in any task.
unsafe impl Send for SyncDone {}
// SAFETY: both operations are safe to run concurrently (a completion's own
// lock orders them).
unsafe impl Sync for SyncDone {}

impl SyncDone {
    pub(crate) fn new() -> Result<Self, Errno> {
        // SAFETY: no preconditions.
        let p = unsafe { rrdma_shim_sync_new() };
        // INVARIANT: a live object of the shim's, owned by this value.
        NonNull::new(p).map(Self).ok_or(ENOMEM)
    }

    /// Marks it done (any context, softirq included).
    pub(crate) fn done(&self) {
        // SAFETY: live by the type's invariant.
        unsafe { rrdma_shim_sync_done(self.0.as_ptr()) }
    }

    /// Waits until it is done, whatever signal comes but a fatal one
    /// (`EINTR`). Process context, no lock held.
    pub(crate) fn wait(&self) -> Result<(), Errno> {
        // SAFETY: live by the type's invariant.
        match unsafe { rrdma_shim_sync_wait(self.0.as_ptr()) } {
            0 => Ok(()),
            _ => Err(EINTR),
        }
    }
}

impl Drop for SyncDone {
    fn drop(&mut self) {
        // SAFETY: live by the type's invariant, and dropped once.
        unsafe { rrdma_shim_sync_free(self.0.as_ptr()) }
    }
}

extern "C" {
    fn rrdma_shim_sync_new() -> *mut ShimSync;
    fn rrdma_shim_sync_free(s: *mut ShimSync);
    fn rrdma_shim_sync_done(s: *mut ShimSync);
    fn rrdma_shim_sync_wait(s: *mut ShimSync) -> i32;
}
