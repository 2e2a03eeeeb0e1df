// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: a queue pair's control messages: its receive buffers, all
 * posted while the QP lives (its receive CQ is the RDMA core's,
 * IB_POLL_UNBOUND_WORKQUEUE), and its send buffers.
 */
#include <linux/dma-mapping.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

#include "qp_internal.h"

int rrdma_qp_post_recv_locked(struct rrdma_shim_qp *q, u32 i)
{
	struct ib_sge sge = {
		.addr = q->rdma + (u64)i * q->msg_len,
		.length = q->msg_len,
		.lkey = q->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &q->slots[i].cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	lockdep_assert_held(&q->lock);
	if (q->draining)
		return -ENOTCONN;
	return ib_post_recv(q->id->qp, &wr, NULL);
}

/*
 * A control message arrived.  It is copied out and its buffer re-posted
 * before Rust sees it: an answer Rust sends then also tells the peer that
 * the buffer is free again (the wire protocol's flow control relies on it).
 * On ib_comp_unbound_wq (the receive CQ is IB_POLL_UNBOUND_WORKQUEUE),
 * process context;
 * Rust is never called with @q->lock held (it takes sleeping locks).
 */
static void recv_done(struct ib_wc *wc)
{
	struct rrdma_shim_ctrl_slot *s =
		container_of(wc->wr_cqe, struct rrdma_shim_ctrl_slot, cqe);
	struct rrdma_shim_qp *q = s->q;
	struct ib_device *dev = q->id->device;
	u64 off = (u64)s->index * q->msg_len;
	u8 msg[RRDMA_SHIM_CTRL_MAX];
	u32 len = min(wc->byte_len, q->msg_len);
	unsigned long flags;
	int ret;

	if (READ_ONCE(q->abandoned))
		return;
	if (wc->status != IB_WC_SUCCESS) {
		rrdma_rust_qp_error(q->owner, q->lane, wc->status);
		return;
	}
	if (q->lane) {
		/* A lane's one receive is a tripwire: no Send belongs there. */
		rrdma_rust_lane_recv(q->owner, q->lane);
		return;
	}
	ib_dma_sync_single_for_cpu(dev, q->rdma + off, q->msg_len,
				   DMA_BIDIRECTIONAL);
	memcpy(msg, q->rbufs + off, len);
	ib_dma_sync_single_for_device(dev, q->rdma + off, q->msg_len,
				      DMA_BIDIRECTIONAL);
	spin_lock_irqsave(&q->lock, flags);
	ret = rrdma_qp_post_recv_locked(q, s->index);
	if (ret && q->draining)
		ret = 0;
	spin_unlock_irqrestore(&q->lock, flags);
	if (ret) {
		rrdma_rust_qp_error(q->owner, q->lane, IB_WC_GENERAL_ERR);
		return;
	}
	rrdma_rust_ctrl_recv(q->owner, msg, len);
}

/* Rust enters the connection's allocation scope (Conn::scoped). */
void rrdma_qp_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	recv_done(wc);
}

/*
 * A control send completed (or was flushed): on the send CQ's work item,
 * process context (an atomic poll leaves it there); @lock is released
 * before Rust is called.
 */
void rrdma_qp_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rrdma_shim_ctrl_slot *s =
		container_of(wc->wr_cqe, struct rrdma_shim_ctrl_slot, cqe);
	struct rrdma_shim_qp *q = s->q;
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	__clear_bit(s->index - q->nrecv, q->send_busy);
	spin_unlock_irqrestore(&q->lock, flags);
	rrdma_rust_ctrl_sent(q->owner, wc->status);
}

/*
 * Sends one control message from a free send buffer; never sleeps.  Rust
 * calls it in process context, under Conn::inner.
 */
int rrdma_shim_ctrl_send(struct rrdma_shim_qp *q, const void *msg, u32 len)
{
	struct ib_device *dev = q->id->device;
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	unsigned long flags;
	u32 i;
	u64 off;
	int ret;

	if (len > q->msg_len)
		return -EMSGSIZE;
	spin_lock_irqsave(&q->lock, flags);
	i = find_first_zero_bit(q->send_busy, q->nsend);
	if (q->draining || i >= q->nsend) {
		spin_unlock_irqrestore(&q->lock, flags);
		return q->draining ? -ENOTCONN : -EAGAIN;
	}
	__set_bit(i, q->send_busy);
	off = (u64)i * q->msg_len;
	memcpy(q->sbufs + off, msg, len);
	ib_dma_sync_single_for_device(dev, q->sdma + off, len, DMA_TO_DEVICE);
	sge.addr = q->sdma + off;
	sge.length = len;
	sge.lkey = q->pd->local_dma_lkey;
	wr.wr_cqe = &q->slots[q->nrecv + i].cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(q->id->qp, &wr, NULL);
	if (ret)
		__clear_bit(i, q->send_busy);
	spin_unlock_irqrestore(&q->lock, flags);
	return ret;
}
