// SPDX-License-Identifier: GPL-2.0

//! The C shim's interface (`shim/rrdma_shim.h`), seen from Rust.
//!
//! Kernel objects cross as opaque pointers; errors as negative errno. The
//! `rrdma_rust_*` entry points the shim calls are in `entry/` (one file per
//! C caller) and listed in the header.

use core::ptr::NonNull;

use kernel::ffi::{c_char, c_int, c_ulong, c_void};

/// Opaque `struct ib_device`.
#[repr(C)]
pub(crate) struct IbDevice {
    _opaque: [u8; 0],
}

/// Opaque `struct ib_pd`.
#[repr(C)]
pub(crate) struct IbPd {
    _opaque: [u8; 0],
}

/// Opaque `struct vm_area_struct`.
#[repr(C)]
pub(crate) struct VmArea {
    _opaque: [u8; 0],
}

/// Opaque `struct seq_file`.
#[repr(C)]
pub(crate) struct SeqFile {
    _opaque: [u8; 0],
}

/// Opaque `struct user_struct`.
#[repr(C)]
pub(crate) struct UserStruct {
    _opaque: [u8; 0],
}

/// Opaque `struct rdma_cm_id`.
#[repr(C)]
pub(crate) struct RdmaCmId {
    _opaque: [u8; 0],
}

/// Opaque `struct rrdma_shim_qp`: a QP with its CQs and control buffers.
#[repr(C)]
pub(crate) struct ShimQp {
    _opaque: [u8; 0],
}

/// Opaque `struct rrdma_shim_mr`: one fast-registration MR.
#[repr(C)]
pub(crate) struct ShimMr {
    _opaque: [u8; 0],
}

/// Opaque `struct rrdma_shim_timer`: a delayed work item (`timer.rs`).
#[repr(C)]
pub(crate) struct ShimTimer {
    _opaque: [u8; 0],
}

/// `struct rrdma_shim_addr` (same layout as `struct rrdma_addr`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ShimAddr {
    pub(crate) family: u16,
    pub(crate) port: u16,
    pub(crate) scope_id: u32,
    pub(crate) addr: [u8; 16],
}

const _: () = assert!(core::mem::size_of::<ShimAddr>() == 24);

impl ShimAddr {
    /// Whether `other` is the same host (family and address; any port).
    pub(crate) fn same_host(&self, other: &ShimAddr) -> bool {
        self.family == other.family && self.addr == other.addr
    }
}

/// `RRDMA_SHIM_NO_SLOT`: a work request without an operation slot.
pub(crate) const NO_SLOT: u32 = u32::MAX;
/// `RRDMA_SHIM_WR_READ`.
pub(crate) const WR_READ: u32 = 1;
/// `RRDMA_SHIM_WR_WRITE`.
pub(crate) const WR_WRITE: u32 = 2;
/// `RRDMA_SHIM_WR_REG`.
pub(crate) const WR_REG: u32 = 3;
/// `RRDMA_SHIM_WR_SINK_REG`: registers a READ sink (iWARP).
pub(crate) const WR_SINK_REG: u32 = 5;
/// `RRDMA_SHIM_WR_SINK_READ`: an RDMA READ that invalidates its sink.
pub(crate) const WR_SINK_READ: u32 = 6;
/// `RRDMA_SHIM_ACCESS_LOCAL_WRITE`.
pub(crate) const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// `RRDMA_SHIM_ACCESS_REMOTE_READ`.
pub(crate) const ACCESS_REMOTE_READ: u32 = 1 << 1;
/// `RRDMA_SHIM_ACCESS_REMOTE_WRITE`.
pub(crate) const ACCESS_REMOTE_WRITE: u32 = 1 << 2;

/// `struct rrdma_shim_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ShimWr {
    pub(crate) opcode: u32,
    pub(crate) signaled: u32,
    pub(crate) slot: u32,
    pub(crate) sink: u32,
    pub(crate) local_addr: u64,
    pub(crate) lkey: u32,
    pub(crate) len: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) access: u32,
    pub(crate) mr: *mut ShimMr,
}

/// `struct rrdma_shim_done`: one operation completion of a batch (the
/// slot its work request carried, the work completion's status).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ShimDone {
    pub(crate) slot: u32,
    pub(crate) status: u32,
}

const _: () = assert!(core::mem::size_of::<ShimDone>() == 8);

/// `RRDMA_SHIM_POLL_BATCH`: most completions in one batch.
pub(crate) const POLL_BATCH: usize = 16;

/// Room for the work requests of one operation, built and posted under
/// the lock of the connection that owns it (allocated once: posting
/// allocates nothing). [`WrScratch::start`] hands it out empty.
pub(crate) struct WrScratch(kernel::prelude::KVec<ShimWr>);

// SAFETY: `ShimWr` is plain data; the registration pointers in it are
// dereferenced only by `rrdma_shim_qp_post`, called under the lock that
// owns the scratch while the registrations they name are held.
unsafe impl Send for WrScratch {}
// SAFETY: as for `Send`; a shared reference gives no access to them.
unsafe impl Sync for WrScratch {}

impl WrScratch {
    /// Room for `n` work requests.
    pub(crate) fn new(n: usize) -> kernel::error::Result<Self> {
        Ok(Self(kernel::prelude::KVec::with_capacity(
            n,
            kernel::prelude::GFP_KERNEL,
        )?))
    }

    /// The scratch, emptied, for one operation's work requests.
    pub(crate) fn start(&mut self) -> &mut kernel::prelude::KVec<ShimWr> {
        crate::compat::vec_clear(&mut self.0);
        &mut self.0
    }
}

impl ShimWr {
    /// An unsignaled RDMA READ or WRITE (`opcode`) of `len` bytes between
    /// `local_addr` (under `lkey`) and `remote_addr` (under `rkey`).
    pub(crate) fn rdma(
        opcode: u32,
        local_addr: u64,
        lkey: u32,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Self {
        Self {
            opcode,
            signaled: 0,
            slot: NO_SLOT,
            sink: 0,
            local_addr,
            lkey,
            len,
            remote_addr,
            rkey,
            access: 0,
            mr: core::ptr::null_mut(),
        }
    }

    /// A registration of READ sink `sink` (iWARP) over the `len` bytes at
    /// region offset `local_addr` of `chunk`'s pages, or, with a null
    /// `chunk`, over the queue pair's scratch buffer (a write fence).
    pub(crate) fn sink_reg(chunk: *mut ShimMr, sink: u32, local_addr: u64, len: u32) -> Self {
        Self {
            sink,
            mr: chunk,
            ..Self::rdma(WR_SINK_REG, local_addr, 0, len, 0, 0)
        }
    }

    /// An unsignaled RDMA READ of `len` bytes at `remote_addr` into READ
    /// sink `sink`, as its [`Self::sink_reg`] just registered it; the
    /// sink's key is invalid once it completes.
    pub(crate) fn sink_read(sink: u32, len: u32, remote_addr: u64, rkey: u32) -> Self {
        Self {
            sink,
            ..Self::rdma(WR_SINK_READ, 0, 0, len, remote_addr, rkey)
        }
    }

    /// A registration of `mr` with `access`.
    pub(crate) fn reg(mr: *mut ShimMr, access: u32, signaled: bool) -> Self {
        Self {
            opcode: WR_REG,
            signaled: u32::from(signaled),
            slot: NO_SLOT,
            sink: 0,
            local_addr: 0,
            lkey: 0,
            len: 0,
            remote_addr: 0,
            rkey: 0,
            access,
            mr,
        }
    }
}

/// `rdma_cm_event_type` values rrdma handles.
pub(crate) mod cm_event {
    pub(crate) const ADDR_RESOLVED: i32 = 0;
    pub(crate) const ADDR_ERROR: i32 = 1;
    pub(crate) const ROUTE_RESOLVED: i32 = 2;
    pub(crate) const ROUTE_ERROR: i32 = 3;
    pub(crate) const CONNECT_ERROR: i32 = 6;
    pub(crate) const UNREACHABLE: i32 = 7;
    pub(crate) const REJECTED: i32 = 8;
    pub(crate) const ESTABLISHED: i32 = 9;
    pub(crate) const DISCONNECTED: i32 = 10;
    pub(crate) const DEVICE_REMOVAL: i32 = 11;
}

/// `struct rrdma_shim_vma_info`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct VmaInfo {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) shared: u32,
    pub(crate) exec: u32,
    pub(crate) page_shift: u32,
    pub(crate) pad: u32,
}

/// Name length in [`DeviceAttr`] (`RRDMA_SHIM_NAME_MAX`).
pub(crate) const NAME_MAX: usize = 64;

/// `RRDMA_SHIM_CAP_MEM_MGT_EXT`: the device supports fast registration.
pub(crate) const CAP_MEM_MGT_EXT: u32 = 1 << 0;

/// `struct rrdma_shim_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DeviceAttr {
    pub(crate) name: [u8; NAME_MAX],
    pub(crate) index: u32,
    pub(crate) node_type: u32,
    pub(crate) port_count: u32,
    pub(crate) port_state: u32,
    pub(crate) link_layer: u32,
    pub(crate) caps: u32,
    pub(crate) node_guid: u64,
}

// The shim asserts the same size on the C side.
const _: () = assert!(core::mem::size_of::<DeviceAttr>() == 96);

/// `struct rrdma_shim_device_limits` (the pure type is `repr(C)` with the
/// same fields in the same order).
pub(crate) use crate::abi::limits::DeviceLimits;
const _: () = assert!(core::mem::size_of::<DeviceLimits>() == 28);

impl DeviceAttr {
    /// The all-zero value, filled in by [`rrdma_shim_device_query`].
    pub(crate) const fn zeroed() -> Self {
        Self {
            name: [0; NAME_MAX],
            index: 0,
            node_type: 0,
            port_count: 0,
            port_state: 0,
            link_layer: 0,
            caps: 0,
            node_guid: 0,
        }
    }

    /// The device name up to its NUL, for messages.
    pub(crate) fn name_str(&self) -> &str {
        let n = self.name.iter().position(|&c| c == 0).unwrap_or(NAME_MAX);
        core::str::from_utf8(&self.name[..n]).unwrap_or("?")
    }
}

extern "C" {
    /// Fills `attr` from `dev`; queries the first port's state live.
    pub(crate) fn rrdma_shim_device_query(dev: *mut IbDevice, attr: *mut DeviceAttr);
    /// Fills `dev_limits` with `dev`'s limits and `clamp` with the
    /// module's clamps of them (0: none).
    pub(crate) fn rrdma_shim_device_limits(
        dev: *mut IbDevice,
        dev_limits: *mut DeviceLimits,
        clamp: *mut DeviceLimits,
    );
    /// `ib_alloc_pd(dev, 0)`.
    pub(crate) fn rrdma_shim_alloc_pd(dev: *mut IbDevice, pd: *mut *mut IbPd) -> c_int;
    /// `ib_dealloc_pd(pd)`.
    pub(crate) fn rrdma_shim_dealloc_pd(pd: *mut IbPd);
    /// Registers the `ib_client`, then `/dev/rrdma`; `context` is handed to
    /// every callback until [`rrdma_shim_unregister`] returns.
    pub(crate) fn rrdma_shim_register(context: *mut c_void) -> c_int;
    /// Unregisters `/dev/rrdma`, then the `ib_client` (removing every device).
    pub(crate) fn rrdma_shim_unregister();
    /// Whether a user-triggered warning may be printed now (ratelimited).
    pub(crate) fn rrdma_shim_warn_ratelimit() -> bool;
    /// The kernel's `jiffies`.
    pub(crate) fn rrdma_shim_jiffies() -> c_ulong;
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
    /// The module parameters `keepalive_ms` and `keepalive_misses`.
    pub(crate) fn rrdma_shim_keepalive_params(ms: *mut u32, misses: *mut u32);
    /// The module parameters `reconnect_attempts`, `reconnect_delay_ms`,
    /// `reconnect_max_delay_ms` and `accept_max_teardowns`.
    pub(crate) fn rrdma_shim_reconnect_params(
        attempts: *mut u32,
        delay_ms: *mut u32,
        max_delay_ms: *mut u32,
        max_teardowns: *mut u32,
    );
    /// `jiffies_to_msecs(j)`.
    pub(crate) fn rrdma_shim_jiffies_to_msecs(j: c_ulong) -> u32;
    /// A timer that calls `rrdma_rust_conn_timer()`; NULL without memory.
    pub(crate) fn rrdma_shim_timer_new() -> *mut ShimTimer;
    /// Queues a run with `ctx` after `delay` jiffies; false if one is
    /// pending already: nothing changes then, or with `reset`, the pending
    /// run moves to `delay` from now.
    pub(crate) fn rrdma_shim_timer_arm(
        t: *mut ShimTimer,
        ctx: *mut c_void,
        delay: c_ulong,
        reset: bool,
    ) -> bool;
    /// `cancel_delayed_work_sync()`: whether a run was pending (and will
    /// not happen).
    pub(crate) fn rrdma_shim_timer_cancel(t: *mut ShimTimer) -> bool;
    /// Frees a timer with no run pending.
    pub(crate) fn rrdma_shim_timer_free(t: *mut ShimTimer);
    /// Reads the VMA's range, offset and flags.
    pub(crate) fn rrdma_shim_vma_info(vma: *mut VmArea, info: *mut VmaInfo);
    /// Sets a region VMA's flags and operations; `region` is a region
    /// reference the VMA owns from now on (dropped by its close).
    pub(crate) fn rrdma_shim_vma_setup(vma: *mut VmArea, region: *mut c_void);
    /// Charges `npages` to the caller's RLIMIT_MEMLOCK; NULL and `*err` on failure.
    pub(crate) fn rrdma_shim_memlock_charge(npages: c_ulong, err: *mut c_int) -> *mut UserStruct;
    /// Undoes [`rrdma_shim_memlock_charge`].
    pub(crate) fn rrdma_shim_memlock_uncharge(user: *mut UserStruct, npages: c_ulong);
    /// `cond_resched()`, then whether a fatal signal is pending.
    pub(crate) fn rrdma_shim_should_stop() -> bool;
    /// `seq_printf(m, "%s:\t%llu\n", key, value)`.
    pub(crate) fn rrdma_shim_seq_u64(m: *mut SeqFile, key: *const c_char, value: u64);
    /// `PAGE_SIZE`.
    pub(crate) fn rrdma_shim_page_size() -> c_ulong;
    /// Zeroed, split `2^order` pages, or NULL.
    pub(crate) fn rrdma_shim_alloc_chunk(order: u32) -> *mut c_void;
    /// Puts every page of a chunk from [`rrdma_shim_alloc_chunk`].
    pub(crate) fn rrdma_shim_free_chunk(page: *mut c_void, order: u32);
    /// `nth_page(page, n)`.
    pub(crate) fn rrdma_shim_nth_page(page: *mut c_void, n: c_ulong) -> *mut c_void;
    /// The `max_region_mb` module parameter, in bytes.
    pub(crate) fn rrdma_shim_max_region_bytes() -> u64;
    /// `get_random_u64()`.
    pub(crate) fn rrdma_shim_random_u64() -> u64;
    /// The `queue_pairs` module parameter's count (0 made one per online
    /// CPU), unclamped.
    pub(crate) fn rrdma_shim_queue_pairs() -> u32;
    /// `raw_smp_processor_id()`.
    pub(crate) fn rrdma_shim_this_cpu() -> u32;
    /// `in_serving_softirq()`.
    pub(crate) fn rrdma_shim_in_softirq() -> bool;
    /// `spin_lock_bh()` (`compat::BhLock`).
    pub(crate) fn rrdma_shim_spin_lock_bh(lock: *mut kernel::bindings::spinlock_t);
    /// `spin_unlock_bh()`.
    pub(crate) fn rrdma_shim_spin_unlock_bh(lock: *mut kernel::bindings::spinlock_t);
    /// `spin_trylock_bh()`.
    #[cfg_attr(rrdma_compat = "k6_12", allow(dead_code))]
    pub(crate) fn rrdma_shim_spin_trylock_bh(lock: *mut kernel::bindings::spinlock_t) -> bool;
    /// `lockdep_assert_held()`.
    #[cfg_attr(rrdma_compat = "k6_12", allow(dead_code))]
    pub(crate) fn rrdma_shim_spin_assert_held(lock: *mut kernel::bindings::spinlock_t);
    /// The debug kernel's check that the current task holds none of
    /// rrdma's locks, before a wait for a completion or a handler (`what`,
    /// a NUL-terminated string, names it in the warning).
    pub(crate) fn rrdma_shim_assert_unlocked(what: *const c_char);
    /// How many of rrdma's locks the current task holds (-1 without
    /// lockdep).
    pub(crate) fn rrdma_shim_own_locks_held() -> c_int;
    /// Wakes read(2)/poll(2) sleepers of a file.
    pub(crate) fn rrdma_shim_file_wake(waitq: *mut c_void);
    /// The module's work queue (connection teardowns).
    pub(crate) fn rrdma_shim_wq() -> *mut kernel::bindings::workqueue_struct;

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
    /// Whether the `fail_at` test hook fails accept step `point`.
    pub(crate) fn rrdma_shim_fail_at(point: u32) -> bool;
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
    /// Creates the RC QP of `id` with its CQs and control buffers.
    pub(crate) fn rrdma_shim_qp_create(
        id: *mut RdmaCmId,
        pd: *mut IbPd,
        owner: *mut c_void,
        lane: u32,
        sq_depth: u32,
        nops: u32,
        nrecv: u32,
        nsend: u32,
        msg_len: u32,
        nsinks: u32,
        data_sinks: u32,
        sink_pages: u32,
        out: *mut *mut ShimQp,
    ) -> c_int;
    /// Stops posting and moves the QP to the error state, without waiting.
    pub(crate) fn rrdma_shim_qp_stop(q: *mut ShimQp) -> c_int;
    /// Stops posting and drains the QP (flushes everything outstanding).
    pub(crate) fn rrdma_shim_qp_drain(q: *mut ShimQp);
    /// Destroys a drained QP, its CQs, buffers and sinks; returns how many
    /// sinks it had.
    pub(crate) fn rrdma_shim_qp_destroy(q: *mut ShimQp) -> u32;
    /// Allocates the QP's READ and fence sinks once (may sleep; needs a
    /// poll reference): 1 if allocated now, 0 if they were, or -errno.
    pub(crate) fn rrdma_shim_qp_sinks_alloc(q: *mut ShimQp) -> c_int;
    /// Whether the QP's sinks are allocated (or it has none).
    pub(crate) fn rrdma_shim_qp_has_sinks(q: *mut ShimQp) -> bool;
    /// Busy polling: polls the QP's send CQ once unless its work item is
    /// polling; returns the completions handled. Needs a poll reference.
    pub(crate) fn rrdma_shim_qp_poll(q: *mut ShimQp) -> c_int;
    /// Takes a poll reference: the QP is not destroyed until it is put.
    pub(crate) fn rrdma_shim_qp_poll_get(q: *mut ShimQp);
    /// Puts a poll reference.
    pub(crate) fn rrdma_shim_qp_poll_put(q: *mut ShimQp);
    /// How long a synchronous operation polls (module parameter
    /// `sync_poll_us`), in ns.
    pub(crate) fn rrdma_shim_sync_poll_ns() -> u64;
    /// The monotonic clock, in ns.
    pub(crate) fn rrdma_shim_now_ns() -> u64;
    /// Sends one control message.
    pub(crate) fn rrdma_shim_ctrl_send(q: *mut ShimQp, msg: *const c_void, len: u32) -> c_int;
    /// Allocates and maps an MR over `npages` pages at I/O address `iova`.
    pub(crate) fn rrdma_shim_mr_alloc(
        pd: *mut IbPd,
        pages: *mut *mut c_void,
        npages: u32,
        iova: u64,
        err: *mut c_int,
    ) -> *mut ShimMr;
    /// The MR's keys.
    pub(crate) fn rrdma_shim_mr_keys(m: *mut ShimMr, lkey: *mut u32, rkey: *mut u32);
    /// Deregisters and frees an MR.
    pub(crate) fn rrdma_shim_mr_free(m: *mut ShimMr);
    /// Posts `n` work requests in order; `posted` says how many were.
    pub(crate) fn rrdma_shim_post(
        q: *mut ShimQp,
        wrs: *const ShimWr,
        n: u32,
        posted: *mut u32,
    ) -> c_int;
}

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

/// The module parameters of reconnect: the policy, and the storm guard's
/// limit.
pub(crate) fn reconnect_params() -> (crate::abi::reconnect::Policy, u32) {
    let (mut attempts, mut delay, mut max_delay, mut teardowns) = (0, 0, 0, 0);
    // SAFETY: all four pointers are valid for writes.
    unsafe {
        rrdma_shim_reconnect_params(&mut attempts, &mut delay, &mut max_delay, &mut teardowns)
    };
    (
        crate::abi::reconnect::from_params(attempts, delay, max_delay),
        teardowns,
    )
}

/// The module parameters `keepalive_ms` and `keepalive_misses`, as set.
pub(crate) fn keepalive_params() -> (u32, u32) {
    let (mut ms, mut misses) = (0, 0);
    // SAFETY: both pointers are valid for writes.
    unsafe { rrdma_shim_keepalive_params(&mut ms, &mut misses) };
    (ms, misses)
}

/// Checks, on a debug kernel, the rule that nothing waits for a
/// completion, an event handler or a work item with one of rrdma's locks
/// held: warns, naming `what` and the locks held, when the current task
/// holds one (and `might_sleep()` everywhere). `what` is NUL-terminated.
pub(crate) fn assert_unlocked(what: &'static [u8]) {
    // The shim reads a C string: stop at a NUL of ours.
    let what = if what.last() == Some(&0) {
        what
    } else {
        b"?\0"
    };
    // SAFETY: `what` ends with a NUL and is static.
    unsafe { rrdma_shim_assert_unlocked(what.as_ptr().cast()) }
}

/// How many of rrdma's locks the current task holds; `None` without
/// lockdep.
pub(crate) fn own_locks_held() -> Option<u32> {
    // SAFETY: no preconditions.
    u32::try_from(unsafe { rrdma_shim_own_locks_held() }).ok()
}

/// The accept steps the `fail_at` module parameter (a test hook) can fail,
/// once their queue pair is built, to reach the failure paths that a
/// peer's timing reaches only by chance.
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum FailAt {
    /// A connection's accept (`Conn::accept_request`).
    Accept = 0,
    /// A data lane's accept (`Conn::accept_lane`).
    LaneAccept = 1,
}

/// `EIO` if the `fail_at` test hook fails `point` now.
pub(crate) fn fail_at(point: FailAt) -> Result<(), crate::abi::errno::Errno> {
    // SAFETY: no preconditions.
    if unsafe { rrdma_shim_fail_at(point as u32) } {
        return Err(crate::abi::errno::EIO);
    }
    Ok(())
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

/// The largest region a caller may create (a module parameter's value).
pub(crate) fn max_region_bytes() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_max_region_bytes() }
}

/// 64 random bits (`get_random_u64()`).
pub(crate) fn random_u64() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_random_u64() }
}

/// Queue pairs a new connection offers or grants: the `queue_pairs`
/// module parameter (0: one per online CPU), from 1 to `wire::QPS_MAX`.
pub(crate) fn queue_pairs() -> u16 {
    // SAFETY: no preconditions.
    let n = unsafe { rrdma_shim_queue_pairs() };
    n.clamp(1, u32::from(crate::abi::wire::QPS_MAX)) as u16
}

/// How long a synchronous operation busy-polls for its completion before
/// it sleeps, in ns (module parameter `sync_poll_us`; 0: it does not).
pub(crate) fn sync_poll_ns() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_sync_poll_ns() }
}

/// The monotonic clock, in ns.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_now_ns() }
}

/// Whether a softirq runs the caller (a send CQ's poll).
pub(crate) fn in_softirq() -> bool {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_in_softirq() }
}

/// The CPU the caller runs on (it may move right after: a hint).
pub(crate) fn this_cpu() -> u32 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_this_cpu() }
}

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
