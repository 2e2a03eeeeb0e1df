// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the queue sizes: whatever the device's limits, what
//! rrdma asks for fits them, or the device is refused.

use proptest::prelude::*;
use rrdma_abi::limits::{
    import_ops, queue_sizes, queue_sizes_laned, DeviceLimits, CTRL_RECV, CTRL_SEND, OPS_MAX,
    OPS_MIN, SEND_LANED, SEND_MAX,
};
use rrdma_abi::wire::CTRL_RECV_MIN;

fn small_or_large() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..600, any::<u32>()]
}

proptest! {
    /// Whatever the device's limits, the queues rrdma asks for fit
    /// them, or the device is refused; and the control messages always
    /// have what the wire protocol needs.
    #[test]
    fn queue_sizes_fit_the_device(
        qp_wr in small_or_large(),
        cqe in small_or_large(),
        sge in 0u32..3,
    ) {
        let l = DeviceLimits {
            max_qp_wr: qp_wr,
            max_cqe: cqe,
            max_send_sge: sge,
            max_recv_sge: sge,
            max_sge_rd: sge,
            ..DeviceLimits::UNLIMITED
        };
        match queue_sizes(&l) {
            Ok(q) => {
                prop_assert!(sge >= 1);
                // One entry more in each queue: the drain's.
                prop_assert!(q.send_wrs() < qp_wr && q.recv < qp_wr);
                prop_assert!(q.send_cqe() <= cqe && q.recv_cqe() <= cqe);
                prop_assert!((OPS_MIN..=OPS_MAX).contains(&q.ops));
                prop_assert!(q.send_wrs() <= SEND_MAX);
                prop_assert!((q.ops..=OPS_MAX).contains(&q.lane_ops));
                prop_assert!(q.lane_ops < qp_wr && q.lane_ops < cqe);
                prop_assert!(q.grant_regs >= 1);
                prop_assert!(q.ctrl_send == CTRL_SEND);
                prop_assert!(q.recv >= u32::from(CTRL_RECV_MIN));
                // A laned connection's own queue pair: as small as
                // `SEND_LANED` allows, never refused where the full one
                // is not, its lanes as large.
                let laned = queue_sizes_laned(&l);
                prop_assert!(laned.is_ok());
                let s = laned.unwrap();
                prop_assert!(s.send_wrs() <= SEND_LANED.min(q.send_wrs()));
                prop_assert!((OPS_MIN..=q.ops).contains(&s.ops));
                prop_assert!(s.lane_ops == q.lane_ops && s.recv == q.recv);
                // An import's largest operation fits every queue pair but
                // the small own one, which it may outgrow (it waits for a
                // lane).
                let i = import_ops(&l);
                prop_assert!(i.is_ok());
                let i = i.unwrap();
                prop_assert!((s.ops..=q.ops).contains(&i) && i <= q.lane_ops);
            }
            // Refused only when no sizing could fit (the bound is
            // exact: one entry more and it fits).
            Err(_) => prop_assert!(
                sge == 0
                    || qp_wr.saturating_sub(1).min(cqe.saturating_sub(1))
                        < (CTRL_SEND + OPS_MIN + OPS_MIN / 4 + 1).max(CTRL_RECV)
            ),
        }
    }
}
