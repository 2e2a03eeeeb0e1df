// SPDX-License-Identifier: GPL-2.0

//! Calling contexts as types.
//!
//! Most of rrdma runs in process context, where it may sleep and take
//! mutexes. One path does not: a poll of a send CQ in atomic context
//! (softirq, or a task holding the shim's `poll_lock`) hands the
//! operations that ended well to Rust (`rrdma_rust_ops_done_atomic`),
//! which ends them under their path's spinlock. Everything else (a failed
//! or flushed completion, the teardown's flush) comes in process context.
//!
//! A [`Task`] is the proof of process context that the completion path's
//! mutex-taking functions (`Conn::wc_failed`, `Conn::flushed`, the flush
//! status of a failed batch) require. It is made only where the context is
//! checked: [`Task::checked`] runs `might_sleep()` and the lock rule's check
//! (`ffi::assert_unlocked`), which a debug kernel turns into a report the
//! first time a wrong path runs. A completion batch's handler gets a
//! [`Caller`]: the atomic entry passes [`Caller::Atomic`], which gives it
//! no `Task` to hand on, so it cannot reach those functions at all.

use core::marker::PhantomData;

use crate::ffi;

/// Proof that the code holding it runs in process context with no rrdma
/// lock held: it may sleep and take mutexes. Neither `Send` nor `Clone`;
/// passed down by reference.
pub(crate) struct Task {
    _not_send: PhantomData<*mut ()>,
}

impl Task {
    /// The proof, for `what` (NUL-terminated, named in the debug kernel's
    /// report): checks the context (`might_sleep()`) and that no rrdma lock
    /// is held, on every call of a debug kernel.
    pub(crate) fn checked(what: &'static [u8]) -> Self {
        ffi::assert_unlocked(what);
        Self {
            _not_send: PhantomData,
        }
    }
}

/// The context a completion batch is handled in.
#[derive(Clone, Copy)]
pub(crate) enum Caller<'a> {
    /// Softirq, or a task under a spinlock: nothing may sleep or take a
    /// mutex. Only operations that ended well come this way.
    Atomic,
    /// Process context, no lock held.
    Task(&'a Task),
}
