// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: a queue pair's control messages: its receive buffers, all
 * posted while the QP lives (its receive CQ is the RDMA core's,
 * IB_POLL_UNBOUND_WORKQUEUE), and its send buffers.  A QP posts
 * @nrecv_idle receive buffers at creation and uses @nsend_idle send
 * buffers, the rest once it grows (rrdma_shim_qp_ctrl_grow()).
 */
#include <linux/dma-mapping.h>
#include <linux/err.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

#include "qp_internal.h"

/* Receive buffer @i: its bytes, and its DMA address in @dma. */
static void *rrdma_qp_rbuf(struct rrdma_shim_qp *q, u32 i, u64 *dma)
{
	if (i < q->nrecv_idle) {
		*dma = q->rdma + (u64)i * q->msg_len;
		return q->rbufs + (size_t)i * q->msg_len;
	}
	i -= q->nrecv_idle;
	*dma = q->rdma_more + (u64)i * q->msg_len;
	return q->rbufs_more + (size_t)i * q->msg_len;
}

int rrdma_qp_post_recv_locked(struct rrdma_shim_qp *q, u32 i)
{
	struct ib_sge sge = {
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
	rrdma_qp_rbuf(q, i, &sge.addr);
	return ib_post_recv(q->id->qp, &wr, NULL);
}

/*
 * @n control buffers, mapped for @dir at *@dma: NULL for none, or
 * ERR_PTR(-ENOMEM).
 */
static void *rrdma_qp_bufs(struct rrdma_shim_qp *q, u32 n,
			   enum dma_data_direction dir, u64 *dma)
{
	struct ib_device *dev = q->id->device;
	size_t len = (size_t)n * q->msg_len;
	void *bufs;

	if (!n)
		return NULL;
	bufs = kzalloc(len, GFP_KERNEL);
	if (!bufs)
		return ERR_PTR(-ENOMEM);
	*dma = ib_dma_map_single(dev, bufs, len, dir);
	if (ib_dma_mapping_error(dev, *dma)) {
		kfree(bufs);
		return ERR_PTR(-ENOMEM);
	}
	return bufs;
}

/* Unmaps and frees @n control buffers of rrdma_qp_bufs() (none if NULL). */
static void rrdma_qp_bufs_free(struct rrdma_shim_qp *q, void *bufs, u32 n,
			       enum dma_data_direction dir, u64 dma)
{
	if (IS_ERR_OR_NULL(bufs))
		return;
	ib_dma_unmap_single(q->id->device, dma, (size_t)n * q->msg_len, dir);
	kfree(bufs);
}

/*
 * Allocates and maps the control buffers of the QP's creation (@id,
 * @msg_len and the counts set): 0 or -ENOMEM (none left then).
 */
int rrdma_qp_alloc_bufs(struct rrdma_shim_qp *q)
{
	q->rbufs = rrdma_qp_bufs(q, q->nrecv_idle, DMA_BIDIRECTIONAL, &q->rdma);
	q->sbufs = rrdma_qp_bufs(q, q->nsend_idle, DMA_TO_DEVICE, &q->sdma);
	if (IS_ERR(q->rbufs) || IS_ERR(q->sbufs)) {
		rrdma_qp_free_bufs(q);
		return -ENOMEM;
	}
	return 0;
}

/*
 * Unmaps and frees every control buffer: those of the QP's creation and
 * those it grew (if it did).
 */
void rrdma_qp_free_bufs(struct rrdma_shim_qp *q)
{
	rrdma_qp_bufs_free(q, q->rbufs, q->nrecv_idle, DMA_BIDIRECTIONAL,
			   q->rdma);
	rrdma_qp_bufs_free(q, q->sbufs, q->nsend_idle, DMA_TO_DEVICE, q->sdma);
	rrdma_qp_bufs_free(q, q->rbufs_more, q->nrecv - q->nrecv_idle,
			   DMA_BIDIRECTIONAL, q->rdma_more);
	rrdma_qp_bufs_free(q, q->sbufs_more, q->nsend - q->nsend_idle,
			   DMA_TO_DEVICE, q->sdma_more);
	q->rbufs = NULL;
	q->sbufs = NULL;
	q->rbufs_more = NULL;
	q->sbufs_more = NULL;
}

/*
 * Posts the receive buffers beyond the @nrecv_idle of the QP's creation and
 * makes the send buffers beyond @nsend_idle usable, once: 1 if it did now,
 * 0 if it had (or has none beyond), or -errno (after a failed post, with
 * the QP moved to the error state).  Rust grows the QP before it carries
 * a request or revoke of ours, whose answer needs a receive buffer of its
 * own, and at the peer's first import request.  Allocates and maps;
 * process context (Rust holds Conn::inner, a mutex).
 */
int rrdma_shim_qp_ctrl_grow(struct rrdma_shim_qp *q)
{
	void *rbufs, *sbufs;
	u64 rdma = 0, sdma = 0;
	u32 i;
	int ret = 0;

	might_sleep();
	if (READ_ONCE(q->grown) ||
	    (q->nrecv == q->nrecv_idle && q->nsend == q->nsend_idle))
		return 0;
	rbufs = rrdma_qp_bufs(q, q->nrecv - q->nrecv_idle, DMA_BIDIRECTIONAL,
			      &rdma);
	sbufs = rrdma_qp_bufs(q, q->nsend - q->nsend_idle, DMA_TO_DEVICE,
			      &sdma);
	spin_lock_irq(&q->lock);
	if (IS_ERR(rbufs) || IS_ERR(sbufs) || q->grown || q->draining) {
		ret = q->grown ? 0 : q->draining ? -ENOTCONN : -ENOMEM;
		spin_unlock_irq(&q->lock);
		goto free;
	}
	q->rbufs_more = rbufs;
	q->rdma_more = rdma;
	q->sbufs_more = sbufs;
	q->sdma_more = sdma;
	WRITE_ONCE(q->grown, true);
	for (i = q->nrecv_idle; i < q->nrecv && !ret; i++)
		ret = rrdma_qp_post_recv_locked(q, i);
	spin_unlock_irq(&q->lock);
	if (ret) {
		/*
		 * Short of its buffers, the QP must not go on: in the error
		 * state it flushes what is posted, which ends the connection.
		 */
		struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

		ib_modify_qp(q->id->qp, &attr, IB_QP_STATE);
		return ret;
	}
	return 1;

free:
	rrdma_qp_bufs_free(q, rbufs, q->nrecv - q->nrecv_idle,
			   DMA_BIDIRECTIONAL, rdma);
	rrdma_qp_bufs_free(q, sbufs, q->nsend - q->nsend_idle, DMA_TO_DEVICE,
			   sdma);
	return ret;
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
	u8 msg[RRDMA_SHIM_CTRL_MAX];
	u32 len = min(wc->byte_len, q->msg_len);
	unsigned long flags;
	void *buf;
	u64 dma;
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
	buf = rrdma_qp_rbuf(q, s->index, &dma);
	ib_dma_sync_single_for_cpu(dev, dma, q->msg_len, DMA_BIDIRECTIONAL);
	memcpy(msg, buf, len);
	ib_dma_sync_single_for_device(dev, dma, q->msg_len, DMA_BIDIRECTIONAL);
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
	void *buf;
	u32 i, n;
	int ret;

	if (len > q->msg_len)
		return -EMSGSIZE;
	spin_lock_irqsave(&q->lock, flags);
	n = q->grown ? q->nsend : q->nsend_idle;
	i = find_first_zero_bit(q->send_busy, n);
	if (q->draining || i >= n) {
		spin_unlock_irqrestore(&q->lock, flags);
		return q->draining ? -ENOTCONN : -EAGAIN;
	}
	__set_bit(i, q->send_busy);
	if (i < q->nsend_idle) {
		buf = q->sbufs + (size_t)i * q->msg_len;
		sge.addr = q->sdma + (u64)i * q->msg_len;
	} else {
		buf = q->sbufs_more + (size_t)(i - q->nsend_idle) * q->msg_len;
		sge.addr = q->sdma_more + (u64)(i - q->nsend_idle) * q->msg_len;
	}
	memcpy(buf, msg, len);
	ib_dma_sync_single_for_device(dev, sge.addr, len, DMA_TO_DEVICE);
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
