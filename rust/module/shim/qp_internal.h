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
 * these files only build verbs structures whose layout Rust cannot rely on
 * and call the static-inline verbs.
 *
 * Contexts: posting (rrdma_shim_post()), control sends and the atomic polls
 * of a send CQ never sleep: Rust posts in process context and, for a
 * fence completion, under @poll_lock (softirq, or a polling task with
 * softirqs off).  rrdma_shim_qp_create(), _stop(), _drain(), _destroy()
 * and _sinks_alloc() sleep: Rust calls them in process context, _drain()
 * and _destroy() with no rrdma lock held (rrdma_shim_assert_unlocked()
 * checks it), _sinks_alloc() with none either.  A busy or IOPOLL poll
 * (poll.c) runs in its task, yields after an empty poll if another task
 * is queued on its CPU, and an IOPOLL
 * one may sleep.  The calling context of each rrdma_rust_*() callback is
 * in rrdma_shim.h.
 *
 * The QP's locks in rrdma's order, outer first (Documentation/rrdma.rst
 * "Locking"; each declaration below says what it guards):
 *  - posting, control sends: Conn::inner -> (Shared::exports, a path's
 *    lock, Shared::ring) -> @lock;
 *  - completions: io_uring's ring lock -> @poll_lock -> a path's lock ->
 *    Shared::ring -> @lock (a fence completion posts);
 *  - sinks: @sinks_lock (a mutex, taken with no rrdma lock held) -> @lock.
 * @lock is the innermost: nothing of rrdma's is taken under it, only the
 * provider's own locks inside ib_post_send()/ib_post_recv().  C never calls
 * Rust with @lock or @sinks_lock held; rrdma_rust_ops_done() runs with
 * @poll_lock held, except on @scq_work.
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
	u32 index;
};

/*
 * A QP's operation slots, behind the one pointer they share: a slot finds
 * its QP through slot[0] (rrdma_op_slot_qp()), which keeps a slot at 16
 * bytes, so that up to RRDMA_SHIM_OPS_4K slots fit one 4 KiB allocation
 * (the own QP's 185 and a lane's 254).
 */
struct rrdma_shim_op_table {
	struct rrdma_shim_qp *q;
	struct rrdma_shim_op_slot slot[];
};

#define RRDMA_SHIM_OPS_4K \
	((4096 - sizeof(struct rrdma_shim_op_table)) / \
	 sizeof(struct rrdma_shim_op_slot))

static inline struct rrdma_shim_qp *
rrdma_op_slot_qp(struct rrdma_shim_op_slot *s)
{
	return container_of(s - s->index, struct rrdma_shim_op_table,
			    slot[0])->q;
}

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

/* Work requests rrdma_shim_post() chains into one ib_post_send(). */
#define RRDMA_POST_CHUNK 8

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
 * @lock:	spinlock (irqsave: posting runs in softirq too) that guards
 *		@draining, @grown, @send_busy and the sinks (@nsinks, @sinks,
 *		@sink_sg and a sink MR's mapping while it is registered); every post on
 *		the QP (work requests, control sends, receives) is made under it,
 *		so nothing is posted once @draining is set.  The innermost of
 *		rrdma's locks: taken under a path's lock and Shared::ring, under
 *		@poll_lock (a fence completion's post) and under @sinks_lock;
 *		nothing of rrdma's nests inside it
 * @draining:	set before the drain: nothing is posted afterwards
 * @grown:	the buffers beyond @nrecv_idle and @nsend_idle are in use
 *		(rrdma_shim_qp_ctrl_grow(); set under @lock, read by a send
 *		under it)
 * @abandoned:	creation failed after receives were posted: their
 *		completions, if the provider makes any while the QP and its CQs
 *		are destroyed, are not reported to @owner (the creator may hold
 *		locks the callbacks take)
 * @nrecv:	receive buffers, all posted once the QP grew
 *		(rrdma_shim_qp_ctrl_grow()), @nrecv_idle before
 * @nrecv_idle:	receive buffers posted from creation, in @rbufs
 * @nsend:	control send buffers, all usable once the QP grew, @nsend_idle
 *		before
 * @nsend_idle:	control send buffers from creation, in @sbufs
 * @send_busy:	bitmap of control send buffers in flight
 * @msg_len:	bytes per control buffer
 * @rbufs:	@nrecv_idle * @msg_len bytes of receive buffers, DMA-mapped at
 *		@rdma
 * @rbufs_more:	the other receive buffers, mapped at @rdma_more: NULL until
 *		the QP grew (set under @lock, before any of them is posted)
 * @sbufs:	@nsend_idle * @msg_len bytes of send buffers (NULL if none), mapped
 *		at @sdma: apart from @rbufs because kmalloc above 8 KiB rounds
 *		up to a power of two (30 and 8 buffers together took 32 KiB,
 *		apart 16 and 4; now 8 and 2 until the QP grows)
 * @sbufs_more:	the other send buffers, mapped at @sdma_more: NULL until the QP
 *		grew (set under @lock, which a send takes to pick a buffer)
 * @fence:	scratch sink of write fences (SINK_REG without an MR), mapped at
 *		@fence_dma; apart from the buffers for the same reason
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
 * @dma_sge:	SGEs a WRITE_DMA may gather (the QP's max_send_sge, as Rust
 *		chose it: QpSizes::dma_sge), 1 to RRDMA_SHIM_DMA_SGE
 * @dma_sge_rd:	SGEs a READ_DMA may scatter into (QpSizes::dma_sge_rd), 1 to
 *		@dma_sge
 * @dma_sges:	the SGE lists of the DMA requests of one rrdma_shim_post()
 *		chain, @dma_sge entries per request, RRDMA_POST_CHUNK requests
 *		(allocated with the QP, outside it: 32 SGEs would take the QP
 *		past kfree_rcu()'s 4 KiB offset; under @lock: ib_post_send()
 *		copies them out)
 * @sinks_lock:	mutex that serializes the allocation of the sinks
 *		(rrdma_shim_qp_sinks_alloc()); taken in process context with no
 *		rrdma lock held (the poster drops Conn::inner first and holds a
 *		poll reference), the outermost: @lock nests inside it
 * @iop:	polls @scq in softirq, scheduled by its event (cq_softirq)
 * @scq_work:	polls @scq on rrdma_shim_comp_wq() while @work_owns: queued
 *		by a poll that found a completion only process context may
 *		handle (left in @wc, see @ncarry), or by the event
 *		(cq_softirq off)
 * @poll_lock:	spinlock held by whoever polls @scq in atomic context: @iop
 *		(softirq), or a task polling for its own operations
 *		(rrdma_shim_qp_poll(), _iopoll(): spin_trylock_bh(), never
 *		waiting for it); @scq_work takes it only to set and clear
 *		@work_owns.  It guards @work_owns, the atomic poll's @wc,
 *		@ndone/@done and @carry_from/@ncarry (handed to @scq_work
 *		with @work_owns), and @iopoller/@iopoll_ring.
 *		rrdma_rust_ops_done() runs under it: after io_uring's ring lock
 *		(an IOPOLL poller holds it), before a path's lock, Shared::ring
 *		and @lock
 * @work_owns:	@scq_work polls @scq (in process context, without
 *		@poll_lock): the others do not, and its event queues the work
 * @ncarry:	completions a poll left to @scq_work, in @wc from @carry_from:
 *		no one else writes @wc until the work polls after them (only
 *		the work polls while @work_owns); apart from @wc they took
 *		1152 bytes, which put a queue pair with its 38 control slots
 *		into an 8 KiB allocation
 * @carry_from: see @ncarry
 * @pollers:	poll references (rrdma_shim_qp_poll_get(), _tryget()):
 *		destroying the QP first adds INT_MIN, so that no more can be
 *		taken, then waits for those held to go
 * @iopoller:	the task polling @scq for an IOPOLL ring, @iopoll_ring, in
 *		rrdma_shim_qp_iopoll() (set and cleared under @poll_lock)
 * @iopoll_ring: see @iopoller
 * @iopoll_idle_ns: when IOPOLL polls of @scq started to find nothing (0: the
 *		last one found something); after their spin they sleep
 * @iopoll_mean_ns: the mean time from that first empty poll to the next
 *		progress (0: none yet), which sets the spin (iopoll_spin_us 0)
 * @cq_event_ns: when @cq_events first grew after @iopoll_idle_ns was set
 *		(ktime_get_ns(); only while it is set)
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
	spinlock_t lock; /* posting, draining, send_busy, sinks: see above */
	bool draining;
	bool abandoned;
	bool grown;
	u32 nrecv;
	u32 nrecv_idle;
	u32 nsend;
	u32 nsend_idle;
	unsigned long *send_busy;
	u32 msg_len;
	void *rbufs;
	u64 rdma;
	void *rbufs_more;
	u64 rdma_more;
	void *sbufs;
	u64 sdma;
	void *sbufs_more;
	u64 sdma_more;
	void *fence;
	u64 fence_dma;
	u32 nops;
	struct rrdma_shim_op_table *ops;
	u32 nsinks;
	struct rrdma_shim_sink *sinks;
	struct scatterlist *sink_sg;
	u32 sink_nsg;
	u32 sinks_max;
	u32 data_sinks;
	u32 sink_pages;
	u32 dma_sge;
	u32 dma_sge_rd;
	struct ib_sge *dma_sges;
	struct mutex sinks_lock; /* sink allocation, outermost: see above */
	struct irq_poll iop;
	struct work_struct scq_work;
	spinlock_t poll_lock; /* the atomic polls of scq: see above */
	bool work_owns;
	u32 ncarry;
	u32 carry_from;
	atomic_t pollers;
	struct task_struct *iopoller;
	const void *iopoll_ring;
	u64 iopoll_idle_ns;
	u64 iopoll_mean_ns;
	u64 cq_event_ns;
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
int rrdma_qp_alloc_bufs(struct rrdma_shim_qp *q);
void rrdma_qp_free_bufs(struct rrdma_shim_qp *q);
void rrdma_qp_recv_done(struct ib_cq *cq, struct ib_wc *wc);
void rrdma_qp_send_done(struct ib_cq *cq, struct ib_wc *wc);

/* cq.c */
void rrdma_qp_op_done(struct ib_cq *cq, struct ib_wc *wc);
/* The completion of a RRDMA_SHIM_COPIED_SLOT request: nothing to do. */
extern struct ib_cqe rrdma_qp_copied_cqe;
int rrdma_scq_poll_atomic(struct rrdma_shim_qp *q);
int rrdma_scq_iop_poll(struct irq_poll *iop, int budget);
void rrdma_scq_poll(struct work_struct *work);
struct ib_cq *rrdma_scq_create(struct rrdma_shim_qp *q, u32 cqe);
void rrdma_scq_destroy(struct rrdma_shim_qp *q);

/* post.c */
u32 rrdma_qp_free_sinks(struct rrdma_shim_qp *q);

#endif /* RRDMA_SHIM_QP_INTERNAL_H */
