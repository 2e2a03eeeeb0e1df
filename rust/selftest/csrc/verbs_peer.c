// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The verbs side of the hostile RoCE peer (rust/selftest/src/hostile/
 * verbs.rs): a real RC queue pair on rxe, connected through librdmacm,
 * from which the Rust side sends what it wants: control messages as
 * Sends, RDMA Writes and Reads with any key.
 *
 * Verbs posting and polling are static inline functions of rdma-core's
 * headers, so they live here, behind a narrow interface; the selftest is
 * a static binary, so rdma-core's static libraries and the rxe provider
 * are linked in (RDMA_STATIC_PROVIDERS).
 *
 * Buffers: one registration, cut into VP_SLOT-byte slots: VP_RECV receive
 * slots (each posted once connected, reposted when polled), then VP_SEND
 * slots for what this side sends, writes or reads into.
 */
#define RDMA_STATIC_PROVIDERS rxe
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VP_SLOT 1024u
#define VP_RECV 512u
#define VP_SEND 512u
/* wr_id of a receive: its slot with this bit; of a send: its slot. */
#define VP_RECV_BIT (1ull << 32)

struct vp {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t next_send;
	int disconnected;
};

/* What a connection attempt ended with (see vp_connect). */
struct vp_result {
	int32_t err;		/* 0 or a negative errno of this side */
	uint32_t event;		/* the last rdma_cm event */
	int32_t status;		/* its status */
	uint8_t private_data_len;
	uint8_t private_data[255];
};

/* One work completion, with a receive's first bytes. */
struct vp_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t recv;
	uint8_t data[VP_SLOT];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Waits up to timeout_ms for the next rdma_cm event, acknowledges it: 0,
 * or a negative errno (-ETIMEDOUT: none came).
 */
static int next_event(struct vp *v, int timeout_ms, struct vp_result *r)
{
	struct pollfd p = { .fd = v->ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	int n;

	n = poll(&p, 1, timeout_ms);
	if (n <= 0)
		return n ? -errno : -ETIMEDOUT;
	if (rdma_get_cm_event(v->ch, &e))
		return -errno;
	r->event = e->event;
	r->status = e->status;
	r->private_data_len = 0;
	if (e->param.conn.private_data && e->param.conn.private_data_len) {
		r->private_data_len = e->param.conn.private_data_len;
		memcpy(r->private_data, e->param.conn.private_data,
		       r->private_data_len);
	}
	if (e->event == RDMA_CM_EVENT_DISCONNECTED)
		v->disconnected = 1;
	rdma_ack_cm_event(e);
	return 0;
}

static int expect(struct vp *v, enum rdma_cm_event_type want, int timeout_ms,
		  struct vp_result *r)
{
	int err = next_event(v, timeout_ms, r);

	if (err)
		return err;
	return r->event == (uint32_t)want ? 0 : -EPROTO;
}

static int post_recv(struct vp *v, uint32_t slot)
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

void vp_destroy(struct vp *v)
{
	if (!v)
		return;
	if (v->id) {
		if (v->id->qp) {
			rdma_disconnect(v->id);
			rdma_destroy_qp(v->id);
		}
		rdma_destroy_id(v->id);
	}
	if (v->mr)
		ibv_dereg_mr(v->mr);
	if (v->cq)
		ibv_destroy_cq(v->cq);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	if (v->ch)
		rdma_destroy_event_channel(v->ch);
	free(v->buf);
	free(v);
}

static int setup_qp(struct vp *v)
{
	size_t len = (size_t)(VP_RECV + VP_SEND) * VP_SLOT;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = VP_SEND,
			.max_recv_wr = VP_RECV,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	uint32_t i;

	v->pd = ibv_alloc_pd(v->id->verbs);
	if (!v->pd)
		return -ENOMEM;
	v->cq = ibv_create_cq(v->id->verbs, VP_RECV + VP_SEND, NULL, NULL, 0);
	if (!v->cq)
		return -ENOMEM;
	v->buf = calloc(1, len);
	if (!v->buf)
		return -ENOMEM;
	v->mr = ibv_reg_mr(v->pd, v->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ);
	if (!v->mr)
		return -ENOMEM;
	qa.send_cq = v->cq;
	qa.recv_cq = v->cq;
	if (rdma_create_qp(v->id, v->pd, &qa))
		return -errno;
	for (i = 0; i < VP_RECV; i++)
		if (post_recv(v, i))
			return -EIO;
	return 0;
}

/*
 * A new side with its event channel and rdma_cm id (the static rxe
 * provider registered first, by the macro in verbs.h), or NULL with r
 * saying why.
 */
static struct vp *new_side(struct vp_result *r)
{
	struct ibv_device **devs;
	struct vp *v;
	int n;

	memset(r, 0, sizeof(*r));
	devs = ibv_get_device_list(&n);
	if (devs)
		ibv_free_device_list(devs);
	v = calloc(1, sizeof(*v));
	if (!v) {
		r->err = -ENOMEM;
		return NULL;
	}
	v->ch = rdma_create_event_channel();
	if (!v->ch || rdma_create_id(v->ch, &v->id, v, RDMA_PS_TCP)) {
		r->err = -(errno ? errno : ENODEV);
		vp_destroy(v);
		return NULL;
	}
	return v;
}

/* Connection parameters of either side: one READ each way, retries. */
static struct rdma_conn_param conn_param(const uint8_t *private_data,
					 uint8_t private_data_len)
{
	struct rdma_conn_param cp = {
		.private_data = private_data,
		.private_data_len = private_data_len,
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};

	return cp;
}

/*
 * Connects to ip:port (network order) with private_data, and waits up to
 * timeout_ms for each step. Returns the connection once established, with
 * the accept's private data in r; NULL otherwise, with r saying why (this
 * side's negative errno, or the last event: a reject and its private
 * data).
 */
struct vp *vp_connect(uint32_t ip, uint16_t port, const uint8_t *private_data,
		      uint8_t private_data_len, int timeout_ms,
		      struct vp_result *r)
{
	struct sockaddr_in dst = {
		.sin_family = AF_INET,
		.sin_port = port,
		.sin_addr.s_addr = ip,
	};
	struct rdma_conn_param cp = conn_param(private_data, private_data_len);
	struct vp *v = new_side(r);

	if (!v)
		return NULL;
	if (rdma_resolve_addr(v->id, NULL, (struct sockaddr *)&dst,
			      timeout_ms)) {
		r->err = -errno;
		goto fail;
	}
	r->err = expect(v, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, r);
	if (r->err)
		goto fail;
	if (rdma_resolve_route(v->id, timeout_ms)) {
		r->err = -errno;
		goto fail;
	}
	r->err = expect(v, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms, r);
	if (r->err)
		goto fail;
	r->err = setup_qp(v);
	if (r->err)
		goto fail;
	if (rdma_connect(v->id, &cp)) {
		r->err = -errno;
		goto fail;
	}
	r->err = next_event(v, timeout_ms, r);
	if (r->err || r->event != RDMA_CM_EVENT_ESTABLISHED) {
		if (!r->err)
			r->err = -ECONNREFUSED;
		goto fail;
	}
	return v;
fail:
	vp_destroy(v);
	return NULL;
}

/*
 * Listens on port (network order) on every address of this host. Returns
 * the listening side (only for vp_accept and vp_destroy), or NULL with r
 * saying why.
 */
struct vp *vp_listen(uint16_t port, struct vp_result *r)
{
	struct sockaddr_in any = {
		.sin_family = AF_INET,
		.sin_port = port,
	};
	struct vp *l = new_side(r);

	if (!l)
		return NULL;
	if (rdma_bind_addr(l->id, (struct sockaddr *)&any) ||
	    rdma_listen(l->id, 4)) {
		r->err = -(errno ? errno : ENODEV);
		vp_destroy(l);
		return NULL;
	}
	return l;
}

/*
 * Accepts the next connect request on l within timeout_ms, with its own
 * queue pair, replying with private_data; returns at once, without
 * waiting for the requester's RTU (what is sent next may reach it before
 * its CM reports the connection established). NULL on failure, with r
 * saying why.
 */
struct vp *vp_accept(struct vp *l, const uint8_t *private_data,
		     uint8_t private_data_len, int timeout_ms,
		     struct vp_result *r)
{
	struct rdma_conn_param cp = conn_param(private_data, private_data_len);
	struct pollfd p = { .fd = l->ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	struct rdma_cm_id *id;
	struct vp *v;

	memset(r, 0, sizeof(*r));
	if (poll(&p, 1, timeout_ms) <= 0) {
		r->err = -ETIMEDOUT;
		return NULL;
	}
	if (rdma_get_cm_event(l->ch, &e)) {
		r->err = -errno;
		return NULL;
	}
	r->event = e->event;
	id = e->id;
	rdma_ack_cm_event(e);
	if (r->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		r->err = -EPROTO;
		return NULL;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		r->err = -ENOMEM;
		return NULL;
	}
	v->id = id;
	/* Its own events (DISCONNECTED) on its own channel. */
	v->ch = rdma_create_event_channel();
	if (!v->ch || rdma_migrate_id(id, v->ch)) {
		r->err = -(errno ? errno : ENOMEM);
		goto fail;
	}
	r->err = setup_qp(v);
	if (r->err)
		goto fail;
	if (rdma_accept(id, &cp)) {
		r->err = -errno;
		goto fail;
	}
	return v;
fail:
	vp_destroy(v);
	return NULL;
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
		if (post_recv(v, slot))
			return -EIO;
	}
	return 1;
}

/*
 * Whether the peer ended the connection (a DISCONNECTED event) within
 * timeout_ms: 1, 0 if not, or a negative errno.
 */
int vp_disconnected(struct vp *v, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	struct vp_result r;
	int64_t left;
	int err;

	while (!v->disconnected) {
		left = end - now_ms();
		if (left <= 0)
			return 0;
		err = next_event(v, (int)left, &r);
		if (err == -ETIMEDOUT)
			return 0;
		if (err)
			return err;
	}
	return 1;
}
