// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: rdma_cm identifiers (create, resolve, listen, connect,
 * accept, reject, disconnect, destroy) and their event handlers, which
 * forward to the Rust entry points.
 *
 * Policy (state machines, what to connect to) lives in Rust; this file
 * only converts addresses and calls rdma_cm, whose calls may sleep (they
 * allocate and take rdma_cm's mutexes): Rust calls them in process
 * context.  rrdma_shim_cm_destroy_id() waits for the id's running handler:
 * Rust calls it outside its locks, never from that id's handler.  The
 * handlers run on rdma_cm's work queues with the id's handler mutex held.
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/nsproxy.h>
#include <linux/sched/mm.h>
#include <linux/string.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>

#include "rrdma_shim.h"

/* Outstanding RDMA READs each side allows; devices may allow fewer. */
#define RRDMA_RD_ATOMS 16

/*
 * Local ACK timeout of RC QPs on InfiniBand and RoCE, as 4.096 us * 2^n:
 * 19 is about 2.1 s, so a peer gets 7 retries x 2.1 s before the QP
 * fails (rdma_cm's default on RoCE is 17, 0.5 s: an emulated or busy
 * responder that stalls for 4 s then resets a healthy connection).
 */
#define RRDMA_ACK_TIMEOUT 19

static_assert(sizeof(struct rrdma_shim_addr) == 24);

/* ---- addresses ---- */

void rrdma_shim_addr_to_sockaddr(const struct rrdma_shim_addr *a,
				 struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		memcpy(&in->sin_addr, a->addr, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(a->port);
		in6->sin6_scope_id = a->scope_id;
		memcpy(&in6->sin6_addr, a->addr, 16);
	}
}

static void from_sockaddr(const struct sockaddr *sa, struct rrdma_shim_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		a->family = AF_INET;
		a->port = ntohs(in->sin_port);
		memcpy(a->addr, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		a->family = AF_INET6;
		a->port = ntohs(in6->sin6_port);
		a->scope_id = in6->sin6_scope_id;
		memcpy(a->addr, &in6->sin6_addr, 16);
	}
}

/* ---- rdma_cm ---- */

static bool carries_private_data(enum rdma_cm_event_type e)
{
	return e == RDMA_CM_EVENT_CONNECT_REQUEST ||
	       e == RDMA_CM_EVENT_ESTABLISHED ||
	       e == RDMA_CM_EVENT_CONNECT_RESPONSE;
}

/* Every event of a connection's id goes to the owning Rust Conn. */
static int conn_event(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	const void *pdata = NULL;
	u8 len = 0;

	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		pdata = rdma_consumer_reject_data(id, ev, &len);
	} else if (carries_private_data(ev->event)) {
		pdata = ev->param.conn.private_data;
		len = ev->param.conn.private_data_len;
	}
	if (!pdata)
		len = 0;
	return rrdma_rust_conn_event(id->context, id, ev->event, ev->status,
				     pdata, len);
}

/*
 * A listening id's event.  A connect request arrives on a new child id
 * that inherits the listener's handler and context; once Rust adopts the
 * child, it gets the connection handler and the Conn as context.
 */
static int listen_event(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	void *conn = NULL;
	int ret;

	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return rrdma_rust_listen_event(id->context, id, ev->event);
	ret = rrdma_rust_listen_request(id->context, id,
					ev->param.conn.private_data,
					ev->param.conn.private_data_len,
					ev->param.conn.initiator_depth,
					ev->param.conn.responder_resources,
					&conn);
	if (ret)
		return ret; /* non-zero: the CM destroys the child */
	id->context = conn;
	id->event_handler = conn_event;
	return 0;
}

/*
 * A listener's handler: Rust's accept path allocates (queue pairs, CQs,
 * buffers) under locks a disk's queue_rq may take.  Reclaim's I/O from
 * there could be that disk's swap or writeback, stuck behind the lock: no
 * allocation there may start I/O (memalloc_noio).  A connection's own
 * events enter that scope in Rust (Conn::scoped, with the memory
 * reserves for a disk's connection).
 */
static int rrdma_listen_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	unsigned int noio = memalloc_noio_save();
	int ret = listen_event(id, ev);

	memalloc_noio_restore(noio);
	return ret;
}

int rrdma_shim_cm_create(void *owner, bool listener, struct rdma_cm_id **out)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(current->nsproxy->net_ns,
			    listener ? rrdma_listen_handler : conn_event,
			    owner, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	*out = id;
	return 0;
}

int rrdma_shim_cm_resolve_addr(struct rdma_cm_id *id,
			       const struct rrdma_shim_addr *dst, u32 timeout_ms)
{
	struct sockaddr_storage ss;

	rrdma_shim_addr_to_sockaddr(dst, &ss);
	return rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, timeout_ms);
}

int rrdma_shim_cm_bind_listen(struct rdma_cm_id *id,
			      const struct rrdma_shim_addr *src, u32 backlog)
{
	struct sockaddr_storage ss;
	int ret;

	rrdma_shim_addr_to_sockaddr(src, &ss);
	ret = rdma_bind_addr(id, (struct sockaddr *)&ss);
	if (!ret)
		ret = rdma_listen(id, backlog);
	return ret;
}

int rrdma_shim_cm_resolve_route(struct rdma_cm_id *id, u32 timeout_ms)
{
	return rdma_resolve_route(id, timeout_ms);
}

static void conn_param(struct rdma_cm_id *id, struct rdma_conn_param *p,
		       const void *pdata, u8 len, u8 peer_initiator,
		       u8 peer_responder)
{
	const struct ib_device_attr *attrs = &id->device->attrs;

	memset(p, 0, sizeof(*p));
	p->private_data = pdata;
	p->private_data_len = len;
	p->responder_resources = min3(RRDMA_RD_ATOMS, attrs->max_qp_rd_atom,
				      (int)peer_initiator);
	p->initiator_depth = min3(RRDMA_RD_ATOMS, attrs->max_qp_init_rd_atom,
				  (int)peer_responder);
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

int rrdma_shim_cm_connect(struct rdma_cm_id *id, const void *pdata, u8 len)
{
	struct rdma_conn_param p;

	if (rdma_protocol_roce(id->device, id->port_num) ||
	    rdma_protocol_ib(id->device, id->port_num))
		rdma_set_ack_timeout(id, RRDMA_ACK_TIMEOUT);
	conn_param(id, &p, pdata, len, RRDMA_RD_ATOMS, RRDMA_RD_ATOMS);
	return rdma_connect_locked(id, &p);
}

int rrdma_shim_cm_accept(struct rdma_cm_id *id, const void *pdata, u8 len,
			 u8 peer_initiator, u8 peer_responder)
{
	struct rdma_conn_param p;

	if (rdma_protocol_roce(id->device, id->port_num) ||
	    rdma_protocol_ib(id->device, id->port_num))
		rdma_set_ack_timeout(id, RRDMA_ACK_TIMEOUT);
	conn_param(id, &p, pdata, len, peer_initiator, peer_responder);
	return rdma_accept(id, &p);
}

int rrdma_shim_cm_reject(struct rdma_cm_id *id, const void *pdata, u8 len)
{
	return rdma_reject(id, pdata, len, IB_CM_REJ_CONSUMER_DEFINED);
}

int rrdma_shim_cm_disconnect(struct rdma_cm_id *id)
{
	return rdma_disconnect(id);
}

void rrdma_shim_cm_destroy_id(struct rdma_cm_id *id)
{
	/* Waits for the id's running handler. */
	rrdma_shim_assert_unlocked("cm_id destroyed");
	rdma_destroy_id(id);
}

struct ib_device *rrdma_shim_cm_device(struct rdma_cm_id *id)
{
	return id->device;
}

void rrdma_shim_cm_peer(struct rdma_cm_id *id, struct rrdma_shim_addr *out)
{
	from_sockaddr((struct sockaddr *)&id->route.addr.dst_addr, out);
}
