// SPDX-License-Identifier: GPL-2.0

//! The registration of the `ib_client` and `/dev/rrdma`, the module's
//! work queue and an open file's wait queue (`shim/chardev.c`).

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};

/// The module's work queue (connection teardown).
pub(crate) fn wq() -> &'static kernel::workqueue::Queue {
    // SAFETY: the shim creates the queue before the module registers
    // anything that could queue work and destroys it (draining it) only
    // after the last connection is gone, so it outlives every caller.
    unsafe { kernel::workqueue::Queue::from_raw(rrdma_shim_wq()) }
}

/// An open file's wait queue, which readers of its completion ring sleep on.
///
/// # Invariants
///
/// `raw` is the wait queue of an open `/dev/rrdma` file, valid until the
/// file's release returns, which happens after the last [`Self::wake`]: the
/// release ends every connection of the file, and with them every operation
/// that completes to it.
pub(crate) struct FileWaitq {
    raw: NonNull<c_void>,
}

// SAFETY: `wake_up()` may be called from any thread, and the queue is only
// woken.
unsafe impl Send for FileWaitq {}
// SAFETY: as above; `&FileWaitq` only wakes.
unsafe impl Sync for FileWaitq {}

impl FileWaitq {
    /// # Safety
    ///
    /// `raw` is the wait queue of the file being opened, and the value is
    /// used only for that file's completions (see the type invariant).
    pub(crate) unsafe fn new(raw: NonNull<c_void>) -> Self {
        // INVARIANT: by the function's safety requirements.
        Self { raw }
    }

    /// Wakes the file's readers and pollers.
    pub(crate) fn wake(&self) {
        // SAFETY: the wait queue is valid (type invariant).
        unsafe { rrdma_shim_file_wake(self.raw.as_ptr()) };
    }
}

extern "C" {
    /// Registers the `ib_client`, then `/dev/rrdma`; `context` is handed to
    /// every callback until [`rrdma_shim_unregister`] returns.
    pub(crate) fn rrdma_shim_register(context: *mut c_void) -> c_int;
    /// Unregisters `/dev/rrdma`, then the `ib_client` (removing every device).
    pub(crate) fn rrdma_shim_unregister();
    /// Wakes read(2)/poll(2) sleepers of a file.
    pub(crate) fn rrdma_shim_file_wake(waitq: *mut c_void);
    /// The module's work queue (connection teardowns).
    pub(crate) fn rrdma_shim_wq() -> *mut kernel::bindings::workqueue_struct;
}
