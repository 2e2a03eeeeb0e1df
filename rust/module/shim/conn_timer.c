// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: a connection's timer (the module parameters of what it
 * times, keepalive and reconnect, are in params.c).
 *
 * The timer is a delayed work item on rrdma's work queue: the 6.12 kernel
 * crate has no delayed work.  It calls rrdma_rust_conn_timer() with the
 * context Rust armed it with.  Rust hands one reference of its connection
 * to every run it queues: the run takes it, and a cancel that finds a run
 * still pending gives it back (rust/module/timer.rs).
 */
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "rrdma_shim.h"

u32 rrdma_shim_jiffies_to_msecs(unsigned long j)
{
	return jiffies_to_msecs(j);
}

struct rrdma_shim_timer {
	struct delayed_work dw;
	void *ctx;
};

static void rrdma_shim_timer_fn(struct work_struct *w)
{
	struct rrdma_shim_timer *t =
		container_of(to_delayed_work(w), struct rrdma_shim_timer, dw);

	/* May free @t (the connection's last reference goes): not used after. */
	rrdma_rust_conn_timer(READ_ONCE(t->ctx));
}

struct rrdma_shim_timer *rrdma_shim_timer_new(void)
{
	struct rrdma_shim_timer *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (t)
		INIT_DELAYED_WORK(&t->dw, rrdma_shim_timer_fn);
	return t;
}

bool rrdma_shim_timer_arm(struct rrdma_shim_timer *t, void *ctx,
			  unsigned long delay, bool reset)
{
	WRITE_ONCE(t->ctx, ctx);
	if (reset)
		return !mod_delayed_work(rrdma_shim_wq(), &t->dw, delay);
	return queue_delayed_work(rrdma_shim_wq(), &t->dw, delay);
}

bool rrdma_shim_timer_cancel(struct rrdma_shim_timer *t)
{
	rrdma_shim_assert_unlocked("connection timer cancelled");
	return cancel_delayed_work_sync(&t->dw);
}

void rrdma_shim_timer_free(struct rrdma_shim_timer *t)
{
	kfree(t);
}
