// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The C side's interface (`csrc/verbs_peer.h`): its structs as laid out
//! there, its functions, and the constants both sides agree on.

use core::ffi::c_void;

use crate::hostile::WAIT;

/// Bytes of one buffer slot of the C side (`VP_SLOT`).
pub(super) const SLOT: usize = 1024;
/// `RDMA_CM_EVENT_REJECTED`.
pub(super) const EV_REJECTED: u32 = 8;
/// `IBV_WC_SUCCESS`.
pub(super) const WC_SUCCESS: u32 = 0;

/// `struct vp_result`.
#[repr(C)]
pub(super) struct VpResult {
    pub(super) err: i32,
    pub(super) event: u32,
    pub(super) status: i32,
    pub(super) private_data_len: u8,
    pub(super) private_data: [u8; 255],
}

/// `struct vp_wc`.
#[repr(C)]
pub(super) struct VpWc {
    pub(super) wr_id: u64,
    pub(super) status: u32,
    pub(super) opcode: u32,
    pub(super) byte_len: u32,
    pub(super) recv: u32,
    pub(super) data: [u8; SLOT],
}

extern "C" {
    pub(super) fn vp_connect(
        ip: u32,
        port: u16,
        private_data: *const u8,
        private_data_len: u8,
        timeout_ms: i32,
        r: *mut VpResult,
    ) -> *mut c_void;
    pub(super) fn vp_listen(port: u16, r: *mut VpResult) -> *mut c_void;
    pub(super) fn vp_accept(
        l: *mut c_void,
        private_data: *const u8,
        private_data_len: u8,
        timeout_ms: i32,
        r: *mut VpResult,
    ) -> *mut c_void;
    pub(super) fn vp_destroy(v: *mut c_void);
    pub(super) fn vp_send(v: *mut c_void, data: *const u8, len: u32) -> i32;
    pub(super) fn vp_write(v: *mut c_void, data: *const u8, len: u32, raddr: u64, rkey: u32)
        -> i32;
    pub(super) fn vp_read(v: *mut c_void, len: u32, raddr: u64, rkey: u32) -> i32;
    pub(super) fn vp_slot_copy(v: *mut c_void, slot: u32, out: *mut u8, len: u32);
    pub(super) fn vp_poll(v: *mut c_void, timeout_ms: i32, wc: *mut VpWc) -> i32;
    pub(super) fn vp_disconnected(v: *mut c_void, timeout_ms: i32) -> i32;
}

pub(super) fn wait_ms() -> i32 {
    WAIT.as_millis() as i32
}

pub(super) fn new_wc() -> VpWc {
    VpWc {
        wr_id: 0,
        status: 0,
        opcode: 0,
        byte_len: 0,
        recv: 0,
        data: [0; SLOT],
    }
}

pub(super) fn new_result() -> VpResult {
    VpResult {
        err: 0,
        event: 0,
        status: 0,
        private_data_len: 0,
        private_data: [0; 255],
    }
}
