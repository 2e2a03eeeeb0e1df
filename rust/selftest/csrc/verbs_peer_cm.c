// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The hostile RoCE peer's connections (see verbs_peer.h): connected with
 * any private data, listened for and accepted, each with its queue pair
 * and buffers, and ended, through librdmacm's events.
 */
#include "verbs_peer.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

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
		if (vp_post_recv(v, i))
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
