/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The verbs side of the hostile RoCE peer (rust/selftest/src/hostile/
 * verbs/): a real RC queue pair on rxe, connected through librdmacm,
 * from which the Rust side sends what it wants: control messages as
 * Sends, RDMA Writes and Reads with any key.
 *
 * Verbs posting and polling are static inline functions of rdma-core's
 * headers, so they live in C, behind a narrow interface; the selftest is
 * a static binary, so rdma-core's static libraries and the rxe provider
 * are linked in (RDMA_STATIC_PROVIDERS).
 *
 * Buffers: one registration, cut into VP_SLOT-byte slots: VP_RECV receive
 * slots (each posted once connected, reposted when polled), then VP_SEND
 * slots for what this side sends, writes or reads into.
 *
 * verbs_peer_cm.c makes, accepts and ends connections; verbs_peer_io.c
 * posts and polls on them. This header is what they share.
 */
#ifndef VERBS_PEER_H
#define VERBS_PEER_H

#define RDMA_STATIC_PROVIDERS rxe
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <stdint.h>
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

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* verbs_peer_cm.c */
struct vp *vp_connect(uint32_t ip, uint16_t port, const uint8_t *private_data,
		      uint8_t private_data_len, int timeout_ms,
		      struct vp_result *r);
struct vp *vp_listen(uint16_t port, struct vp_result *r);
struct vp *vp_accept(struct vp *l, const uint8_t *private_data,
		     uint8_t private_data_len, int timeout_ms,
		     struct vp_result *r);
int vp_disconnected(struct vp *v, int timeout_ms);
void vp_destroy(struct vp *v);

/* verbs_peer_io.c */
int vp_post_recv(struct vp *v, uint32_t slot);
int vp_send(struct vp *v, const uint8_t *data, uint32_t len);
int vp_write(struct vp *v, const uint8_t *data, uint32_t len, uint64_t raddr,
	     uint32_t rkey);
int vp_read(struct vp *v, uint32_t len, uint64_t raddr, uint32_t rkey);
void vp_slot_copy(struct vp *v, uint32_t slot, uint8_t *out, uint32_t len);
int vp_poll(struct vp *v, int timeout_ms, struct vp_wc *wc);

#endif /* VERBS_PEER_H */
