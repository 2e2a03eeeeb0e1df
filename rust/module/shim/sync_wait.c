// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: a synchronous operation's wait (RW_SYNC).  A struct
 * completion, because the wait must be killable: once the operation is
 * posted, a plain signal must not end the ioctl (its restart would post
 * the operation again while it is in flight), a fatal one must (the
 * kernel crate's CondVar has no killable wait).
 */
#include <linux/completion.h>
#include <linux/slab.h>

#include "rrdma_shim.h"

struct rrdma_shim_sync {
	struct completion done;
};

struct rrdma_shim_sync *rrdma_shim_sync_new(void)
{
	struct rrdma_shim_sync *s = kmalloc(sizeof(*s), GFP_KERNEL);

	if (s)
		init_completion(&s->done);
	return s;
}

void rrdma_shim_sync_free(struct rrdma_shim_sync *s)
{
	kfree(s);
}

/* Any context, softirq included. */
void rrdma_shim_sync_done(struct rrdma_shim_sync *s)
{
	complete_all(&s->done);
}

/*
 * Waits for rrdma_shim_sync_done(), killably: 0, or -EINTR for a fatal
 * signal.
 */
int rrdma_shim_sync_wait(struct rrdma_shim_sync *s)
{
	return wait_for_completion_killable(&s->done) ? -EINTR : 0;
}
