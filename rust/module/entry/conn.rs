// SPDX-License-Identifier: GPL-2.0

//! The C-callable entry points of a connection's cm_id and queue pair.
//!
//! Each borrows the connection from the context pointer C holds (covered by
//! the cm_id's context reference, see `cm_id.rs`; the timer's run
//! owns its own, see `timer.rs`) and forwards to the code of its concern in
//! `conn/`. None is called with the shim queue pair's `lock` or
//! `sinks_lock` held. Their contexts (`shim/rrdma_shim.h` has them all):
//! - process context, may sleep: [`rrdma_rust_conn_event`] (rdma_cm's
//!   work queue, the id's handler mutex held), [`rrdma_rust_conn_timer`]
//!   (the module's work queue), the receive CQ's [`rrdma_rust_ctrl_recv`],
//!   [`rrdma_rust_qp_error`] and [`rrdma_rust_lane_recv`] (ib_comp_unbound_wq),
//!   and the send CQ's [`rrdma_rust_ctrl_sent`] and
//!   [`rrdma_rust_quiet_done`] (its work item on the module's completion
//!   work queue); those that can fail a connection check their context
//!   and make a [`Task`] for it;
//! - [`rrdma_rust_ops_done_atomic`]: in softirq (the send CQ's irq_poll)
//!   or in a task that polls for its own operations with softirqs off,
//!   both under the shim queue pair's `poll_lock`, with successful
//!   completions only; [`rrdma_rust_ops_done`]: the same on the send CQ's
//!   work item (process context, the only one to hand over a failed
//!   completion). What they reach (`Conn::slots_done`, `Conn::end_slot`,
//!   `Conn::heard`, `Conn::post_open_group`, `OpCtx::finish` with
//!   `SyncWait::set` and `UringCmd::complete`, `Shared::complete`,
//!   `Shared::wake_readers`, `Conn::ask_followups`) takes softirq-safe
//!   spinlocks only (a path's lock, `Shared::ring`, `SyncWait::status`);
//!   what takes the connection's mutex (`Conn::wc_failed`,
//!   `Conn::flushed`) requires a [`Task`], which the atomic entry has none
//!   of (`calling.rs`);
//! - [`rrdma_rust_conn_unplug`]: the submitting task (process context);
//!   with `from_schedule`, on its way to sleep, it must not sleep.

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};
use kernel::sync::Arc;

use super::bytes;
use crate::calling::{Caller, Task};
use crate::cm_id::InHandler;
use crate::conn::Conn;
use crate::ffi::{RdmaCmId, ShimDone, ShimQp};
use crate::foreign;
use crate::verbs::QpRef;
use crate::work::Callback;

/// Borrows a connection from a callback's context pointer and counts the
/// callback (`kind`).
///
/// # Safety
///
/// `conn` is a connection's context pointer whose cm_id context reference
/// is held for the duration of the callback.
unsafe fn conn(conn: *mut c_void, kind: Callback) -> Arc<Conn> {
    // SAFETY: by the function's safety requirements; a new reference is
    // taken for the callback's duration.
    let this: Arc<Conn> = unsafe { foreign::borrow::<Conn>(conn) }.into();
    this.count(kind);
    this
}

/// rdma_cm event of a connection id, `id`. Returns non-zero when the CM
/// must destroy the id.
///
/// # Safety
///
/// Called by the id's event handler; `ctx` is the id's context (see
/// [`conn`]); `pdata` is valid for `len` bytes (or null).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_conn_event(
    ctx: *mut c_void,
    id: *mut RdmaCmId,
    event: c_int,
    status: c_int,
    pdata: *const c_void,
    len: u8,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::CmEvent) };
    // SAFETY: by the function's safety requirements.
    let pdata = unsafe { bytes(pdata, usize::from(len)) };
    let Some(id) = NonNull::new(id) else {
        return 0;
    };
    // SAFETY: we run in `id`'s handler until we return, and `h` does not
    // outlive this call. `cm_event` returns non-zero only after handing the
    // connection's `CmId` back with `into_cm` (the connection keeps it
    // otherwise).
    let h = unsafe { InHandler::new(id) };
    // The id's reference may be handed back here: `this` may be the last.
    Conn::scoped(this, |this| this.cm_event(&h, event, status, pdata))
}

/// A run of a connection's timer (the module's work queue).
///
/// # Safety
///
/// `ctx` is the reference [`crate::timer::Timer::arm`] handed to C for this
/// run, which the run owns.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_conn_timer(ctx: *mut c_void) {
    // SAFETY: by the function's safety requirements: taken back once, here.
    let this: Arc<Conn> = unsafe { foreign::from_c(ctx) };
    // The connection's last reference may go here: still in the scope.
    Conn::scoped(this, |this| this.timer_tick());
}

/// The plug of an io_uring submission that posted writes on a connection
/// closed, or its task is on its way to sleep with it open
/// (`from_schedule`: nothing may sleep then).
///
/// # Safety
///
/// `ctx` is the reference `Conn::plugged` handed to the plug's callback,
/// given back once, here.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_conn_unplug(ctx: *mut c_void, from_schedule: bool) {
    // SAFETY: by the function's safety requirements: taken back once, here.
    let this: Arc<Conn> = unsafe { foreign::from_c(ctx) };
    Conn::unplugged(this, from_schedule);
}

/// A receive failed (or was flushed) on queue pair `lane` of a connection
/// (0: its own, whose control receive may also not have been posted
/// again).
///
/// # Safety
///
/// `ctx` is the queue pair's owner (see [`conn`]).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_qp_error(ctx: *mut c_void, lane: u32, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::Completion) };
    let task = Task::checked(b"a receive CQ's completion\0");
    Conn::scoped(this, |this| {
        this.recv_failed(&task, lane as usize, wc_status)
    });
}

/// A Send arrived on data lane `lane` (its receive is a tripwire: no
/// Send belongs on a lane).
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`].
#[no_mangle]
unsafe extern "C" fn rrdma_rust_lane_recv(ctx: *mut c_void, lane: u32) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::CtrlRecv) };
    Conn::scoped(this, |this| this.lane_recv(lane as usize));
}

/// A grant's registration work request completed.
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`].
#[no_mangle]
unsafe extern "C" fn rrdma_rust_quiet_done(ctx: *mut c_void, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::Completion) };
    let task = Task::checked(b"a send CQ's work item\0");
    this.grant_reg_done(&task, wc_status);
}

/// A control message arrived (its buffer is posted again already).
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`]; `msg` is valid for `len` bytes.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_ctrl_recv(ctx: *mut c_void, msg: *const c_void, len: u32) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::CtrlRecv) };
    // SAFETY: by the function's safety requirements.
    let msg = unsafe { bytes(msg, len as usize) };
    Conn::scoped(this, |this| this.ctrl_recv(msg));
}

/// A control message was sent (or flushed).
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`].
#[no_mangle]
unsafe extern "C" fn rrdma_rust_ctrl_sent(ctx: *mut c_void, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::Completion) };
    let task = Task::checked(b"a send CQ's work item\0");
    this.ctrl_sent(&task, wc_status);
}

/// The operations of queue pair `lane` (`qp`) whose slots `done` names
/// completed: the operation completions of one poll of its send CQ on the
/// CQ's work item (process context, no lock held; failures included).
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`]; `qp` is that queue pair, live for the
/// call; `done` is valid for `n` entries.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_ops_done(
    ctx: *mut c_void,
    lane: u32,
    qp: *mut ShimQp,
    done: *const ShimDone,
    n: u32,
) {
    let task = Task::checked(b"a send CQ's work item\0");
    // SAFETY: by the function's safety requirements.
    unsafe { ops_done(ctx, lane, qp, done, n, Caller::Task(&task)) }
}

/// As [`rrdma_rust_ops_done`], in atomic context: a poll of the send CQ
/// in softirq or by a task that polls it, under the shim's `poll_lock`;
/// successful completions only. Nothing here may sleep or take a mutex:
/// with [`Caller::Atomic`] the completion path cannot reach what does.
///
/// # Safety
///
/// As [`rrdma_rust_ops_done`].
#[no_mangle]
unsafe extern "C" fn rrdma_rust_ops_done_atomic(
    ctx: *mut c_void,
    lane: u32,
    qp: *mut ShimQp,
    done: *const ShimDone,
    n: u32,
) {
    // SAFETY: by the function's safety requirements.
    unsafe { ops_done(ctx, lane, qp, done, n, Caller::Atomic) }
}

/// The two entries' common part, in context `caller`.
///
/// # Safety
///
/// As [`rrdma_rust_ops_done`].
unsafe fn ops_done(
    ctx: *mut c_void,
    lane: u32,
    qp: *mut ShimQp,
    done: *const ShimDone,
    n: u32,
    caller: Caller<'_>,
) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { conn(ctx, Callback::Completion) };
    let done = if done.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: by the function's safety requirements, `done` points to
        // `n` initialized entries that C does not touch until this returns.
        unsafe { core::slice::from_raw_parts(done, n as usize) }
    };
    // SAFETY: by the function's safety requirements.
    let qp = unsafe { QpRef::from_raw(qp) };
    this.slots_done(
        lane as usize,
        qp,
        done.iter().map(|d| (d.slot, d.status)),
        caller,
    );
}
