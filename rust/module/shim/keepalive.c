// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: keepalive's module parameters and timer.
 *
 * The timer is a delayed work item on rrdma's work queue: the 6.12 kernel
 * crate has no delayed work.  It calls rrdma_rust_conn_keepalive() with the
 * context Rust armed it with.  Rust hands one reference of its connection
 * to every run it queues: the run takes it, and a cancel that finds a run
 * still pending gives it back (rust/module/timer.rs).
 */
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "rrdma_shim.h"

static uint keepalive_ms = 5000;
module_param(keepalive_ms, uint, 0644);
MODULE_PARM_DESC(keepalive_ms,
		 "Keepalive interval of accepted connections and CONNECTs that set none, in ms (default 5000, 0: off, 100 to 65535)");

static uint keepalive_misses = 6;
module_param(keepalive_misses, uint, 0644);
MODULE_PARM_DESC(keepalive_misses,
		 "Intervals without an answer before a peer is taken as gone (default 6, 2 to 255)");

void rrdma_shim_keepalive_params(u32 *ms, u32 *misses)
{
	*ms = READ_ONCE(keepalive_ms);
	*misses = READ_ONCE(keepalive_misses);
}

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
	rrdma_rust_conn_keepalive(READ_ONCE(t->ctx));
}

struct rrdma_shim_timer *rrdma_shim_timer_new(void)
{
	struct rrdma_shim_timer *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (t)
		INIT_DELAYED_WORK(&t->dw, rrdma_shim_timer_fn);
	return t;
}

bool rrdma_shim_timer_arm(struct rrdma_shim_timer *t, void *ctx,
			  unsigned long delay)
{
	WRITE_ONCE(t->ctx, ctx);
	return queue_delayed_work(rrdma_shim_wq(), &t->dw, delay);
}

bool rrdma_shim_timer_cancel(struct rrdma_shim_timer *t)
{
	return cancel_delayed_work_sync(&t->dw);
}

void rrdma_shim_timer_free(struct rrdma_shim_timer *t)
{
	kfree(t);
}
