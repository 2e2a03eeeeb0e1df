// SPDX-License-Identifier: GPL-2.0

//! io_uring commands (`shim/uring.c`): a queued command, completed
//! exactly once, and a submission's block plug.

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};

use super::ShimQp;

/// `struct io_uring_cmd` (opaque).
#[repr(C)]
pub(crate) struct IoUringCmd {
    _p: [u8; 0],
}

/// An io_uring command queued with rrdma (its `->uring_cmd` returned
/// `-EIOCBQUEUED`): completed exactly once, by [`UringCmd::complete`].
/// Not `Clone`: the one value is the right to post the CQE.
pub(crate) struct UringCmd(NonNull<IoUringCmd>);

// SAFETY: io_uring keeps the command valid until its CQE is posted, from
// any thread; the shim's completion only queues task work.
unsafe impl Send for UringCmd {}
// SAFETY: a shared reference gives no access to the command.
unsafe impl Sync for UringCmd {}

impl UringCmd {
    /// # Safety
    ///
    /// `cmd` is a command being issued to rrdma, which will return
    /// `-EIOCBQUEUED` for it if this value is kept (dropped otherwise, it
    /// is never completed here).
    pub(crate) unsafe fn new(cmd: NonNull<IoUringCmd>) -> Self {
        Self(cmd)
    }

    /// Ends it with `res` (bytes moved, or -errno): its CQE is posted by
    /// task work, or on an IOPOLL ring by its poll; whether its IOPOLL
    /// poller did it in place (`rrdma-work-uring-polled`).
    pub(crate) fn complete(self, res: i32) -> bool {
        // SAFETY: by the type's invariant, queued and not completed yet
        // (this consumes the only value).
        unsafe { rrdma_shim_uring_complete(self.0.as_ptr(), res) }
    }

    /// Tells the command the queue pair its operation is about to be
    /// posted on, `q`. Once per issue; the shim forgets it if the issue
    /// fails.
    pub(crate) fn poll_on(&self, q: &crate::verbs::Qp) {
        // SAFETY: the command is being issued (type invariant: not yet
        // completed); `q` is live for the borrow, and the shim takes its
        // own reference of it.
        unsafe { rrdma_shim_uring_poll_on(self.0.as_ptr(), q.raw()) };
    }
}

/// Whether the kernel has io_uring (`RRDMA_FEATURE_URING`).
pub(crate) fn uring_supported() -> bool {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_uring_supported() }
}

extern "C" {
    /// Whether the kernel has io_uring.
    pub(crate) fn rrdma_shim_uring_supported() -> bool;
    /// Posts the CQE of queued command `cmd` with `res` (from task work,
    /// or in place by its IOPOLL poller: then true).
    pub(crate) fn rrdma_shim_uring_complete(cmd: *mut IoUringCmd, res: i32) -> bool;
    /// Tells command `cmd`, being issued, the queue pair its operation is
    /// about to be posted on (an IOPOLL ring's command polls its send CQ;
    /// nothing otherwise).
    pub(crate) fn rrdma_shim_uring_poll_on(cmd: *mut IoUringCmd, q: *mut ShimQp);
    /// Registers `owner`'s unplug callback on the current task's block
    /// plug: 0 without a plug, 1 registered already, 2 registered now
    /// (the callback then holds a reference of `owner`).
    pub(crate) fn rrdma_shim_plug(owner: *mut c_void) -> c_int;
}
