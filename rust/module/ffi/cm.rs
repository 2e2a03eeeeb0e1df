// SPDX-License-Identifier: GPL-2.0

//! rdma_cm identifiers (`shim/cm.c`): addresses, the events rrdma
//! handles, and the calls on an id.

use kernel::ffi::{c_int, c_void};

use super::IbDevice;

/// Opaque `struct rdma_cm_id`.
#[repr(C)]
pub(crate) struct RdmaCmId {
    _opaque: [u8; 0],
}

/// `struct rrdma_shim_addr` (same layout as `struct rrdma_addr`; checked
/// in `layout.rs`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ShimAddr {
    pub(crate) family: u16,
    pub(crate) port: u16,
    pub(crate) scope_id: u32,
    pub(crate) addr: [u8; 16],
}

impl ShimAddr {
    /// Whether `other` is the same host (family and address; any port).
    pub(crate) fn same_host(&self, other: &ShimAddr) -> bool {
        self.family == other.family && self.addr == other.addr
    }
}

/// `rdma_cm_event_type` values rrdma handles (the kernel's, `layout.rs`).
pub(crate) mod cm_event {
    use super::super::layout::{c, i32_of};

    pub(crate) const ADDR_RESOLVED: i32 = i32_of(c::RDMA_CM_EVENT_ADDR_RESOLVED);
    pub(crate) const ADDR_ERROR: i32 = i32_of(c::RDMA_CM_EVENT_ADDR_ERROR);
    pub(crate) const ROUTE_RESOLVED: i32 = i32_of(c::RDMA_CM_EVENT_ROUTE_RESOLVED);
    pub(crate) const ROUTE_ERROR: i32 = i32_of(c::RDMA_CM_EVENT_ROUTE_ERROR);
    pub(crate) const CONNECT_ERROR: i32 = i32_of(c::RDMA_CM_EVENT_CONNECT_ERROR);
    pub(crate) const UNREACHABLE: i32 = i32_of(c::RDMA_CM_EVENT_UNREACHABLE);
    pub(crate) const REJECTED: i32 = i32_of(c::RDMA_CM_EVENT_REJECTED);
    pub(crate) const ESTABLISHED: i32 = i32_of(c::RDMA_CM_EVENT_ESTABLISHED);
    pub(crate) const DISCONNECTED: i32 = i32_of(c::RDMA_CM_EVENT_DISCONNECTED);
    pub(crate) const DEVICE_REMOVAL: i32 = i32_of(c::RDMA_CM_EVENT_DEVICE_REMOVAL);
}

extern "C" {
    /// Creates a cm_id whose events go to `owner` (a connection's, or a
    /// listener's if `listener`).
    pub(crate) fn rrdma_shim_cm_create(
        owner: *mut c_void,
        listener: bool,
        out: *mut *mut RdmaCmId,
    ) -> c_int;
    /// `rdma_resolve_addr()` towards `dst`.
    pub(crate) fn rrdma_shim_cm_resolve_addr(
        id: *mut RdmaCmId,
        dst: *const ShimAddr,
        timeout_ms: u32,
    ) -> c_int;
    /// `rdma_bind_addr()` to `src`, then `rdma_listen()`.
    pub(crate) fn rrdma_shim_cm_bind_listen(
        id: *mut RdmaCmId,
        src: *const ShimAddr,
        backlog: u32,
    ) -> c_int;
    /// `rdma_resolve_route()`.
    pub(crate) fn rrdma_shim_cm_resolve_route(id: *mut RdmaCmId, timeout_ms: u32) -> c_int;
    /// `rdma_connect_locked()` with `pdata` as private data.
    pub(crate) fn rrdma_shim_cm_connect(id: *mut RdmaCmId, pdata: *const c_void, len: u8) -> c_int;
    /// `rdma_accept()` with `pdata` as private data.
    pub(crate) fn rrdma_shim_cm_accept(
        id: *mut RdmaCmId,
        pdata: *const c_void,
        len: u8,
        peer_initiator: u8,
        peer_responder: u8,
    ) -> c_int;
    /// `rdma_reject()` with a consumer-defined reason and `pdata`.
    pub(crate) fn rrdma_shim_cm_reject(id: *mut RdmaCmId, pdata: *const c_void, len: u8) -> c_int;
    /// `rdma_disconnect()`.
    pub(crate) fn rrdma_shim_cm_disconnect(id: *mut RdmaCmId) -> c_int;
    /// `rdma_destroy_id()`: waits for a running handler of `id`.
    pub(crate) fn rrdma_shim_cm_destroy_id(id: *mut RdmaCmId);
    /// The device `id` is bound to (NULL before address resolution).
    pub(crate) fn rrdma_shim_cm_device(id: *mut RdmaCmId) -> *mut IbDevice;
    /// The peer's address.
    pub(crate) fn rrdma_shim_cm_peer(id: *mut RdmaCmId, out: *mut ShimAddr);
}
