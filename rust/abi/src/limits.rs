// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A device's limits and the queue sizes rrdma derives from them.
//!
//! Soft providers advertise limits far above what rrdma asks for; a real
//! NIC may not (`max_qp_wr`, `max_cqe`, `max_send_sge`, `max_sge_rd`,
//! `max_fast_reg_page_list_len`, `max_mr`). A connection's queue pair is
//! sized here from the device's limits, clamped by the module's `limit_*`
//! parameters so that a guest can emulate a small NIC: within
//! [`SEND_MAX`] send-queue entries, the control messages get
//! [`CTRL_SEND`], export registrations a quarter of the rest, operations
//! the remainder; a data lane's operations get all of its send queue. A
//! device too small for that is refused with `ENOSPC` rather than failing
//! later.

use super::errno::{Errno, ENOSPC};

/// Most send-queue entries of a queue pair.
///
/// Queue sizes here are 2^k - 1 or just below, because providers round
/// them up: siw to a power of two, rxe to a power of two above the size
/// plus one (its ring keeps one slot empty). A send queue of `SEND_MAX`
/// entries and its completion queue of one more then take 256 entries
/// each. A connection's own queue pair used to have 416 (and a lane 256):
/// 512 entries each, 96 KiB more per queue pair on rxe.
pub const SEND_MAX: u32 = 254;
/// Most send-queue entries of a connection's own queue pair when data
/// lanes carry its operations ([`queue_sizes_laned`]): 32 entries on
/// either provider, against 256 (on rxe 90 KiB less per connection, its
/// send queue and completion queue).
pub const SEND_LANED: u32 = 30;
/// The send queue whose operation slots bound an import's largest
/// operation ([`import_ops`]).
const SEND_IMPORT: u32 = 62;
/// Most operation slots (send-queue entries for operations) of a queue
/// pair: a data lane's whole send queue.
pub const OPS_MAX: u32 = SEND_MAX;
/// Fewest operation slots worth connecting with: an operation of one block
/// that crosses a chunk boundary on both sides needs up to 10 work requests.
pub const OPS_MIN: u32 = 16;
/// Most export registrations in flight on one connection.
pub const GRANT_REGS_MAX: u32 = 128;
/// Control receive buffers a connection posts (and advertises): the
/// receive queue and its completion queue (one more) are then 2^k - 1 and
/// below (see [`SEND_MAX`]).
pub const CTRL_RECV: u32 = 30;
/// Control receive buffers a connection's queue pair posts from the start;
/// the others once it carries a request or revoke of ours (whose answer
/// needs one), so that an idle connection holds 8 KiB of them instead of
/// 16: what the peer may send unprompted, and the answer to our ping
/// (`wire::ctrl_recv_idle_min`).
pub const CTRL_RECV_IDLE: u32 = 16;
const _: () = {
    use super::wire::{ctrl_recv_idle_min, CTRL_LEN, VERSION};
    assert!(CTRL_RECV_IDLE >= ctrl_recv_idle_min(VERSION) as u32);
    assert!(CTRL_RECV_IDLE <= CTRL_RECV);
    assert!(CTRL_SEND_IDLE >= 1 && CTRL_SEND_IDLE <= CTRL_SEND);
    // One 8 KiB allocation (kmalloc rounds larger ones to a power of two).
    assert!(CTRL_RECV_IDLE as usize * CTRL_LEN <= 8192);
};
/// Control send buffers. A message that finds every one held waits in the
/// channel's backlog (`backlog`) for a send completion, so a few suffice:
/// 8 of them take 4 KiB apart from the receive buffers' 16 (one
/// allocation of both took 32).
pub const CTRL_SEND: u32 = 8;
/// Control send buffers a connection's queue pair uses from the start, the
/// others from when its receive buffers grow ([`CTRL_RECV_IDLE`]; the
/// peer's first import request grows them too): an idle connection sends
/// pings and pongs, and a message finding none free waits in the backlog
/// (2 KiB instead of 4).
pub const CTRL_SEND_IDLE: u32 = 4;

/// What rrdma needs to know of a device's limits (each the device's own,
/// or the module's clamp if lower). Laid out as the C shim's `struct
/// rrdma_shim_device_limits`, which fills it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Work requests per queue (send or receive) of a queue pair.
    pub max_qp_wr: u32,
    /// Entries per completion queue.
    pub max_cqe: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Scatter/gather entries per RDMA READ.
    pub max_sge_rd: u32,
    /// Pages per fast registration.
    pub max_fast_reg_pages: u32,
    /// Memory registrations on the device.
    pub max_mr: u32,
}

impl DeviceLimits {
    /// No limit at all (every field `u32::MAX`).
    pub const UNLIMITED: Self = Self {
        max_qp_wr: u32::MAX,
        max_cqe: u32::MAX,
        max_send_sge: u32::MAX,
        max_recv_sge: u32::MAX,
        max_sge_rd: u32::MAX,
        max_fast_reg_pages: u32::MAX,
        max_mr: u32::MAX,
    };

    /// Each limit lowered to `clamp`'s where that is non-zero.
    pub fn clamped(self, clamp: &Self) -> Self {
        let c = |dev: u32, lim: u32| if lim == 0 { dev } else { dev.min(lim) };
        Self {
            max_qp_wr: c(self.max_qp_wr, clamp.max_qp_wr),
            max_cqe: c(self.max_cqe, clamp.max_cqe),
            max_send_sge: c(self.max_send_sge, clamp.max_send_sge),
            max_recv_sge: c(self.max_recv_sge, clamp.max_recv_sge),
            max_sge_rd: c(self.max_sge_rd, clamp.max_sge_rd),
            max_fast_reg_pages: c(self.max_fast_reg_pages, clamp.max_fast_reg_pages),
            max_mr: c(self.max_mr, clamp.max_mr),
        }
    }
}

/// The queues of one connection's queue pair, and of its data lanes: what
/// rrdma posts. Each queue and completion queue holds one entry more, for
/// the drain's work request (`ib_drain_qp()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSizes {
    /// Operation slots: send-queue entries for operations (with their
    /// registrations and fences).
    pub ops: u32,
    /// Operation slots of a data lane, whose send queue carries nothing
    /// else: at least `ops`.
    pub lane_ops: u32,
    /// Send-queue entries for export registrations.
    pub grant_regs: u32,
    /// Control send buffers (each a send-queue entry).
    pub ctrl_send: u32,
    /// Control receive buffers (the receive queue).
    pub recv: u32,
}

impl QueueSizes {
    /// Send-queue entries.
    pub fn send_wrs(&self) -> u32 {
        self.ops + self.grant_regs + self.ctrl_send
    }

    /// Entries of the send completion queue: every send may complete, and
    /// the drain adds one.
    pub fn send_cqe(&self) -> u32 {
        self.send_wrs() + 1
    }

    /// Entries of the receive completion queue (with the drain's).
    pub fn recv_cqe(&self) -> u32 {
        self.recv + 1
    }
}

/// Why a device cannot carry a connection, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TooSmall {
    /// No scatter/gather entry for sends, receives or READs.
    Sge,
    /// The receive queue or its completion queue cannot hold the control
    /// buffers the wire protocol needs.
    Recv,
    /// The send queue cannot hold the control sends and [`OPS_MIN`]
    /// operation slots (not with today's constants: a device refused for
    /// that is refused for its receive queue first).
    Send,
}

impl TooSmall {
    /// The errno a connection on such a device fails with.
    pub fn errno(self) -> Errno {
        ENOSPC
    }
}

/// The queue sizes of a connection on a device with limits `l`.
pub fn queue_sizes(l: &DeviceLimits) -> Result<QueueSizes, TooSmall> {
    sized(l, SEND_MAX)
}

/// The queue sizes of a connection whose operations go on its data lanes
/// once they are up: its own queue pair keeps the control sends and gets
/// a quarter of the rest of [`SEND_LANED`] for export registrations and
/// the remainder (17) for the operations that come before the lanes; a
/// lane's are as [`queue_sizes`]'.
pub fn queue_sizes_laned(l: &DeviceLimits) -> Result<QueueSizes, TooSmall> {
    sized(l, SEND_LANED)
}

/// The operation slots whose budget bounds the largest operation on an
/// import (`ops::max_op_blocks`), whatever queue pair of its connection
/// the operation goes on: 41 where the device allows them, at most a
/// lane's and a full own queue pair's. A laned connection's own queue
/// pair has fewer ([`queue_sizes_laned`]): an operation larger than those
/// waits for a lane.
pub fn import_ops(l: &DeviceLimits) -> Result<u32, TooSmall> {
    sized(l, SEND_IMPORT).map(|q| q.ops)
}

fn sized(l: &DeviceLimits, send_max: u32) -> Result<QueueSizes, TooSmall> {
    if l.max_send_sge == 0 || l.max_recv_sge == 0 || l.max_sge_rd == 0 {
        return Err(TooSmall::Sge);
    }
    // `ib_drain_qp()` posts a send and a receive of its own, which the
    // queues must have room for (as the CQs have for their completions):
    // every queue holds one entry more than rrdma posts on it.
    if l.max_qp_wr.saturating_sub(1) < CTRL_RECV || l.max_cqe.saturating_sub(1) < CTRL_RECV {
        return Err(TooSmall::Recv);
    }
    let send = (l.max_qp_wr - 1).min(l.max_cqe - 1);
    let ctrl_send = CTRL_SEND;
    let rest = send.min(send_max).saturating_sub(ctrl_send);
    let grant_regs = (rest / 4).clamp(1, GRANT_REGS_MAX);
    let ops = rest.saturating_sub(grant_regs).min(OPS_MAX);
    if ops < OPS_MIN {
        return Err(TooSmall::Send);
    }
    Ok(QueueSizes {
        ops,
        lane_ops: send.min(OPS_MAX),
        grant_regs,
        ctrl_send,
        recv: CTRL_RECV,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::CTRL_RECV_MIN;

    #[test]
    fn an_unlimited_device_gets_the_full_queues() {
        let q = queue_sizes(&DeviceLimits::UNLIMITED).unwrap();
        assert_eq!(
            q,
            QueueSizes {
                ops: 185,
                lane_ops: OPS_MAX,
                grant_regs: 61,
                ctrl_send: CTRL_SEND,
                recv: CTRL_RECV
            }
        );
        assert_eq!(q.send_wrs(), SEND_MAX);
    }

    /// Sizes that providers round up to a power of two (siw), or to one
    /// above the size plus one (rxe), stay within 256 entries.
    #[test]
    fn a_lane_and_the_receive_queue_fit_256_entries() {
        let q = queue_sizes(&DeviceLimits::UNLIMITED).unwrap();
        // What the device is asked for: each queue with the drain's entry
        // (`qp.c`), the CQs as `send_cqe` and `recv_cqe` say.
        for asked in [
            q.send_wrs() + 1,
            q.send_cqe(),
            q.lane_ops + 1,
            q.lane_ops + 1,
            q.recv + 1,
            q.recv_cqe(),
        ] {
            let siw = asked.next_power_of_two();
            let rxe = (asked + 1).next_power_of_two();
            assert_eq!(siw, rxe, "{asked}: rxe would take twice siw's");
            assert!(rxe <= 256, "{asked}");
        }
        assert!(q.recv >= u32::from(CTRL_RECV_MIN));
    }

    /// A laned connection's own queues take 32 entries, its lanes 256.
    #[test]
    fn a_laned_connection_keeps_a_small_queue_of_its_own() {
        let full = queue_sizes(&DeviceLimits::UNLIMITED).unwrap();
        let q = queue_sizes_laned(&DeviceLimits::UNLIMITED).unwrap();
        assert_eq!(
            q,
            QueueSizes {
                ops: 17,
                lane_ops: OPS_MAX,
                grant_regs: 5,
                ctrl_send: CTRL_SEND,
                recv: CTRL_RECV
            }
        );
        assert_eq!(q.send_wrs(), SEND_LANED);
        // rxe: the drain's entry and its ring's empty slot.
        assert_eq!((q.send_wrs() + 1 + 1).next_power_of_two(), 32);
        assert_eq!((q.send_cqe() + 1).next_power_of_two(), 32);
        // An import's operations fit a lane and a full own queue pair,
        // and are larger than the small one's.
        let import = import_ops(&DeviceLimits::UNLIMITED).unwrap();
        assert_eq!(import, 41);
        assert!(import > q.ops && import <= full.ops && import <= q.lane_ops);
        assert_eq!(q.lane_ops, full.lane_ops);
        assert!(q.ops >= OPS_MIN);
        // A small NIC's queue is the smaller bound of an import's.
        let l = DeviceLimits {
            max_qp_wr: 48,
            max_cqe: 64,
            ..DeviceLimits::UNLIMITED
        };
        assert_eq!(import_ops(&l), queue_sizes(&l).map(|q| q.ops));
        assert_eq!(queue_sizes_laned(&l).map(|q| q.ops), Ok(17));
    }

    #[test]
    fn a_small_nic_shares_its_queue() {
        let l = DeviceLimits {
            max_qp_wr: 48,
            max_cqe: 64,
            ..DeviceLimits::UNLIMITED
        };
        let q = queue_sizes(&l).unwrap();
        assert_eq!(q.ctrl_send, CTRL_SEND);
        assert_eq!(q.grant_regs, 9);
        assert_eq!(q.ops, 30);
        // With the drain's entry, 48 on the device.
        assert_eq!(q.lane_ops, 47);
        assert!(q.send_wrs() < 48 && q.send_cqe() <= 64);
    }

    #[test]
    fn too_small_devices_are_refused() {
        let base = DeviceLimits::UNLIMITED;
        let sge = DeviceLimits {
            max_sge_rd: 0,
            ..base
        };
        assert_eq!(queue_sizes(&sge), Err(TooSmall::Sge));
        // The receive queue needs one entry more: the drain's.
        let recv = DeviceLimits {
            max_qp_wr: CTRL_RECV,
            ..base
        };
        assert_eq!(queue_sizes(&recv), Err(TooSmall::Recv));
        let cq = DeviceLimits {
            max_cqe: CTRL_RECV,
            ..base
        };
        assert_eq!(queue_sizes(&cq), Err(TooSmall::Recv));
        // The receive side's bound is the higher: a device that holds the
        // receive buffers has room for the sends and `OPS_MIN` as well.
        let least = DeviceLimits {
            max_qp_wr: CTRL_RECV + 1,
            max_cqe: CTRL_RECV + 1,
            ..base
        };
        assert!(queue_sizes(&least).is_ok_and(|q| q.ops >= OPS_MIN));
        assert_eq!(TooSmall::Send.errno(), ENOSPC);
    }

    #[test]
    fn a_clamp_only_lowers() {
        let dev = DeviceLimits {
            max_qp_wr: 100,
            ..DeviceLimits::UNLIMITED
        };
        let clamp = DeviceLimits {
            max_qp_wr: 200,
            max_cqe: 64,
            max_send_sge: 0,
            max_recv_sge: 0,
            max_sge_rd: 0,
            max_fast_reg_pages: 0,
            max_mr: 0,
        };
        let c = dev.clamped(&clamp);
        assert_eq!(c.max_qp_wr, 100);
        assert_eq!(c.max_cqe, 64);
        assert_eq!(c.max_mr, u32::MAX);
    }
}
