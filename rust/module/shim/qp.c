// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: an RC queue pair's lifetime (create, stop, drain,
 * destroy) and its references (see qp_internal.h for the other files of a
 * queue pair).
 */
#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "qp_internal.h"

/* The CPU an operation is submitted on (it picks that CPU's lane). */
u32 rrdma_shim_this_cpu(void)
{
	return raw_smp_processor_id();
}

int rrdma_shim_qp_create(struct rdma_cm_id *id, struct ib_pd *pd, void *owner,
			 u32 lane, u32 sq_depth, u32 nops, u32 nrecv,
			 u32 nrecv_idle, u32 nsend, u32 nsend_idle,
			 u32 msg_len, u32 nsinks, u32 data_sinks,
			 u32 sink_pages, u32 dma_sge, u32 dma_sge_rd,
			 struct rrdma_shim_qp **out)
{
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr attr = {};
	struct rrdma_shim_qp *q;
	u32 i, n = nrecv + nsend;
	int ret;

	if (msg_len > RRDMA_SHIM_CTRL_MAX || !nrecv_idle || nrecv_idle > nrecv ||
	    nsend_idle > nsend || (nsend && !nsend_idle))
		return -EINVAL;
	q = kzalloc(struct_size(q, slots, n), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	q->send_busy = bitmap_zalloc(nsend, GFP_KERNEL);
	q->fence = kzalloc(RRDMA_SHIM_FENCE_LEN, GFP_KERNEL);
	/* Rust's OPS_MAX (254) slots stay within one 4 KiB allocation. */
	BUILD_BUG_ON(RRDMA_SHIM_OPS_4K < 254);
	q->ops = kzalloc(struct_size(q->ops, slot, nops), GFP_KERNEL);
	/* Rust's choice (QpSizes::dma_sge{,_rd}), within the shim's storage. */
	q->dma_sge = clamp_t(u32, dma_sge, 1, RRDMA_SHIM_DMA_SGE);
	q->dma_sge_rd = clamp_t(u32, dma_sge_rd, 1, q->dma_sge);
	q->dma_sges = kcalloc(RRDMA_POST_CHUNK * q->dma_sge,
			      sizeof(*q->dma_sges), GFP_KERNEL);
	if (!q->send_busy || !q->fence || !q->ops || !q->dma_sges) {
		ret = -ENOMEM;
		goto free;
	}
	q->id = id;
	q->pd = pd;
	q->owner = owner;
	q->lane = lane;
	q->nrecv = nrecv;
	q->nrecv_idle = nrecv_idle;
	q->nsend = nsend;
	q->nsend_idle = nsend_idle;
	q->msg_len = msg_len;
	spin_lock_init(&q->lock);
	irq_poll_init(&q->iop, RRDMA_SHIM_POLL_BUDGET, rrdma_scq_iop_poll);
	INIT_WORK(&q->scq_work, rrdma_scq_poll);
	spin_lock_init(&q->poll_lock);
	atomic_set(&q->pollers, 0);
	init_waitqueue_head(&q->iopoll_wq);
	atomic_set(&q->cq_events, 0);
	refcount_set(&q->refs, 1);
	for (i = 0; i < n; i++) {
		q->slots[i].q = q;
		q->slots[i].index = i;
		q->slots[i].cqe.done = i < nrecv ? rrdma_qp_recv_done : rrdma_qp_send_done;
	}
	q->nops = nops;
	q->ops->q = q;
	for (i = 0; i < nops; i++) {
		q->ops->slot[i].index = i;
		q->ops->slot[i].cqe.done = rrdma_qp_op_done;
	}
	q->sinks_max = nsinks;
	q->data_sinks = data_sinks;
	q->sink_pages = sink_pages;
	mutex_init(&q->sinks_lock);
	ret = rrdma_qp_alloc_bufs(q);
	if (ret)
		goto free;
	q->fence_dma = ib_dma_map_single(dev, q->fence, RRDMA_SHIM_FENCE_LEN,
					 DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(dev, q->fence_dma)) {
		ret = -ENOMEM;
		goto free_bufs;
	}
	/* Every send may complete (with an error) and the drain needs one. */
	q->scq = rrdma_scq_create(q, sq_depth + nsend + 1);
	if (IS_ERR(q->scq)) {
		ret = PTR_ERR(q->scq);
		goto unmap_fence;
	}
	/*
	 * Unbound: control messages (a revoke, its answer, pings)
	 * must not wait behind a task that holds the CPU the receive was
	 * signalled on, as siw's transmit thread can for seconds on a
	 * kernel without preemption; no data moves through receives.
	 */
	q->rcq = ib_alloc_cq_any(dev, owner, nrecv + 1,
				 IB_POLL_UNBOUND_WORKQUEUE);
	if (IS_ERR(q->rcq)) {
		ret = PTR_ERR(q->rcq);
		goto free_scq;
	}
	attr.qp_context = owner;
	attr.send_cq = q->scq;
	attr.recv_cq = q->rcq;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	/*
	 * ib_drain_qp() posts a send and a receive of its own, and a provider
	 * may size its queues exactly: one entry more than we post, in each.
	 */
	attr.cap.max_send_wr = sq_depth + nsend + 1;
	attr.cap.max_recv_wr = nrecv + 1;
	attr.cap.max_send_sge = q->dma_sge;
	attr.cap.max_recv_sge = 1;
	ret = rdma_create_qp(id, pd, &attr);
	if (ret)
		goto free_rcq;
	/*
	 * rdma_create_qp() names the QP after rdma_cm (the module that called
	 * ib_create_qp()): renamed, so that `rdma resource show qp` says
	 * rrdma, as it does for the PD, CQs, MRs and cm_id.  What
	 * rdma_restrack_set_name() (core-private) does for a kernel caller.
	 */
	WRITE_ONCE(id->qp->res.kern_name, KBUILD_MODNAME);
	spin_lock_irq(&q->lock);
	for (i = 0; i < nrecv_idle && !ret; i++)
		ret = rrdma_qp_post_recv_locked(q, i);
	spin_unlock_irq(&q->lock);
	if (ret) {
		WRITE_ONCE(q->abandoned, true);
		rdma_destroy_qp(id);
		goto free_rcq;
	}
	*out = q;
	return 0;

free_rcq:
	ib_free_cq(q->rcq);
free_scq:
	rrdma_scq_destroy(q);
unmap_fence:
	ib_dma_unmap_single(dev, q->fence_dma, RRDMA_SHIM_FENCE_LEN,
			    DMA_FROM_DEVICE);
free_bufs:
	rrdma_qp_free_bufs(q);
free:
	rrdma_qp_free_sinks(q);
	kfree(q->dma_sges);
	kfree(q->ops);
	kfree(q->fence);
	bitmap_free(q->send_busy);
	kfree(q);
	return ret;
}

/*
 * Moves the QP to the error state without waiting (the drain comes later,
 * from the teardown): from its return, nothing the peer still sends on
 * this QP is placed, and nothing more is posted.  Sleeps (ib_modify_qp);
 * takes no rdma_cm handler mutex.
 */
int rrdma_shim_qp_stop(struct rrdma_shim_qp *q)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	spin_lock_irq(&q->lock);
	q->draining = true;
	spin_unlock_irq(&q->lock);
	return ib_modify_qp(q->id->qp, &attr, IB_QP_STATE);
}

void rrdma_shim_qp_drain(struct rrdma_shim_qp *q)
{
	/* Waits for the completions of everything posted. */
	rrdma_shim_assert_unlocked("queue pair drained");
	spin_lock_irq(&q->lock);
	q->draining = true;
	spin_unlock_irq(&q->lock);
	ib_drain_qp(q->id->qp);
}

/*
 * Destroys the QP (drained).  Returns how many sinks it freed, for Rust's
 * count of the device's registrations: a sink allocation under a poll
 * reference is over once the wait below is.
 */
u32 rrdma_shim_qp_destroy(struct rrdma_shim_qp *q)
{
	struct ib_device *dev = q->id->device;
	u32 sinks;

	rrdma_shim_assert_unlocked("queue pair destroyed");
	/*
	 * First no new poll reference (rrdma_shim_qp_poll_tryget() sees a
	 * negative count; a busy poller's rrdma_shim_qp_poll_get() came
	 * under the connection's lock, before the QP was taken away), then
	 * the wait for those held: a busy poller polls no longer than a
	 * synchronous operation waits, an IOPOLL poller for one poll and at
	 * most 1 ms of sleep (the drain's completions wake it).  Waiting for
	 * none first would livelock with an IOPOLL poller that takes its
	 * reference again at once, for a command that only the flush after
	 * this destroy completes.
	 */
	atomic_add(INT_MIN, &q->pollers);
	wait_var_event(&q->pollers, atomic_read(&q->pollers) == INT_MIN);
	rdma_destroy_qp(q->id);
	ib_free_cq(q->rcq);
	rrdma_scq_destroy(q);
	/* After the QP: no READ can place into a sink any more. */
	sinks = rrdma_qp_free_sinks(q);
	mutex_destroy(&q->sinks_lock);
	ib_dma_unmap_single(dev, q->fence_dma, RRDMA_SHIM_FENCE_LEN,
			    DMA_FROM_DEVICE);
	rrdma_qp_free_bufs(q);
	kfree(q->ops);
	kfree(q->fence);
	bitmap_free(q->send_busy);
	rrdma_shim_qp_unref(q);
	return sinks;
}

/*
 * A poll reference: @q is not destroyed until it is put.  The caller keeps
 * @q alive while it takes one (the connection's lock, under which the
 * teardown takes the QP away).
 */
void rrdma_shim_qp_poll_get(struct rrdma_shim_qp *q)
{
	atomic_inc(&q->pollers);
}

/*
 * A poll reference unless @q is being destroyed: for a caller that sees @q
 * only through an RCU-protected pointer (an IOPOLL command's).
 */
bool rrdma_shim_qp_poll_tryget(struct rrdma_shim_qp *q)
{
	return atomic_inc_unless_negative(&q->pollers);
}

void rrdma_shim_qp_poll_put(struct rrdma_shim_qp *q)
{
	/*
	 * The last one out while the destroy waits (its bias, INT_MIN, is
	 * left).  wake_up_var() only hashes the address: @q may be gone
	 * already.
	 */
	if (atomic_dec_return(&q->pollers) == INT_MIN)
		wake_up_var(&q->pollers);
}

/* References of the struct itself (@refs): see struct rrdma_shim_qp. */
void rrdma_shim_qp_ref(struct rrdma_shim_qp *q)
{
	refcount_inc(&q->refs);
}

void rrdma_shim_qp_unref(struct rrdma_shim_qp *q)
{
	if (refcount_dec_and_test(&q->refs)) {
		kfree(q->dma_sges);
		kfree_rcu(q, rcu);
	}
}
