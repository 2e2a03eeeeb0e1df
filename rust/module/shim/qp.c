// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: RC queue pairs with their completion queues and control
 * message buffers, the completion handlers that forward to Rust, and
 * work-request posting.
 *
 * A send CQ is polled here, not by the RDMA core (ib_alloc_cq()'s
 * ib_poll_handler): the RDMA core calls each completion's handler alone,
 * where rrdma wants the end of a poll, to hand its operation completions
 * to Rust as one batch (one acquisition of the file's completion ring and
 * one wake-up of its readers per batch, not per operation).  It is polled
 * in softirq, as IB_POLL_SOFTIRQ CQs are (irq_poll), and by the tasks that
 * poll for their own operations; completions that need process context
 * (a failed one, a control send's, a registration's, the drain's) hand
 * the CQ to a work item until it is empty again (see scq_poll_atomic()).
 * A receive CQ (control messages) stays the RDMA core's.
 *
 * Policy (what to post, which operation a completion ends) lives in Rust;
 * this file only builds verbs structures whose layout Rust cannot rely on
 * and calls the static-inline verbs.  Every path here is non-blocking
 * except rrdma_shim_qp_drain(), which Rust calls from process context
 * outside its locks, and rrdma_shim_qp_stop(), which may sleep.
 */
#include <linux/dma-mapping.h>
#include <linux/irq_poll.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "rrdma_shim.h"
#include "mr.h"

/* The work completion statuses rust/abi/src/ops.rs (wc) tells apart. */
static_assert(IB_WC_SUCCESS == 0 && IB_WC_LOC_PROT_ERR == 4 &&
	      IB_WC_WR_FLUSH_ERR == 5 && IB_WC_BAD_RESP_ERR == 7 &&
	      IB_WC_REM_INV_REQ_ERR == 9 && IB_WC_REM_ACCESS_ERR == 10 &&
	      IB_WC_REM_OP_ERR == 11 && IB_WC_RETRY_EXC_ERR == 12 &&
	      IB_WC_RNR_RETRY_EXC_ERR == 13);

static uint queue_pairs;
module_param(queue_pairs, uint, 0644);
MODULE_PARM_DESC(queue_pairs,
		 "Queue pairs per connection, its own and its data lanes: 0 (default) one per online CPU, 1 no lanes; at most 16");

/* Queue pairs a new connection offers or grants, at least 1. */
u32 rrdma_shim_queue_pairs(void)
{
	u32 n = READ_ONCE(queue_pairs);

	return n ? n : num_online_cpus();
}

static uint sync_poll_us;
module_param(sync_poll_us, uint, 0644);
MODULE_PARM_DESC(sync_poll_us,
		 "Microseconds a synchronous operation polls its queue pair's completions before it sleeps (0, default: no polling; at most 1000)");

/* How long a synchronous operation polls for its completion, in ns. */
u64 rrdma_shim_sync_poll_ns(void)
{
	return (u64)min_t(uint, READ_ONCE(sync_poll_us), 1000) * NSEC_PER_USEC;
}

static bool cq_softirq = true;
module_param(cq_softirq, bool, 0644);
MODULE_PARM_DESC(cq_softirq,
		 "Poll queue pairs' send completions in softirq (default Y); N: on the rrdma_comp work queue, as before 2026-11-27 (for comparison)");

static uint iopoll_spin_us = 50;
module_param(iopoll_spin_us, uint, 0644);
MODULE_PARM_DESC(iopoll_spin_us,
		 "Microseconds an IOPOLL ring's poll spins while it finds nothing before it sleeps until the queue pair's next completion (default 50; 0: sleeps at once)");

/* The monotonic clock, in ns. */
u64 rrdma_shim_now_ns(void)
{
	return ktime_get_ns();
}

/* Whether a softirq runs this (a send CQ's poll: Rust counts it). */
bool rrdma_shim_in_softirq(void)
{
	return in_serving_softirq();
}

/* The CPU an operation is submitted on (it picks that CPU's lane). */
u32 rrdma_shim_this_cpu(void)
{
	return raw_smp_processor_id();
}

/* Bytes of a QP's write-fence sink: a fence READs one byte. */
#define RRDMA_SHIM_FENCE_LEN	8

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
 *		@iop in softirq (scq_iop_poll()) or @scq_work
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
 *		op_done() runs in a poll)
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

static int post_recv_locked(struct rrdma_shim_qp *q, u32 i)
{
	struct ib_sge sge = {
		.addr = q->dma + (u64)i * q->msg_len,
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
	return ib_post_recv(q->id->qp, &wr, NULL);
}

/*
 * A control message arrived.  It is copied out and its buffer re-posted
 * before Rust sees it: an answer Rust sends then also tells the peer that
 * the buffer is free again (the wire protocol's flow control relies on it).
 * Rust is never called with @q->lock held (it takes sleeping locks).
 */
static void recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rrdma_shim_ctrl_slot *s =
		container_of(wc->wr_cqe, struct rrdma_shim_ctrl_slot, cqe);
	struct rrdma_shim_qp *q = s->q;
	struct ib_device *dev = q->id->device;
	u64 off = (u64)s->index * q->msg_len;
	u8 msg[RRDMA_SHIM_CTRL_MAX];
	u32 len = min(wc->byte_len, q->msg_len);
	unsigned long flags;
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
	ib_dma_sync_single_for_cpu(dev, q->dma + off, q->msg_len,
				   DMA_BIDIRECTIONAL);
	memcpy(msg, q->bufs + off, len);
	ib_dma_sync_single_for_device(dev, q->dma + off, q->msg_len,
				      DMA_BIDIRECTIONAL);
	spin_lock_irqsave(&q->lock, flags);
	ret = post_recv_locked(q, s->index);
	if (ret && q->draining)
		ret = 0;
	spin_unlock_irqrestore(&q->lock, flags);
	if (ret) {
		rrdma_rust_qp_error(q->owner, q->lane, IB_WC_GENERAL_ERR);
		return;
	}
	rrdma_rust_ctrl_recv(q->owner, msg, len);
}

static void send_done(struct ib_cq *cq, struct ib_wc *wc)
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
 * Work requests without a Rust completion context: registrations.  Those
 * of exports are signaled (Rust counts them), those of the data path are
 * not and complete here only on error.
 */
static void quiet_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rrdma_shim_qp *q = cq->cq_context;

	rrdma_rust_quiet_done(q->owner, wc->status);
}

static struct ib_cqe quiet_cqe = { .done = quiet_done };

/*
 * An operation's completion joins its poll's batch, which goes to Rust at
 * the end of the poll (scq_hand_ops()).  A poll takes at most
 * RRDMA_SHIM_POLL_BATCH completions: the batch has room for all.
 */
static void op_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rrdma_shim_op_slot *s =
		container_of(wc->wr_cqe, struct rrdma_shim_op_slot, cqe);
	struct rrdma_shim_qp *q = s->q;

	if (WARN_ON_ONCE(q->ndone >= RRDMA_SHIM_POLL_BATCH))
		return;
	q->done[q->ndone].slot = s->index;
	q->done[q->ndone].status = wc->status;
	q->ndone++;
}

/* The poll's operation completions to Rust, in one call. */
static void scq_hand_ops(struct rrdma_shim_qp *q)
{
	if (q->ndone) {
		rrdma_rust_ops_done(q->owner, q->lane, q, q->done, q->ndone);
		q->ndone = 0;
	}
}

/* Calls @wc's handler (process context: any handler may run). */
static void scq_handle(struct rrdma_shim_qp *q, struct ib_wc *wc)
{
	if (wc->wr_cqe)
		wc->wr_cqe->done(q->scq, wc);
	else
		WARN_ON_ONCE(wc->status == IB_WC_SUCCESS);
}

/* Completions polled before a poller lets other work run. */
#define RRDMA_SHIM_POLL_BUDGET	(4 * RRDMA_SHIM_POLL_BATCH)

/*
 * One poll of the send CQ in atomic context (softirq, or a task with
 * @poll_lock held): the operations that ended well go to Rust in one
 * batch (Rust ends them under their path's lock only).  Any other
 * completion needs process context: a failed operation ends its
 * connection first, a control send's and a registration's take the
 * connection's mutex, and the drain's must come after every operation's.
 * The first such completion and every one after it (in order) are left to
 * @scq_work, which then owns the CQ until it is empty (@work_owns).
 * Returns the completions polled (negative: the provider's error).
 */
static int scq_poll_atomic(struct rrdma_shim_qp *q)
{
	int n, i;

	lockdep_assert_held(&q->poll_lock);
	n = ib_poll_cq(q->scq, RRDMA_SHIM_POLL_BATCH, q->wc);
	for (i = 0; i < n; i++) {
		struct ib_wc *wc = &q->wc[i];

		if (!wc->wr_cqe || wc->wr_cqe->done != op_done ||
		    wc->status != IB_WC_SUCCESS)
			break;
		op_done(q->scq, wc);
	}
	if (i < n) {
		memcpy(q->carry, &q->wc[i], (n - i) * sizeof(*q->wc));
		q->ncarry = n - i;
		q->work_owns = true;
	}
	/* Those before it first: completions are reported in order. */
	scq_hand_ops(q);
	if (i < n)
		queue_work(rrdma_shim_comp_wq(), &q->scq_work);
	return n;
}

/*
 * The send CQ has something, or a command's operation ended outside its
 * poll: IOPOLL pollers of @q that sleep (rrdma_shim_qp_iopoll()) wake.
 * Any context.
 */
void rrdma_shim_qp_iopoll_wake(struct rrdma_shim_qp *q)
{
	atomic_inc(&q->cq_events);
	/* Orders the increment before the check, as the sleeper's mb does. */
	if (wq_has_sleeper(&q->iopoll_wq))
		wake_up(&q->iopoll_wq);
}

/*
 * The softirq poll (irq_poll), as the RDMA core's ib_poll_handler() does:
 * up to @budget completions, a batch at a time; then, if the CQ looks
 * empty, re-arms it and polls again if a completion came in between.  A
 * poll that handed the CQ to @scq_work stops: the work re-arms it.
 */
static int scq_iop_poll(struct irq_poll *iop, int budget)
{
	struct rrdma_shim_qp *q = container_of(iop, struct rrdma_shim_qp, iop);
	int n = 0, total = 0;
	bool owned;

	spin_lock(&q->poll_lock);
	while (!q->work_owns && total < budget &&
	       (n = scq_poll_atomic(q)) > 0)
		total += n;
	owned = q->work_owns;
	spin_unlock(&q->poll_lock);
	/* Their commands ended: a sleeping IOPOLL poller posts their CQEs. */
	if (total)
		rrdma_shim_qp_iopoll_wake(q);
	if (total < budget) {
		irq_poll_complete(iop);
		if (!owned && ib_req_notify_cq(q->scq, IB_CQ_NEXT_COMP |
					       IB_CQ_REPORT_MISSED_EVENTS) > 0)
			irq_poll_sched(iop);
	}
	return min(total, budget);
}

/*
 * Polls the send CQ in process context (handlers run as they come) while
 * it owns it (@work_owns): first what an atomic poll left it (@carry),
 * then the CQ itself as the RDMA core's ib_cq_poll_work() does (up to a
 * budget, then re-arms, and polls again if a completion came in between).
 * Once the CQ is empty and armed, the atomic pollers have it again.
 */
static void scq_poll(struct work_struct *work)
{
	struct rrdma_shim_qp *q =
		container_of(work, struct rrdma_shim_qp, scq_work);
	int n, i, total = 0;

	/* Queued by the event (cq_softirq off), it takes the CQ over. */
	spin_lock_bh(&q->poll_lock);
	q->work_owns = true;
	spin_unlock_bh(&q->poll_lock);
	for (i = 0; i < q->ncarry; i++)
		scq_handle(q, &q->carry[i]);
	total = q->ncarry;
	q->ncarry = 0;
	scq_hand_ops(q);
	do {
		while (total < RRDMA_SHIM_POLL_BUDGET &&
		       (n = ib_poll_cq(q->scq, RRDMA_SHIM_POLL_BATCH,
				       q->wc)) > 0) {
			for (i = 0; i < n; i++)
				scq_handle(q, &q->wc[i]);
			scq_hand_ops(q);
			total += n;
		}
		if (total >= RRDMA_SHIM_POLL_BUDGET) {
			/* Still its own: the next run goes on. */
			rrdma_shim_qp_iopoll_wake(q);
			queue_work(rrdma_shim_comp_wq(), &q->scq_work);
			return;
		}
	} while (ib_req_notify_cq(q->scq, IB_CQ_NEXT_COMP |
				  IB_CQ_REPORT_MISSED_EVENTS) > 0);
	/*
	 * Empty and armed: an event from here on schedules the softirq poll
	 * (or this work, if it still sees @work_owns: it runs again).
	 */
	spin_lock_bh(&q->poll_lock);
	q->work_owns = false;
	spin_unlock_bh(&q->poll_lock);
	if (total)
		rrdma_shim_qp_iopoll_wake(q);
}

/*
 * One poll of the send CQ by a task, its completions handled here as the
 * softirq poll would (the CQ stays armed: an event that comes anyway finds
 * nothing).  @ring: the IOPOLL ring the task polls for (rrdma_shim_qp_
 * iopolled() tells its commands' completions apart), or NULL.  Returns the
 * completions polled; 0 if another poller polls (which handles them).
 */
static int qp_task_poll_once(struct rrdma_shim_qp *q, const void *ring)
{
	int n = 0;

	if (spin_trylock_bh(&q->poll_lock)) {
		if (!q->work_owns) {
			WRITE_ONCE(q->iopoll_ring, ring);
			WRITE_ONCE(q->iopoller, ring ? current : NULL);
			n = max(scq_poll_atomic(q), 0);
			WRITE_ONCE(q->iopoller, NULL);
		}
		spin_unlock_bh(&q->poll_lock);
	}
	return n;
}

/* qp_task_poll_once(), then the CPU to whatever else can run. */
static int qp_task_poll(struct rrdma_shim_qp *q, const void *ring)
{
	int n = qp_task_poll_once(q, ring);

	/*
	 * Nothing (or the work item polls): whatever else can run here goes
	 * first.  A soft provider's transmit thread may need this CPU to send
	 * the very request this task polls for (siw_tx of the QP's CPU), and
	 * its wake-up does not preempt a task that spins, so cond_resched()
	 * does not run it: spinning held a 4 KiB READ back for the whole
	 * window (p50 1.2 ms with a 1 ms window against 0.2 ms unpolled).  A
	 * nap (usleep_range()) cost as much as it saved.  yield() lets it
	 * run, and returns at once when nothing else is runnable.
	 */
	if (!n)
		yield();
	else
		cond_resched();
	return n;
}

/*
 * Busy polling, for a task that waits for its synchronous operation on @q
 * (qp_task_poll()).  Process context, no rrdma lock held, a poll reference
 * held (rrdma_shim_qp_poll_get()).
 */
int rrdma_shim_qp_poll(struct rrdma_shim_qp *q)
{
	return qp_task_poll(q, NULL);
}

/* Longest sleep of an IOPOLL poller: a wake-up it missed costs no more. */
#define RRDMA_SHIM_IOPOLL_SLEEP_NS	NSEC_PER_MSEC

/*
 * IOPOLL: the task that holds @ring's lock polls @q for one of the ring's
 * commands (qp_task_poll()).  A poll reference held (_tryget()).
 *
 * Spinning costs a CPU, which a soft provider, or the vCPUs of an
 * oversubscribed host, need to make the completion come at all: two
 * guests of 2 vCPUs on 2 host cores ran 0.30-1.05x the ioctl path's rate
 * with a poll that spun until it found something.  So polls that have
 * found nothing for iopoll_spin_us sleep until the send CQ has something
 * (its event, or its work item's poll: rrdma_shim_qp_iopoll_wake()), task
 * work or a signal comes (io_uring runs it when this returns), or 1 ms
 * passed.  A poll that finds something starts the spin again.  @oneshot
 * (BLK_POLL_ONESHOT): io_uring has completions already, or does not
 * wait: never sleep.
 */
int rrdma_shim_qp_iopoll(struct rrdma_shim_qp *q, const void *ring,
			 bool oneshot)
{
	int seen = atomic_read(&q->cq_events);
	u64 now, idle, spin;
	int n;

	n = qp_task_poll(q, ring);
	if (n || seen != READ_ONCE(q->iopoll_events)) {
		/* Progress: this poll's, or the work item's since the last. */
		WRITE_ONCE(q->iopoll_events, seen);
		WRITE_ONCE(q->iopoll_idle_ns, 0);
		return n;
	}
	if (oneshot)
		return 0;
	now = ktime_get_ns();
	idle = READ_ONCE(q->iopoll_idle_ns);
	if (!idle) {
		WRITE_ONCE(q->iopoll_idle_ns, now);
		idle = now;
	}
	spin = (u64)READ_ONCE(iopoll_spin_us) * NSEC_PER_USEC;
	if (now - idle < spin)
		return 0;
	/* The lock of @ring is held: as io_uring's hybrid poll sleeps. */
	wait_event_interruptible_hrtimeout(q->iopoll_wq,
					   atomic_read(&q->cq_events) != seen,
					   ns_to_ktime(RRDMA_SHIM_IOPOLL_SLEEP_NS));
	n = qp_task_poll_once(q, ring);
	if (n)
		WRITE_ONCE(q->iopoll_idle_ns, 0);
	return n;
}

/*
 * Whether the current task is polling @q for @ring in rrdma_shim_qp_iopoll()
 * (then it holds @ring's lock, and a command of @ring may be completed
 * without task work).  Racy reads are fine: only the poller itself sees
 * itself.
 */
bool rrdma_shim_qp_iopolled(struct rrdma_shim_qp *q, const void *ring)
{
	/* Not a softirq poll run on top of the poller's task. */
	return in_task() && READ_ONCE(q->iopoller) == current &&
	       READ_ONCE(q->iopoll_ring) == ring;
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
	/* wake_up_var() only hashes the address: @q may be gone already. */
	if (atomic_dec_and_test(&q->pollers))
		wake_up_var(&q->pollers);
}

/* References of the struct itself (@refs): see struct rrdma_shim_qp. */
void rrdma_shim_qp_ref(struct rrdma_shim_qp *q)
{
	refcount_inc(&q->refs);
}

void rrdma_shim_qp_unref(struct rrdma_shim_qp *q)
{
	if (refcount_dec_and_test(&q->refs))
		kfree_rcu(q, rcu);
}

/*
 * The send CQ's completion event (any context): poll it, in softirq unless
 * the work item owns it (a racy read: a work run that finds the CQ empty
 * is harmless, and one that clears @work_owns re-armed the CQ first).
 */
static void scq_event(struct ib_cq *cq, void *ctx)
{
	struct rrdma_shim_qp *q = ctx;

	rrdma_shim_qp_iopoll_wake(q);
	if (READ_ONCE(cq_softirq) && !READ_ONCE(q->work_owns))
		irq_poll_sched(&q->iop);
	else
		queue_work(rrdma_shim_comp_wq(), &q->scq_work);
}

/*
 * A completion vector per send CQ in turn, as ib_alloc_cq_any() picks
 * them: the queue pairs of a connection (and the connections of a device)
 * spread over the device's vectors.
 */
static int comp_vector(struct ib_device *dev)
{
	static atomic_t counter;

	if (dev->num_comp_vectors <= 1)
		return 0;
	return atomic_inc_return(&counter) %
	       min_t(int, dev->num_comp_vectors, num_online_cpus());
}

static struct ib_cq *scq_create(struct rrdma_shim_qp *q, u32 cqe)
{
	struct ib_cq_init_attr attr = {
		.cqe = cqe,
		.comp_vector = comp_vector(q->id->device),
	};
	struct ib_cq *cq;
	int ret;

	cq = ib_create_cq(q->id->device, scq_event, NULL, q, &attr);
	if (IS_ERR(cq))
		return cq;
	ret = ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
	if (ret < 0) {
		ib_destroy_cq(cq);
		return ERR_PTR(ret);
	}
	return cq;
}

/*
 * After the QP: no completion, so no event, comes any more.  The softirq
 * poll goes first: it may queue the work, which never schedules it.
 */
static void scq_destroy(struct rrdma_shim_qp *q)
{
	irq_poll_disable(&q->iop);
	cancel_work_sync(&q->scq_work);
	ib_destroy_cq(q->scq);
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
static u32 free_sinks(struct rrdma_shim_qp *q)
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
 * sleep; the caller keeps @q from being destroyed (a poll reference).
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

/* Whether the QP's sinks are allocated (or it has none). */
bool rrdma_shim_qp_has_sinks(struct rrdma_shim_qp *q)
{
	return READ_ONCE(q->nsinks) || !q->sinks_max;
}

int rrdma_shim_qp_create(struct rdma_cm_id *id, struct ib_pd *pd, void *owner,
			 u32 lane, u32 sq_depth, u32 nops, u32 nrecv, u32 nsend,
			 u32 msg_len, u32 nsinks, u32 data_sinks,
			 u32 sink_pages, struct rrdma_shim_qp **out)
{
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr attr = {};
	struct rrdma_shim_qp *q;
	u32 i, n = nrecv + nsend;
	int ret;

	if (msg_len > RRDMA_SHIM_CTRL_MAX)
		return -EINVAL;
	q = kzalloc(struct_size(q, slots, n), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	q->send_busy = bitmap_zalloc(nsend, GFP_KERNEL);
	q->bufs = kzalloc((size_t)n * msg_len, GFP_KERNEL);
	q->fence = kzalloc(RRDMA_SHIM_FENCE_LEN, GFP_KERNEL);
	q->ops = kcalloc(nops, sizeof(*q->ops), GFP_KERNEL);
	if (!q->send_busy || !q->bufs || !q->fence || !q->ops) {
		ret = -ENOMEM;
		goto free;
	}
	q->id = id;
	q->pd = pd;
	q->owner = owner;
	q->lane = lane;
	q->nrecv = nrecv;
	q->nsend = nsend;
	q->msg_len = msg_len;
	spin_lock_init(&q->lock);
	irq_poll_init(&q->iop, RRDMA_SHIM_POLL_BUDGET, scq_iop_poll);
	INIT_WORK(&q->scq_work, scq_poll);
	spin_lock_init(&q->poll_lock);
	atomic_set(&q->pollers, 0);
	init_waitqueue_head(&q->iopoll_wq);
	atomic_set(&q->cq_events, 0);
	refcount_set(&q->refs, 1);
	for (i = 0; i < n; i++) {
		q->slots[i].q = q;
		q->slots[i].index = i;
		q->slots[i].cqe.done = i < nrecv ? recv_done : send_done;
	}
	q->nops = nops;
	for (i = 0; i < nops; i++) {
		q->ops[i].q = q;
		q->ops[i].index = i;
		q->ops[i].cqe.done = op_done;
	}
	q->sinks_max = nsinks;
	q->data_sinks = data_sinks;
	q->sink_pages = sink_pages;
	mutex_init(&q->sinks_lock);
	q->dma = ib_dma_map_single(dev, q->bufs, (size_t)n * msg_len,
				   DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(dev, q->dma)) {
		ret = -ENOMEM;
		goto free;
	}
	q->fence_dma = ib_dma_map_single(dev, q->fence, RRDMA_SHIM_FENCE_LEN,
					 DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(dev, q->fence_dma)) {
		ret = -ENOMEM;
		goto unmap;
	}
	/* Every send may complete (with an error) and the drain needs one. */
	q->scq = scq_create(q, sq_depth + nsend + 1);
	if (IS_ERR(q->scq)) {
		ret = PTR_ERR(q->scq);
		goto unmap_fence;
	}
	q->rcq = ib_alloc_cq_any(dev, owner, nrecv + 1, IB_POLL_WORKQUEUE);
	if (IS_ERR(q->rcq)) {
		ret = PTR_ERR(q->rcq);
		goto free_scq;
	}
	attr.qp_context = owner;
	attr.send_cq = q->scq;
	attr.recv_cq = q->rcq;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	attr.cap.max_send_wr = sq_depth + nsend;
	/* A lane's one receive leaves room for the drain's own. */
	attr.cap.max_recv_wr = lane ? nrecv + 1 : nrecv;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	ret = rdma_create_qp(id, pd, &attr);
	if (ret)
		goto free_rcq;
	spin_lock_irq(&q->lock);
	for (i = 0; i < nrecv && !ret; i++)
		ret = post_recv_locked(q, i);
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
	scq_destroy(q);
unmap_fence:
	ib_dma_unmap_single(dev, q->fence_dma, RRDMA_SHIM_FENCE_LEN,
			    DMA_FROM_DEVICE);
unmap:
	ib_dma_unmap_single(dev, q->dma, (size_t)n * msg_len,
			    DMA_BIDIRECTIONAL);
free:
	free_sinks(q);
	kfree(q->ops);
	kfree(q->fence);
	kfree(q->bufs);
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
	 * Busy pollers poll no longer than a synchronous operation waits, an
	 * IOPOLL poller for one poll and at most 1 ms of sleep (the drain's
	 * completions wake it).  Once none is left, none can come.
	 */
	wait_var_event(&q->pollers,
		       atomic_cmpxchg(&q->pollers, 0, INT_MIN) == 0);
	rdma_destroy_qp(q->id);
	ib_free_cq(q->rcq);
	scq_destroy(q);
	/* After the QP: no READ can place into a sink any more. */
	sinks = free_sinks(q);
	mutex_destroy(&q->sinks_lock);
	ib_dma_unmap_single(dev, q->fence_dma, RRDMA_SHIM_FENCE_LEN,
			    DMA_FROM_DEVICE);
	ib_dma_unmap_single(dev, q->dma,
			    (size_t)(q->nrecv + q->nsend) * q->msg_len,
			    DMA_BIDIRECTIONAL);
	kfree(q->ops);
	kfree(q->fence);
	kfree(q->bufs);
	bitmap_free(q->send_busy);
	rrdma_shim_qp_unref(q);
	return sinks;
}

int rrdma_shim_ctrl_send(struct rrdma_shim_qp *q, const void *msg, u32 len)
{
	struct ib_device *dev = q->id->device;
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	unsigned long flags;
	u32 i;
	u64 off;
	int ret;

	if (len > q->msg_len)
		return -EMSGSIZE;
	spin_lock_irqsave(&q->lock, flags);
	i = find_first_zero_bit(q->send_busy, q->nsend);
	if (q->draining || i >= q->nsend) {
		spin_unlock_irqrestore(&q->lock, flags);
		return q->draining ? -ENOTCONN : -EAGAIN;
	}
	__set_bit(i, q->send_busy);
	off = (u64)(q->nrecv + i) * q->msg_len;
	memcpy(q->bufs + off, msg, len);
	ib_dma_sync_single_for_device(dev, q->dma + off, len,
				      DMA_BIDIRECTIONAL);
	sge.addr = q->dma + off;
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

/* ---- work requests ---- */

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
	int i, mapped;

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
	mapped = ib_map_mr_sg(k->mr, out, n, NULL, PAGE_SIZE);
	if (mapped != n)
		return mapped < 0 ? mapped : -EINVAL;
	k->mr->iova = iova;
	/* A fresh key: the last READ into this sink invalidated the old one. */
	ib_update_fast_reg_key(k->mr, ib_inc_rkey(k->mr->rkey));
	return 0;
}

#define RRDMA_POST_CHUNK 8

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
			    s->opcode == RRDMA_SHIM_WR_SINK_READ) {
				if (s->sink >= q->nsinks) {
					ret = -EINVAL;
					goto out;
				}
				sink = &q->sinks[s->sink];
			}

			if (s->slot < q->nops)
				wr->wr_cqe = &q->ops[s->slot].cqe;
			else
				wr->wr_cqe = &quiet_cqe;
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
				ret = sink_map(q, sink, s);
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
				wr->num_sge = 1;
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
