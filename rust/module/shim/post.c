// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: posting a queue pair's work requests (flattened by Rust,
 * struct rrdma_shim_wr), and the READ sinks of an iWARP queue pair that
 * they use.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

#include "qp_internal.h"
#include "mr.h"

/*
 * Work requests without a Rust completion context: registrations.  Those
 * of exports are signaled (Rust counts them), those of the data path are
 * not and complete here only on error.  On the send CQ's work item,
 * process context (an atomic poll leaves them there, cq.c).
 */
static void quiet_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rrdma_shim_qp *q = cq->cq_context;

	rrdma_rust_quiet_done(q->owner, wc->status);
}

static struct ib_cqe quiet_cqe = { .done = quiet_done };

static int access_flags(u32 a)
{
	int f = 0;

	if (a & RRDMA_SHIM_ACCESS_LOCAL_WRITE)
		f |= IB_ACCESS_LOCAL_WRITE;
	if (a & RRDMA_SHIM_ACCESS_REMOTE_READ)
		f |= IB_ACCESS_REMOTE_READ;
	if (a & RRDMA_SHIM_ACCESS_REMOTE_WRITE)
		f |= IB_ACCESS_REMOTE_WRITE;
	return f;
}

union rrdma_any_wr {
	struct ib_send_wr send;
	struct ib_rdma_wr rdma;
	struct ib_reg_wr reg;
};

/*
 * Maps READ sink @k over the @n entries of @out, with iova @iova, and a
 * fresh key: the last READ into this sink invalidated the old one.
 */
static int sink_set(struct rrdma_shim_sink *k, struct scatterlist *out,
		    u32 n, u64 iova)
{
	int mapped = ib_map_mr_sg(k->mr, out, n, NULL, PAGE_SIZE);

	if (mapped != n)
		return mapped < 0 ? mapped : -EINVAL;
	k->mr->iova = iova;
	ib_update_fast_reg_key(k->mr, ib_inc_rkey(k->mr->rkey));
	return 0;
}

/*
 * Maps READ sink @k over exactly @s->len bytes: at @s->local_addr of the
 * region, through the DMA mapping of chunk @s->mr (its iova is the
 * chunk's region offset), or, without @s->mr, over the QP's scratch
 * buffer (a fence).  The sink's iova is the region offset (the scratch
 * buffer's offset in its page): the peer sees no DMA address.
 */
static int sink_map(struct rrdma_shim_qp *q, struct rrdma_shim_sink *k,
		    const struct rrdma_shim_wr *s)
{
	struct scatterlist *sg, *out = q->sink_sg;
	u64 iova, off, end, pos = 0;
	u32 n = 0;
	int i;

	if (!s->len)
		return -EINVAL;
	if (!s->mr) {
		sg_dma_address(&out[0]) = q->fence_dma;
		sg_dma_len(&out[0]) = min_t(u32, s->len, RRDMA_SHIM_FENCE_LEN);
		n = 1;
		iova = offset_in_page(q->fence_dma);
	} else {
		off = s->local_addr - s->mr->mr->iova;
		end = off + s->len;
		if (s->local_addr < s->mr->mr->iova || end > s->mr->mr->length)
			return -EINVAL;
		for_each_sgtable_dma_sg(&s->mr->sgt, sg, i) {
			u64 a = pos, b = pos + sg_dma_len(sg);

			pos = b;
			if (b <= off)
				continue;
			if (a >= end)
				break;
			if (n == q->sink_nsg)
				return -EINVAL;
			sg_dma_address(&out[n]) =
				sg_dma_address(sg) + (max(a, off) - a);
			sg_dma_len(&out[n]) = min(b, end) - max(a, off);
			n++;
		}
		iova = s->local_addr;
	}
	lockdep_assert_held(&q->lock);
	return sink_set(k, out, n, iova);
}

/*
 * Maps READ sink @k over bytes @s->local_addr to @s->local_addr + @s->len
 * of a disk request's DMA segments (@s->segs, @s->lkey of them): one fast
 * registration over their pages, which Rust checked have no gap and fit
 * a sink (abi::ops::sink_ranges); the request holds the mapping until the
 * READ completes.  The sink's iova keeps the first byte's offset in its
 * page (an RNIC's first-byte offset) and is otherwise the range's offset
 * in the request: the peer sees no DMA address.
 */
static int sink_map_dma(struct rrdma_shim_qp *q, struct rrdma_shim_sink *k,
			const struct rrdma_shim_wr *s)
{
	const struct rrdma_shim_dma_seg *seg = s->segs;
	struct scatterlist *out = q->sink_sg;
	u64 off = s->local_addr, end = off + s->len, pos = 0;
	u32 i, n = 0;

	if (!s->len || !seg)
		return -EINVAL;
	for (i = 0; i < s->lkey && pos < end; i++) {
		u64 a = pos, b = pos + seg[i].len;

		pos = b;
		if (b <= off)
			continue;
		if (n == q->sink_nsg)
			return -EINVAL;
		sg_dma_address(&out[n]) = seg[i].addr + (max(a, off) - a);
		sg_dma_len(&out[n]) = min(b, end) - max(a, off);
		n++;
	}
	if (pos < end || !n)
		return -EINVAL;
	lockdep_assert_held(&q->lock);
	return sink_set(k, out, n, (off & PAGE_MASK) |
				   offset_in_page(sg_dma_address(&out[0])));
}

/*
 * Fills @out with the SGEs of READ_DMA/WRITE_DMA @s: @s->len bytes of its
 * @s->lkey segments from byte @s->local_addr of the first on, with the
 * local DMA key of the QP's PD (the one Rust mapped them with); returns
 * how many (empty segments give none), or -EINVAL if they are more than
 * the QP gathers (or a READ scatters into: @q->dma_sge_rd) or do
 * not hold @s->len bytes.  Under @q->lock.
 */
static int dma_sges(struct rrdma_shim_qp *q, const struct rrdma_shim_wr *s,
		    struct ib_sge *out)
{
	const struct rrdma_shim_dma_seg *seg = s->segs;
	u64 off = s->local_addr;
	u32 left = s->len, i, n = 0;

	if (!seg || !s->len || !s->lkey || s->lkey > q->dma_sge ||
	    (s->opcode == RRDMA_SHIM_WR_READ_DMA && s->lkey > q->dma_sge_rd))
		return -EINVAL;
	for (i = 0; i < s->lkey && left; i++) {
		u32 take;

		if (off > seg[i].len)
			return -EINVAL;
		take = min_t(u64, seg[i].len - off, left);
		if (take) {
			out[n].addr = seg[i].addr + off;
			out[n].length = take;
			out[n].lkey = q->pd->local_dma_lkey;
			n++;
		}
		left -= take;
		off = 0;
	}
	return left ? -EINVAL : n;
}

/*
 * Posts @n work requests in order, under @lock (irqsave); never sleeps.
 * Rust posts in process context under a path's lock, and from a fence's
 * completion (its open group's fence) under @poll_lock: in softirq, or in
 * a polling task with softirqs off.
 */
int rrdma_shim_post(struct rrdma_shim_qp *q, const struct rrdma_shim_wr *wrs,
		    u32 n, u32 *posted)
{
	union rrdma_any_wr w[RRDMA_POST_CHUNK];
	struct ib_sge sge[RRDMA_POST_CHUNK];
	const struct ib_send_wr *bad;
	unsigned long flags;
	u32 done = 0;
	int ret = 0;

	spin_lock_irqsave(&q->lock, flags);
	if (q->draining)
		ret = -ENOTCONN;
	while (!ret && done < n) {
		u32 k, m = min_t(u32, n - done, RRDMA_POST_CHUNK);

		memset(w, 0, sizeof(w[0]) * m);
		for (k = 0; k < m; k++) {
			const struct rrdma_shim_wr *s = &wrs[done + k];
			struct ib_send_wr *wr = &w[k].send;
			struct rrdma_shim_sink *sink = NULL;

			if (s->opcode == RRDMA_SHIM_WR_SINK_REG ||
			    s->opcode == RRDMA_SHIM_WR_SINK_REG_DMA ||
			    s->opcode == RRDMA_SHIM_WR_SINK_READ) {
				if (s->sink >= q->nsinks) {
					ret = -EINVAL;
					goto out;
				}
				sink = &q->sinks[s->sink];
			}

			if (s->slot < q->nops) {
				wr->wr_cqe = &q->ops->slot[s->slot].cqe;
			} else if (s->slot == RRDMA_SHIM_COPIED_SLOT) {
				wr->wr_cqe = &rrdma_qp_copied_cqe;
			} else if (s->slot == RRDMA_SHIM_NO_SLOT) {
				wr->wr_cqe = &quiet_cqe;
			} else {
				/*
				 * A slot this queue pair does not have: its
				 * completion would be lost.  Rust sizes its
				 * slots as the shim's (a bug if not).
				 */
				WARN_ON_ONCE(1);
				ret = -EINVAL;
				goto out;
			}
			if (s->signaled)
				wr->send_flags = IB_SEND_SIGNALED;
			switch (s->opcode) {
			case RRDMA_SHIM_WR_REG:
				wr->opcode = IB_WR_REG_MR;
				w[k].reg.mr = s->mr->mr;
				w[k].reg.key = s->mr->mr->rkey;
				w[k].reg.access = access_flags(s->access);
				break;
			case RRDMA_SHIM_WR_SINK_REG:
			case RRDMA_SHIM_WR_SINK_REG_DMA:
				ret = s->opcode == RRDMA_SHIM_WR_SINK_REG ?
					      sink_map(q, sink, s) :
					      sink_map_dma(q, sink, s);
				if (ret)
					goto out;
				wr->opcode = IB_WR_REG_MR;
				w[k].reg.mr = sink->mr;
				w[k].reg.key = sink->mr->rkey;
				w[k].reg.access = IB_ACCESS_LOCAL_WRITE |
						  IB_ACCESS_REMOTE_WRITE;
				break;
			case RRDMA_SHIM_WR_SINK_READ:
				/*
				 * Into the sink as its SINK_REG just mapped it.
				 * A fence's (one byte into the scratch buffer)
				 * response follows the placement of every
				 * earlier WRITE on this connection (iWARP
				 * completes a WRITE once sent).
				 */
				wr->opcode = IB_WR_RDMA_READ_WITH_INV;
				wr->ex.invalidate_rkey = sink->mr->lkey;
				sge[k].addr = sink->mr->iova;
				sge[k].length = sink->mr->length;
				sge[k].lkey = sink->mr->lkey;
				wr->sg_list = &sge[k];
				wr->num_sge = 1;
				w[k].rdma.remote_addr = s->remote_addr;
				w[k].rdma.rkey = s->rkey;
				break;
			case RRDMA_SHIM_WR_READ:
			case RRDMA_SHIM_WR_WRITE:
				wr->opcode = s->opcode == RRDMA_SHIM_WR_READ ?
					     IB_WR_RDMA_READ : IB_WR_RDMA_WRITE;
				sge[k].addr = s->local_addr;
				sge[k].length = s->len;
				sge[k].lkey = s->lkey;
				wr->sg_list = &sge[k];
				/* An empty READ (a RoCE fence) names no memory. */
				wr->num_sge = s->len ? 1 : 0;
				w[k].rdma.remote_addr = s->remote_addr;
				w[k].rdma.rkey = s->rkey;
				break;
			case RRDMA_SHIM_WR_READ_DMA:
			case RRDMA_SHIM_WR_WRITE_DMA:
				wr->opcode = s->opcode == RRDMA_SHIM_WR_READ_DMA ?
					     IB_WR_RDMA_READ : IB_WR_RDMA_WRITE;
				wr->sg_list = &q->dma_sges[k * q->dma_sge];
				ret = dma_sges(q, s, wr->sg_list);
				if (ret < 0)
					goto out;
				wr->num_sge = ret;
				ret = 0;
				w[k].rdma.remote_addr = s->remote_addr;
				w[k].rdma.rkey = s->rkey;
				break;
			default:
				ret = -EINVAL;
				goto out;
			}
			if (k + 1 < m)
				wr->next = &w[k + 1].send;
		}
		bad = NULL;
		ret = ib_post_send(q->id->qp, &w[0].send, &bad);
		if (ret) {
			/* Work requests before @bad were posted. */
			for (k = 0; k < m && bad && &w[k].send != bad; k++)
				done++;
			break;
		}
		done += m;
	}
out:
	spin_unlock_irqrestore(&q->lock, flags);
	*posted = done;
	return ret;
}

/* Frees @n sinks of @sinks (NULL: none) and @sg. */
static void free_sink_array(struct rrdma_shim_sink *sinks, u32 n,
			    struct scatterlist *sg)
{
	u32 i;

	for (i = 0; sinks && i < n; i++) {
		if (!IS_ERR_OR_NULL(sinks[i].mr))
			ib_dereg_mr(sinks[i].mr);
	}
	kfree(sinks);
	kfree(sg);
}

/* Frees the QP's sinks; returns how many there were. */
u32 rrdma_qp_free_sinks(struct rrdma_shim_qp *q)
{
	u32 n = q->nsinks;

	free_sink_array(q->sinks, n, q->sink_sg);
	q->sinks = NULL;
	q->sink_sg = NULL;
	q->nsinks = 0;
	return n;
}

/*
 * The QP's READ sinks (iWARP), as rrdma_shim_qp_create() sized them: the
 * first @data_sinks of up to @sink_pages pages each (over region memory),
 * the others of one page (over the scratch buffer, for fences).  They are
 * allocated at the first operation that needs one, not with the QP: a
 * connection that only exports (or a lane that carries nothing) holds
 * none of the device's registrations for them.  Process context, may
 * sleep, no rrdma lock held (@sinks_lock is the outermost); the caller
 * keeps @q from being destroyed (a poll reference).
 * Returns 1 if they were allocated now, 0 if they were already (or the QP
 * has none), or -errno.
 */
int rrdma_shim_qp_sinks_alloc(struct rrdma_shim_qp *q)
{
	u32 i, n = q->sinks_max, pages = q->sink_pages;
	struct rrdma_shim_sink *sinks;
	struct scatterlist *sg;
	int ret = 0;

	mutex_lock(&q->sinks_lock);
	if (q->nsinks || !n)
		goto out;
	sinks = kcalloc(n, sizeof(*sinks), GFP_KERNEL);
	sg = kcalloc(pages, sizeof(*sg), GFP_KERNEL);
	if (!sinks || !sg) {
		ret = -ENOMEM;
		goto fail;
	}
	sg_init_table(sg, pages);
	for (i = 0; i < n; i++) {
		struct ib_mr *mr;

		mr = ib_alloc_mr(q->pd, IB_MR_TYPE_MEM_REG,
				 i < q->data_sinks ? pages : 1);
		if (IS_ERR(mr)) {
			ret = PTR_ERR(mr);
			goto fail;
		}
		sinks[i].mr = mr;
	}
	/* Posting reads them under @lock. */
	spin_lock_irq(&q->lock);
	q->sinks = sinks;
	q->sink_sg = sg;
	q->sink_nsg = pages;
	q->nsinks = n;
	spin_unlock_irq(&q->lock);
	ret = 1;
	goto out;
fail:
	free_sink_array(sinks, n, sg);
out:
	mutex_unlock(&q->sinks_lock);
	return ret;
}

/*
 * SGEs a WRITE_DMA may gather on the QP, or a READ_DMA (@read) scatter into
 * (1 to RRDMA_SHIM_DMA_SGE).
 */
u32 rrdma_shim_qp_dma_sge(struct rrdma_shim_qp *q, bool read)
{
	return read ? q->dma_sge_rd : q->dma_sge;
}

/* Whether the QP's sinks are allocated (or it has none). */
bool rrdma_shim_qp_has_sinks(struct rrdma_shim_qp *q)
{
	return READ_ONCE(q->nsinks) || !q->sinks_max;
}
