// SPDX-License-Identifier: GPL-2.0

//! rrdma's tracepoints (`shim/trace.h`, TRACE_SYSTEM `rrdma`): the calls
//! that fire them. Each costs a call and a static-key test while its event
//! is off. A connection is named by its serial number; no key is
//! recorded, the peer's address only by `conn_new` and
//! `reconnect_attempt`.

use core::ffi::{c_char, CStr};

use super::ShimAddr;
use crate::abi::conn::{Action, Event, State};

/// A connection was made: `active` by CONNECT (or a disk's own, `disk`),
/// else accepted from a listener.
pub(crate) fn conn_new(conn: u64, peer: &ShimAddr, active: bool, disk: bool) {
    // SAFETY: `peer` is valid for the call.
    unsafe { rrdma_shim_trace_conn_new(conn, peer, active, disk) }
}

/// A step of a connection's state machine (`Conn::advance`).
pub(crate) fn conn_state(conn: u64, ev: Event, from: &State, to: &State, action: Action) {
    // SAFETY: the names are static C strings; the event copies them.
    unsafe {
        rrdma_shim_trace_conn_state(
            conn,
            ev.name().as_ptr(),
            ev.status(),
            from.name().as_ptr(),
            to.name().as_ptr(),
            action.name().as_ptr(),
            to.error(),
        )
    }
}

/// A reconnect attempt starts (1 for the first after a failure).
pub(crate) fn reconnect_attempt(conn: u64, attempt: u32, peer: &ShimAddr) {
    // SAFETY: `peer` is valid for the call.
    unsafe { rrdma_shim_trace_reconnect_attempt(conn, attempt, peer) }
}

/// UNEXPORT revoked `token` on `conns` connections (those that imported
/// it and were told).
pub(crate) fn unexport(token: u64, conns: u32) {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_trace_unexport(token, conns) }
}

/// The exporter revoked the import of `token` on connection `conn`.
pub(crate) fn import_revoked(conn: u64, token: u64) {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_trace_import_revoked(conn, token) }
}

/// An answer to an import request of `token` on connection `conn` came
/// with `nkeys` keys from chunk `first` on (one round of an import).
pub(crate) fn import_answer(conn: u64, token: u64, first: u32, nkeys: u16) {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_trace_import_answer(conn, token, first, u32::from(nkeys)) }
}

/// An operation (`opcode`, the UAPI's) on connection `conn` failed with
/// `errno` (positive), its work completion's status `wc_status`.
pub(crate) fn op_failed(conn: u64, opcode: u32, errno: i32, wc_status: u32) {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_trace_op_failed(conn, opcode, -errno, wc_status as i32) }
}

/// Device `name` is going away.
pub(crate) fn device_remove(name: &CStr) {
    // SAFETY: `name` is a C string valid for the call; the event copies it.
    unsafe { rrdma_shim_trace_device_remove(name.as_ptr()) }
}

extern "C" {
    fn rrdma_shim_trace_conn_new(conn: u64, peer: *const ShimAddr, active: bool, disk: bool);
    fn rrdma_shim_trace_conn_state(
        conn: u64,
        event: *const c_char,
        status: i32,
        from: *const c_char,
        to: *const c_char,
        action: *const c_char,
        error: i32,
    );
    fn rrdma_shim_trace_reconnect_attempt(conn: u64, attempt: u32, peer: *const ShimAddr);
    fn rrdma_shim_trace_unexport(token: u64, conns: u32);
    fn rrdma_shim_trace_import_revoked(conn: u64, token: u64);
    fn rrdma_shim_trace_import_answer(conn: u64, token: u64, first: u32, nkeys: u32);
    fn rrdma_shim_trace_op_failed(conn: u64, opcode: u32, error: i32, wc_status: i32);
    fn rrdma_shim_trace_device_remove(name: *const c_char);
}
