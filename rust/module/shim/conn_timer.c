// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: a connection's timer, and the module parameters of what it
 * times (keepalive, reconnect).
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

static uint reconnect_attempts = 10;
module_param(reconnect_attempts, uint, 0644);
MODULE_PARM_DESC(reconnect_attempts,
		 "Reconnect attempts after one failure of a RRDMA_CONNECT_RECONNECT connection (default 10, 1 to 1000)");

static uint reconnect_delay_ms = 200;
module_param(reconnect_delay_ms, uint, 0644);
MODULE_PARM_DESC(reconnect_delay_ms,
		 "First reconnect delay in ms, doubled per attempt, with jitter (default 200, 10 to 600000)");

static uint reconnect_max_delay_ms = 10000;
module_param(reconnect_max_delay_ms, uint, 0644);
MODULE_PARM_DESC(reconnect_max_delay_ms,
		 "Longest reconnect delay in ms (default 10000)");

static uint accept_max_teardowns = 64;
module_param(accept_max_teardowns, uint, 0644);
MODULE_PARM_DESC(accept_max_teardowns,
		 "A listener refuses connect requests while this many of its file's connections are being torn down (default 64, 0: no limit)");

void rrdma_shim_reconnect_params(u32 *attempts, u32 *delay_ms,
				 u32 *max_delay_ms, u32 *max_teardowns)
{
	*attempts = READ_ONCE(reconnect_attempts);
	*delay_ms = READ_ONCE(reconnect_delay_ms);
	*max_delay_ms = READ_ONCE(reconnect_max_delay_ms);
	*max_teardowns = READ_ONCE(accept_max_teardowns);
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
