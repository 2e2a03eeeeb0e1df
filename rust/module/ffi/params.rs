// SPDX-License-Identifier: GPL-2.0

//! The module parameters Rust reads (all are defined in
//! `shim/params.c`).

use super::layout::{c, u32_of};

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

/// The accept steps the `fail_at` module parameter (a test hook) can fail,
/// once their queue pair is built, to reach the failure paths that a
/// peer's timing reaches only by chance (`RRDMA_SHIM_FAIL_*`, from
/// `layout.rs`).
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum FailAt {
    /// A connection's accept (`Conn::accept_request`).
    Accept = u32_of(c::RRDMA_SHIM_FAIL_ACCEPT),
    /// A data lane's accept (`Conn::accept_lane`).
    LaneAccept = u32_of(c::RRDMA_SHIM_FAIL_LANE_ACCEPT),
}

/// `EIO` if the `fail_at` test hook fails `point` now.
pub(crate) fn fail_at(point: FailAt) -> Result<(), crate::abi::errno::Errno> {
    // SAFETY: no preconditions.
    if unsafe { rrdma_shim_fail_at(point as u32) } {
        return Err(crate::abi::errno::EIO);
    }
    Ok(())
}

/// The largest region a caller may create (a module parameter's value).
pub(crate) fn max_region_bytes() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_max_region_bytes() }
}

/// Queue pairs a new connection offers or grants: the `queue_pairs`
/// module parameter (0: one per online CPU), from 1 to `wire::QPS_MAX`.
pub(crate) fn queue_pairs() -> u16 {
    // SAFETY: no preconditions.
    let n = unsafe { rrdma_shim_queue_pairs() };
    n.clamp(1, u32::from(crate::abi::wire::QPS_MAX)) as u16
}

/// Queue pairs the passive side grants at most, its own small one
/// included where `own_small` (`wire::qps_wanted`): with the default
/// `queue_pairs` (0) all that the request offers, as the requester's CPUs
/// post the operations and ours do no work for them (a server of one CPU
/// gives its clients lanes); else the parameter's.
pub(crate) fn queue_pairs_granted(own_small: bool) -> u16 {
    use crate::abi::wire::{qps_wanted, QPS_MAX};
    // SAFETY: no preconditions.
    match unsafe { rrdma_shim_queue_pairs_param() } {
        0 => QPS_MAX,
        n => qps_wanted(n.clamp(1, u32::from(QPS_MAX)) as u16, own_small),
    }
}

/// How long a disk's I/O waits for its connection to come back before it
/// fails, in ms (module parameter `blk_loss_timeout_ms`).
pub(crate) fn blk_loss_timeout_ms() -> u32 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_blk_loss_timeout_ms() }
}

/// How synchronous operations poll for their completion (module
/// parameters `sync_poll` and `sync_poll_us`).
pub(crate) fn sync_poll() -> crate::abi::poll::SyncPoll {
    let (mut on, mut fixed_us) = (false, 0);
    // SAFETY: two valid out-pointers.
    unsafe { rrdma_shim_sync_poll_params(&mut on, &mut fixed_us) };
    crate::abi::poll::mode(on, fixed_us)
}

/// How read(2) waits for more completions (module parameters
/// `read_gather` and `read_gather_us`, with a synchronous window's bound).
pub(crate) fn read_gather() -> crate::abi::poll::SyncPoll {
    let (mut on, mut fixed_us) = (false, 0);
    // SAFETY: two valid out-pointers.
    unsafe { rrdma_shim_read_gather_params(&mut on, &mut fixed_us) };
    crate::abi::poll::mode(on, fixed_us)
}

/// How an IOPOLL ring's poll spins before it sleeps (module parameters
/// `iopoll_spin` and `iopoll_spin_us`).
pub(crate) fn iopoll_spin() -> crate::abi::poll::SyncPoll {
    let (mut on, mut fixed_us) = (false, 0);
    // SAFETY: two valid out-pointers.
    unsafe { rrdma_shim_iopoll_params(&mut on, &mut fixed_us) };
    crate::abi::poll::iopoll_mode(on, fixed_us)
}

/// The cap on objects of `kind` per file (`user` false) or per user
/// (module parameters `max_file_*`, `max_user_*`).
pub(crate) fn cap(kind: crate::abi::caps::Kind, user: bool) -> u32 {
    // SAFETY: no preconditions.
    crate::abi::caps::cap(unsafe { rrdma_shim_cap(kind.index() as u32, user) })
}

extern "C" {
    /// The module parameters `max_file_*` (`user` false) and `max_user_*`,
    /// raw, of kind `kind` (`abi::caps::Kind::index`).
    pub(crate) fn rrdma_shim_cap(kind: u32, user: bool) -> u32;
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
    /// The `max_region_mb` module parameter, in bytes.
    pub(crate) fn rrdma_shim_max_region_bytes() -> u64;
    /// The `queue_pairs` module parameter's count (0 made one per online
    /// CPU), unclamped.
    pub(crate) fn rrdma_shim_queue_pairs() -> u32;
    /// The `queue_pairs` module parameter as set (0: the default).
    pub(crate) fn rrdma_shim_queue_pairs_param() -> u32;
    /// Whether the `fail_at` test hook fails accept step `point`.
    pub(crate) fn rrdma_shim_fail_at(point: u32) -> bool;
    /// The module parameters `sync_poll` and `sync_poll_us`.
    pub(crate) fn rrdma_shim_sync_poll_params(on: *mut bool, fixed_us: *mut u32);
    /// The module parameters `read_gather` and `read_gather_us`.
    pub(crate) fn rrdma_shim_read_gather_params(on: *mut bool, fixed_us: *mut u32);
    /// The module parameters `iopoll_spin` and `iopoll_spin_us`.
    pub(crate) fn rrdma_shim_iopoll_params(on: *mut bool, fixed_us: *mut u32);
    /// The `blk_loss_timeout_ms` module parameter.
    pub(crate) fn rrdma_shim_blk_loss_timeout_ms() -> u32;
}
