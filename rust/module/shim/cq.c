// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: a queue pair's send CQ, and the completion handler of its
 * operations.
 *
 * A send CQ is polled here, not by the RDMA core (ib_alloc_cq()'s
 * ib_poll_handler): the RDMA core calls each completion's handler alone,
 * where rrdma wants the end of a poll, to hand its operation completions
 * to Rust as one batch (one acquisition of the file's completion ring and
 * one wake-up of its readers per batch, not per operation).  It is polled
 * in softirq, as IB_POLL_SOFTIRQ CQs are (irq_poll), and by the tasks that
 * poll for their own operations (poll.c), both under the QP's @poll_lock;
 * completions that need process context (a failed one, a control send's,
 * a registration's, the drain's) hand the CQ to a work item until it is
 * empty again (see rrdma_scq_poll_atomic()).  So rrdma_rust_ops_done()
 * runs in softirq, in a polling task with softirqs off (both under
 * @poll_lock) or on the work item; every other callback of a send CQ
 * only on the work item.  A receive CQ (control messages) stays the RDMA
 * core's (ctrl.c).
 */
#include <linux/sched/mm.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

#include "params.h"
#include "qp_internal.h"

/* Whether a softirq runs this (a send CQ's poll: Rust counts it). */
bool rrdma_shim_in_softirq(void)
{
	return in_serving_softirq();
}

/*
 * An operation's completion joins its poll's batch, which goes to Rust at
 * the end of the poll (scq_hand_ops()).  Runs in the poll that found it:
 * under @poll_lock (softirq, or a polling task), or on @scq_work (which
 * owns @ndone and @done then, see @work_owns).  A poll takes at most
 * RRDMA_SHIM_POLL_BATCH completions: the batch has room for all.
 */
void rrdma_qp_op_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rrdma_shim_op_slot *s =
		container_of(wc->wr_cqe, struct rrdma_shim_op_slot, cqe);
	struct rrdma_shim_qp *q = rrdma_op_slot_qp(s);

	if (WARN_ON_ONCE(q->ndone >= RRDMA_SHIM_POLL_BATCH))
		return;
	q->done[q->ndone].slot = s->index;
	q->done[q->ndone].status = wc->status;
	q->ndone++;
}

/*
 * The poll's operation completions to Rust, in one call: under @poll_lock
 * (softirq, or a polling task with softirqs off: @atomic, successful
 * completions only) or on @scq_work (process context); never under @lock.
 * Each context has its own entry: Rust's atomic one cannot reach what
 * sleeps or takes a mutex.
 */
/*
 * A write request signaled so that its bytes are copied (post.c): success
 * says nothing the operation's own completion does not; a failure takes
 * the queue pair down, which fails the operation.
 */
static void copied_done(struct ib_cq *cq, struct ib_wc *wc)
{
}

struct ib_cqe rrdma_qp_copied_cqe = { .done = copied_done };

static void scq_hand_ops(struct rrdma_shim_qp *q, bool atomic)
{
	if (!q->ndone)
		return;
	if (atomic)
		rrdma_rust_ops_done_atomic(q->owner, q->lane, q, q->done,
					   q->ndone);
	else
		rrdma_rust_ops_done(q->owner, q->lane, q, q->done, q->ndone);
	q->ndone = 0;
}

/* Calls @wc's handler (process context: any handler may run). */
static void scq_handle(struct rrdma_shim_qp *q, struct ib_wc *wc)
{
	if (wc->wr_cqe)
		wc->wr_cqe->done(q->scq, wc);
	else
		WARN_ON_ONCE(wc->status == IB_WC_SUCCESS);
}

/*
 * One poll of the send CQ in atomic context, @poll_lock held (in softirq,
 * or by a task with softirqs off): the operations that ended well go to
 * Rust in one
 * batch (Rust ends them under their path's lock only).  Any other
 * completion needs process context: a failed operation ends its
 * connection first, a control send's and a registration's take the
 * connection's mutex, and the drain's must come after every operation's.
 * The first such completion and every one after it (in order) are left to
 * @scq_work, which then owns the CQ until it is empty (@work_owns).
 * Returns the completions polled (negative: the provider's error).
 */
int rrdma_scq_poll_atomic(struct rrdma_shim_qp *q)
{
	int n, i;

	lockdep_assert_held(&q->poll_lock);
	n = ib_poll_cq(q->scq, RRDMA_SHIM_POLL_BATCH, q->wc);
	for (i = 0; i < n; i++) {
		struct ib_wc *wc = &q->wc[i];

		if (wc->wr_cqe == &rrdma_qp_copied_cqe &&
		    wc->status == IB_WC_SUCCESS)
			continue;
		if (!wc->wr_cqe || wc->wr_cqe->done != rrdma_qp_op_done ||
		    wc->status != IB_WC_SUCCESS)
			break;
		rrdma_qp_op_done(q->scq, wc);
	}
	if (i < n) {
		/* In @wc still: only the work polls until it handled them. */
		q->carry_from = i;
		q->ncarry = n - i;
		q->work_owns = true;
	}
	/* Those before it first: completions are reported in order. */
	scq_hand_ops(q, true);
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
	u64 idle = READ_ONCE(q->iopoll_idle_ns);

	/*
	 * The first progress since an IOPOLL poller found nothing ends its
	 * wait (iopoll_progress()); no clock read without such a poller.
	 */
	if (idle && READ_ONCE(q->cq_event_ns) <= idle)
		WRITE_ONCE(q->cq_event_ns, ktime_get_ns());
	atomic_inc(&q->cq_events);
	/* Orders the increment before the check, as the sleeper's mb does. */
	if (wq_has_sleeper(&q->iopoll_wq))
		wake_up(&q->iopoll_wq);
}

/*
 * The softirq poll (irq_poll), under @poll_lock, as the RDMA core's
 * ib_poll_handler() does:
 * up to @budget completions, a batch at a time; then, if the CQ looks
 * empty, re-arms it and polls again if a completion came in between.  A
 * poll that handed the CQ to @scq_work stops: the work re-arms it.
 */
int rrdma_scq_iop_poll(struct irq_poll *iop, int budget)
{
	struct rrdma_shim_qp *q = container_of(iop, struct rrdma_shim_qp, iop);
	int n = 0, total = 0;
	bool owned;

	spin_lock(&q->poll_lock);
	while (!q->work_owns && total < budget &&
	       (n = rrdma_scq_poll_atomic(q)) > 0)
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
 * Polls the send CQ on rrdma_shim_comp_wq(), in process context and
 * without @poll_lock (handlers run as they come), while it owns it
 * (@work_owns): first what an atomic poll left it (in @wc),
 * then the CQ itself as the RDMA core's ib_cq_poll_work() does (up to a
 * budget, then re-arms, and polls again if a completion came in between).
 * Once the CQ is empty and armed, the atomic pollers have it again.
 */
static void scq_poll(struct rrdma_shim_qp *q)
{
	int n, i, total = 0;

	/* Queued by the event (cq_softirq off), it takes the CQ over. */
	spin_lock_bh(&q->poll_lock);
	q->work_owns = true;
	spin_unlock_bh(&q->poll_lock);
	for (i = 0; i < q->ncarry; i++)
		scq_handle(q, &q->wc[q->carry_from + i]);
	total = q->ncarry;
	q->ncarry = 0;
	scq_hand_ops(q, false);
	do {
		while (total < RRDMA_SHIM_POLL_BUDGET &&
		       (n = ib_poll_cq(q->scq, RRDMA_SHIM_POLL_BATCH,
				       q->wc)) > 0) {
			for (i = 0; i < n; i++)
				scq_handle(q, &q->wc[i]);
			scq_hand_ops(q, false);
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
 * The work item.  A failed operation ends its connection here, which
 * allocates under the connection's lock: no I/O (cm.c says why).
 */
void rrdma_scq_poll(struct work_struct *work)
{
	unsigned int noio = memalloc_noio_save();

	scq_poll(container_of(work, struct rrdma_shim_qp, scq_work));
	memalloc_noio_restore(noio);
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
	if (rrdma_param_cq_softirq() && !READ_ONCE(q->work_owns))
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

struct ib_cq *rrdma_scq_create(struct rrdma_shim_qp *q, u32 cqe)
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
void rrdma_scq_destroy(struct rrdma_shim_qp *q)
{
	irq_poll_disable(&q->iop);
	cancel_work_sync(&q->scq_work);
	ib_destroy_cq(q->scq);
}
