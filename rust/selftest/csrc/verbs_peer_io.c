// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The hostile RoCE peer's data path (see verbs_peer.h): receives posted
 * into their slots and reposted, Sends, RDMA Writes and Reads from the
 * send slots, and the polling of their completions.
 */
#include "verbs_peer.h"

#include <errno.h>
#include <string.h>

int vp_post_recv(struct vp *v, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(v->buf + (uint64_t)slot * VP_SLOT),
		.length = VP_SLOT,
		.lkey = v->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = VP_RECV_BIT | slot,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad;

	return ibv_post_recv(v->id->qp, &wr, &bad);
}

static int post_send(struct vp *v, enum ibv_wr_opcode op, uint32_t slot,
		     uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(v->buf + (uint64_t)(VP_RECV + slot) * VP_SLOT),
		.length = len,
		.lkey = v->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = slot,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};
	struct ibv_send_wr *bad;

	return -ibv_post_send(v->id->qp, &wr, &bad);
}

/* The next send slot, its bytes set to data (len <= VP_SLOT). */
static uint32_t fill_slot(struct vp *v, const uint8_t *data, uint32_t len)
{
	uint32_t slot = v->next_send++ % VP_SEND;

	if (len)
		memcpy(v->buf + (uint64_t)(VP_RECV + slot) * VP_SLOT, data,
		       len);
	return slot;
}

/* Posts a Send of data (len <= VP_SLOT bytes, 0 allowed): 0 or -errno. */
int vp_send(struct vp *v, const uint8_t *data, uint32_t len)
{
	if (len > VP_SLOT)
		return -EINVAL;
	return post_send(v, IBV_WR_SEND, fill_slot(v, data, len), len, 0, 0);
}

/* Posts an RDMA Write of data to raddr under rkey. */
int vp_write(struct vp *v, const uint8_t *data, uint32_t len, uint64_t raddr,
	     uint32_t rkey)
{
	if (len > VP_SLOT)
		return -EINVAL;
	return post_send(v, IBV_WR_RDMA_WRITE, fill_slot(v, data, len), len,
			 raddr, rkey);
}

/*
 * Posts an RDMA Read of len bytes at raddr under rkey into a send slot:
 * the slot (its completion's wr_id), or a negative errno.
 */
int vp_read(struct vp *v, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	uint32_t slot;
	int err;

	if (len > VP_SLOT)
		return -EINVAL;
	slot = fill_slot(v, NULL, 0);
	err = post_send(v, IBV_WR_RDMA_READ, slot, len, raddr, rkey);
	return err ? err : (int)slot;
}

/* Copies the first len bytes (<= VP_SLOT) of send slot 'slot' to out. */
void vp_slot_copy(struct vp *v, uint32_t slot, uint8_t *out, uint32_t len)
{
	memcpy(out, v->buf + (uint64_t)(VP_RECV + slot % VP_SEND) * VP_SLOT,
	       len < VP_SLOT ? len : VP_SLOT);
}

/*
 * Waits up to timeout_ms for a work completion: 1 with it in wc (a
 * receive's bytes copied, its slot posted again), 0 if none came, or a
 * negative errno.
 */
int vp_poll(struct vp *v, int timeout_ms, struct vp_wc *wc)
{
	int64_t end = now_ms() + timeout_ms;
	struct timespec pause = { .tv_nsec = 200000 };
	struct ibv_wc c;
	uint32_t slot;
	int n;

	for (;;) {
		n = ibv_poll_cq(v->cq, 1, &c);
		if (n < 0)
			return -EIO;
		if (n)
			break;
		if (now_ms() >= end)
			return 0;
		nanosleep(&pause, NULL);
	}
	wc->wr_id = c.wr_id;
	wc->status = c.status;
	wc->opcode = c.opcode;
	wc->byte_len = c.byte_len;
	wc->recv = !!(c.wr_id & VP_RECV_BIT);
	if (wc->recv && c.status == IBV_WC_SUCCESS) {
		slot = (uint32_t)c.wr_id;
		memcpy(wc->data, v->buf + (uint64_t)slot * VP_SLOT,
		       c.byte_len < VP_SLOT ? c.byte_len : VP_SLOT);
		if (vp_post_recv(v, slot))
			return -EIO;
	}
	return 1;
}
