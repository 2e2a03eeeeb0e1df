/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma C shim, internal: struct rrdma_shim_qp and what the files of a
 * queue pair share.  One concern a file:
 *  - qp.c: the QP's lifetime (create, stop, drain, destroy) and its
 *    references;
 *  - cq.c: the send CQ: its event, its softirq poll and its work item,
 *    and the batch of operation completions they hand to Rust;
 *  - poll.c: tasks that poll a send CQ for their own operations (busy
 *    polling, io_uring IOPOLL);
 *  - ctrl.c: control messages (receive buffers, sends);
 *  - post.c: work requests, and the READ sinks they use.
 * Rust sees struct rrdma_shim_qp as opaque (rrdma_shim.h).
 *
 * Policy (what to post, which operation a completion ends) lives in Rust;
 * this file only builds verbs structures whose layout Rust cannot rely on
 * and calls the static-inline verbs.  Every path here is non-blocking
 * except rrdma_shim_qp_drain(), which Rust calls from process context
 * outside its locks, and rrdma_shim_qp_stop(), which may sleep.
 */
#ifndef RRDMA_SHIM_QP_INTERNAL_H
#define RRDMA_SHIM_QP_INTERNAL_H

#include <linux/list.h>
#include <linux/irq_poll.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "rrdma_shim.h"

/* Bytes of a QP's write-fence sink: a fence READs one byte. */
#define RRDMA_SHIM_FENCE_LEN	8

/* Completions polled before a poller lets other work run. */
#define RRDMA_SHIM_POLL_BUDGET	(4 * RRDMA_SHIM_POLL_BATCH)

/*
 * Completion context of an operation slot.  It lives as long as the QP's
 * CQs, so a provider completing a work request twice (siw's flush path can)
 * never makes the RDMA core read freed memory; Rust decides whether the
 * slot still holds an operation.
 */
struct rrdma_shim_op_slot {
	struct ib_cqe cqe;
	struct rrdma_shim_qp *q;
	u32 index;
};

/*
 * A READ sink of an iWARP QP: an MR registered for one READ at a time
 * (RRDMA_SHIM_WR_SINK_REG).
 */
struct rrdma_shim_sink {
	struct ib_mr *mr;
};

/* One control-message buffer and its completion context. */
struct rrdma_shim_ctrl_slot {
	struct ib_cqe cqe;
	struct rrdma_shim_qp *q;
	u32 index;
};

/**
 * struct rrdma_shim_qp - an RC QP with its CQs and control buffers
 * @id:		the connection's cm_id (owns the QP)
 * @pd:		protection domain (the device's)
 * @scq:	send CQ: data work requests and control sends, polled by
 *		@iop in softirq (rrdma_scq_iop_poll()) or @scq_work
 * @rcq:	receive CQ: control messages
 * @owner:	the Rust Conn, passed to every callback
 * @lane:	which of the connection's queue pairs this is (0: its own, which
 *		carries the control messages; a data lane has one receive, whose
 *		flush tells Rust that the QP failed, and no send buffer), passed
 *		with every operation's completion
 * @lock:	protects @draining and @send_busy
 * @draining:	set before the drain: nothing is posted afterwards
 * @abandoned:	creation failed after receives were posted: their
 *		completions, if the provider makes any while the QP and its CQs
 *		are destroyed, are not reported to @owner (the creator may hold
 *		locks the callbacks take)
 * @nrecv:	receive buffers, all posted while the QP lives
 * @nsend:	control send buffers
 * @send_busy:	bitmap of control send buffers in flight
 * @msg_len:	bytes per control buffer
 * @bufs:	(@nrecv + @nsend) * @msg_len bytes, DMA-mapped at @dma
 * @fence:	scratch sink of write fences (SINK_REG without an MR), mapped at
 *		@fence_dma; apart from @bufs so that those stay a power of two
 *		(kmalloc rounds a size up to one: 64 buffers plus one took 64 KiB)
 * @nops:	operation slots
 * @ops:	completion contexts of the operation slots
 * @nsinks:	READ sinks allocated (iWARP only; Rust tells which are free),
 *		0 until the first operation that needs one allocates them
 *		(rrdma_shim_qp_sinks_alloc(); set with @sinks under @lock)
 * @sinks:	the READ sinks
 * @sink_sg:	@sink_nsg entries that map a sink's bytes while it is being
 *		registered (under @lock: ib_map_mr_sg() copies them out)
 * @sinks_max:	READ sinks the QP has once they are allocated
 * @data_sinks:	how many of them map up to @sink_pages pages (the others, fence
 *		sinks, one)
 * @sink_pages:	see @data_sinks
 * @sinks_lock:	serializes the allocation of the sinks; taken with no rrdma
 *		lock held, @lock nests inside
 * @iop:	polls @scq in softirq, scheduled by its event (cq_softirq)
 * @scq_work:	polls @scq on rrdma_shim_comp_wq() while @work_owns: queued
 *		by a poll that found a completion only process context may
 *		handle (left in @carry), or by the event (cq_softirq off)
 * @poll_lock:	held (softirqs off) by whoever polls @scq in atomic context:
 *		@iop, or a task polling for its own operations
 *		(rrdma_shim_qp_poll(), _iopoll()); @work_owns is set and
 *		cleared under it
 * @work_owns:	@scq_work polls @scq (in process context, without
 *		@poll_lock): the others do not, and its event queues the work
 * @ncarry:	completions a poll left to @scq_work, in @carry
 * @carry:	see @ncarry
 * @pollers:	poll references (rrdma_shim_qp_poll_get(), _tryget()):
 *		destroying the QP waits for none to be left, then makes it
 *		negative so that no more can be taken
 * @iopoller:	the task polling @scq for an IOPOLL ring, @iopoll_ring, in
 *		rrdma_shim_qp_iopoll() (set and cleared under @poll_lock)
 * @iopoll_ring: see @iopoller
 * @iopoll_idle_ns: when IOPOLL polls of @scq started to find nothing (0: the
 *		last one found something); after iopoll_spin_us they sleep
 * @iopoll_events: @cq_events when IOPOLL polls last saw it
 * @iopoll_wq:	IOPOLL pollers sleeping until @cq_events changes
 * @cq_events:	events of @scq and polls of @scq_work that found completions
 * @refs:	the QP's own reference, dropped by rrdma_shim_qp_destroy(), and
 *		one per IOPOLL io_uring command that may poll it (shim/uring.c):
 *		the last frees this struct, after an RCU grace period, since an
 *		IOPOLL callback may still read a command's pointer to it
 * @rcu:	frees this struct once no RCU reader sees it
 * @wc:		the poll buffer (of whoever polls: under @poll_lock, or
 *		@scq_work's while @work_owns)
 * @ndone:	operation completions of the current poll, in @done (as @wc:
 *		rrdma_qp_op_done() runs in a poll)
 * @done:	the batch rrdma_rust_ops_done() gets
 * @slots:	one per buffer, receive buffers first
 */
struct rrdma_shim_qp {
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *scq;
	struct ib_cq *rcq;
	void *owner;
	u32 lane;
	spinlock_t lock; /* protects draining and send_busy */
	bool draining;
	bool abandoned;
	u32 nrecv;
	u32 nsend;
	unsigned long *send_busy;
	u32 msg_len;
	void *bufs;
	u64 dma;
	void *fence;
	u64 fence_dma;
	u32 nops;
	struct rrdma_shim_op_slot *ops;
	u32 nsinks;
	struct rrdma_shim_sink *sinks;
	struct scatterlist *sink_sg;
	u32 sink_nsg;
	u32 sinks_max;
	u32 data_sinks;
	u32 sink_pages;
	struct mutex sinks_lock; /* serializes rrdma_shim_qp_sinks_alloc() */
	struct irq_poll iop;
	struct work_struct scq_work;
	spinlock_t poll_lock; /* serializes the polls of scq, see above */
	bool work_owns;
	u32 ncarry;
	struct ib_wc carry[RRDMA_SHIM_POLL_BATCH];
	atomic_t pollers;
	struct task_struct *iopoller;
	const void *iopoll_ring;
	u64 iopoll_idle_ns;
	int iopoll_events;
	wait_queue_head_t iopoll_wq;
	atomic_t cq_events;
	refcount_t refs;
	struct rcu_head rcu;
	struct ib_wc wc[RRDMA_SHIM_POLL_BATCH];
	u32 ndone;
	struct rrdma_shim_done done[RRDMA_SHIM_POLL_BATCH];
	struct rrdma_shim_ctrl_slot slots[];
};

/* ctrl.c */
int rrdma_qp_post_recv_locked(struct rrdma_shim_qp *q, u32 i);
void rrdma_qp_recv_done(struct ib_cq *cq, struct ib_wc *wc);
void rrdma_qp_send_done(struct ib_cq *cq, struct ib_wc *wc);

/* cq.c */
void rrdma_qp_op_done(struct ib_cq *cq, struct ib_wc *wc);
int rrdma_scq_poll_atomic(struct rrdma_shim_qp *q);
int rrdma_scq_iop_poll(struct irq_poll *iop, int budget);
void rrdma_scq_poll(struct work_struct *work);
struct ib_cq *rrdma_scq_create(struct rrdma_shim_qp *q, u32 cqe);
void rrdma_scq_destroy(struct rrdma_shim_qp *q);

/* post.c */
u32 rrdma_qp_free_sinks(struct rrdma_shim_qp *q);

#endif /* RRDMA_SHIM_QP_INTERNAL_H */
