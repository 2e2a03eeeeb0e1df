// SPDX-License-Identifier: GPL-2.0

//! A connection's waits on its condition variable: until a condition
//! holds, interruptibly, within a deadline that consecutive waits share.

use kernel::sync::{CondVar, CondVarTimeoutResult};

use crate::abi::errno::{Errno, ERESTARTSYS, ETIMEDOUT};

/// Waits on `cv` (with `g` locked) until `done` holds: `ERESTARTSYS` on a
/// signal or pending task work (io_uring's completions raise
/// `TIF_NOTIFY_SIGNAL`: the ioctl then restarts after running it, where
/// `EINTR` would fail a call nothing interrupted), `ETIMEDOUT` after
/// `*left` jiffies (`None`: no timeout), which is updated so that
/// consecutive waits share one deadline.
pub(super) fn wait_until<T: Unpin, B: kernel::sync::lock::Backend>(
    cv: &CondVar,
    g: &mut kernel::sync::lock::Guard<'_, T, B>,
    left: &mut Option<kernel::time::Jiffies>,
    mut done: impl FnMut(&mut T) -> bool,
) -> Result<(), Errno> {
    while !done(g) {
        match left {
            None => {
                if cv.wait_interruptible(g) {
                    return Err(ERESTARTSYS);
                }
            }
            Some(j) => match cv.wait_interruptible_timeout(g, *j) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                CondVarTimeoutResult::Woken { jiffies } => *j = jiffies,
            },
        }
    }
    Ok(())
}

/// A deadline `timeout_ms` from now for [`wait_until`] (`u32::MAX`: none).
pub(super) fn deadline(timeout_ms: u32) -> Option<kernel::time::Jiffies> {
    (timeout_ms != u32::MAX).then(|| kernel::time::msecs_to_jiffies(timeout_ms))
}
