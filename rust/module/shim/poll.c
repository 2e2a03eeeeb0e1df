// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: tasks that poll a queue pair's send CQ for their own
 * operations, as the softirq poll would (cq.c): a synchronous operation's
 * busy polling (sync_poll_us), and io_uring's IOPOLL (shim/uring.c).
 */
#include <linux/sched.h>
#include <linux/sched/stat.h>
#include <linux/timekeeping.h>
#include <linux/wait.h>

#include "qp_internal.h"

/* The monotonic clock, in ns. */
u64 rrdma_shim_now_ns(void)
{
	return ktime_get_ns();
}

/*
 * The CPU to whatever else can run on it, for a task that waits by looking
 * again and again (read(2)'s gathering, rust/abi/src/gather.rs): a soft
 * provider's thread may need this CPU to complete what the task waits for
 * (see qp_task_poll() below, which yields only if another task is queued
 * here).
 */
void rrdma_shim_yield(void)
{
	might_sleep();
	yield();
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
			n = max(rrdma_scq_poll_atomic(q), 0);
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
	 * run.  With nothing else runnable here it would still go through
	 * the scheduler at every empty poll: `make profile-lat` found the
	 * scheduler's code the largest part of a polled READ's CPU time
	 * (more than half of the poll loop's, under TCG), so then the poll
	 * only relaxes and offers a reschedule.  (single_task_running()
	 * counts tasks that EEVDF keeps queued while they sleep: a yield
	 * that finds nothing to run costs what it did before.)
	 */
	if (!n) {
		if (!single_task_running()) {
			yield();
			return 0;
		}
		cpu_relax();
	}
	cond_resched();
	return n;
}

/*
 * Busy polling, for a task that waits for its synchronous operation on @q
 * (qp_task_poll()).  Process context, no rrdma lock held, a poll reference
 * held (rrdma_shim_qp_poll_get()); rrdma_rust_ops_done() runs here with
 * @poll_lock held and softirqs off.
 */
int rrdma_shim_qp_poll(struct rrdma_shim_qp *q)
{
	return qp_task_poll(q, NULL);
}

/*
 * IOPOLL polls of @q made progress: the wait since their first empty poll,
 * if any, feeds the mean that sets their spin.  The wait ends at this
 * poll, or at the completion queue's own first progress after the first
 * empty poll (its event or poll: rrdma_shim_qp_iopoll_wake()) if that came
 * earlier, not at this poller's wake-up, whose latency would count the
 * cost of sleeping against spinning.  Racy updates by pollers of two
 * rings lose a sample at worst.
 */
static void iopoll_progress(struct rrdma_shim_qp *q)
{
	u64 idle = READ_ONCE(q->iopoll_idle_ns);
	u64 end, event;

	if (!idle)
		return;
	end = ktime_get_ns();
	event = READ_ONCE(q->cq_event_ns);
	if (event > idle && event < end)
		end = event;
	WRITE_ONCE(q->iopoll_mean_ns,
		   rrdma_rust_poll_mean_after(READ_ONCE(q->iopoll_mean_ns),
					      end - idle));
	WRITE_ONCE(q->iopoll_idle_ns, 0);
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
 * found nothing for a while sleep until the send CQ has something
 * (its event, or its work item's poll: rrdma_shim_qp_iopoll_wake()), task
 * work or a signal comes (io_uring runs it when this returns), or 1 ms
 * passed.  A poll that finds something starts the spin again.  The while
 * (rrdma_rust_iopoll_window_ns(), rust/abi/src/poll.rs): by default twice
 * the queue pair's mean wait from a first empty poll to the next progress
 * (iopoll_progress()) while that mean is at most 500 us, and at least
 * 50 us (the short gaps within a burst of completions); iopoll_spin_us
 * fixes it.  @oneshot
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
		iopoll_progress(q);
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
	spin = rrdma_rust_iopoll_window_ns(READ_ONCE(q->iopoll_mean_ns));
	if (now - idle < spin)
		return 0;
	/* The lock of @ring is held: as io_uring's hybrid poll sleeps. */
	wait_event_interruptible_hrtimeout(q->iopoll_wq,
					   atomic_read(&q->cq_events) != seen,
					   ns_to_ktime(RRDMA_SHIM_IOPOLL_SLEEP_NS));
	n = qp_task_poll_once(q, ring);
	if (n)
		iopoll_progress(q);
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
