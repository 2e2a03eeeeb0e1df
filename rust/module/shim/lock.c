// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: lock helpers for Rust.  Spinlocks that keep softirqs off
 * while held (compat.rs's BhBackend), and the debug kernel's check that no
 * rrdma lock is held across a wait for a completion or a handler
 * (rrdma_shim_assert_unlocked()), and the allocation scopes of noio.rs's
 * mutexes and of a connection's work (memalloc_noio, and PF_MEMALLOC for
 * a disk's connection).
 *
 * The spinlocks: the 6.12 kernel crate has spin_lock() only,
 * and 7.x adds an irq-disabling lock but no _bh one.  A lock that a
 * completion takes in softirq must be taken this way in process context,
 * or a softirq on the same CPU would spin on its own holder.
 */
#include <linux/debug_locks.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/spinlock.h>

#include "rrdma_shim.h"

void rrdma_shim_spin_lock_bh(struct spinlock *lock)
{
	spin_lock_bh(lock);
}

void rrdma_shim_spin_unlock_bh(struct spinlock *lock)
{
	spin_unlock_bh(lock);
}

bool rrdma_shim_spin_trylock_bh(struct spinlock *lock)
{
	return spin_trylock_bh(lock);
}

void rrdma_shim_spin_assert_held(struct spinlock *lock)
{
	lockdep_assert_held(lock);
}

/*
 * How many locks of rrdma's own (Rust's and the shim's: their lock class
 * keys are static in this module) the current task holds.  Lockdep's
 * other maps (a running work item's, a workqueue's) are not locks and do
 * not count; neither do the locks of other modules, such as the rdma_cm
 * handler mutex our event handlers run under.  -1 without lockdep.
 */
int rrdma_shim_own_locks_held(void)
{
#ifdef CONFIG_LOCKDEP
	struct task_struct *t = current;
	int i, n = 0;

	for (i = 0; i < t->lockdep_depth; i++) {
		struct lockdep_map *m = t->held_locks[i].instance;

		if (m && m->wait_type_inner != LD_WAIT_INV &&
		    within_module((unsigned long)m->key, THIS_MODULE))
			n++;
	}
	return n;
#else
	return -1;
#endif
}

/*
 * The rule of rrdma's lock order: nothing that waits for a completion, an
 * event handler or a work item (a drain, destroying a cm_id or a queue
 * pair, a connection's teardown) runs with one of rrdma's locks held.
 * Lockdep cannot see such a wait; this makes the debug kernel check the
 * rule on every call (@what says which wait), and might_sleep() the
 * context.  A no-op without lockdep.
 */
void rrdma_shim_assert_unlocked(const char *what)
{
	might_sleep();
#ifdef CONFIG_LOCKDEP
	if (rrdma_shim_own_locks_held() > 0) {
		WARN_ONCE(1, "rrdma: %s with an rrdma lock held\n", what);
		debug_show_held_locks(current);
	}
#endif
}

unsigned int rrdma_shim_noio_save(void)
{
	return memalloc_noio_save();
}

void rrdma_shim_noio_restore(unsigned int flags)
{
	memalloc_noio_restore(flags);
}

unsigned int rrdma_shim_reserves_save(void)
{
	return memalloc_noreclaim_save();
}

void rrdma_shim_reserves_restore(unsigned int flags)
{
	memalloc_noreclaim_restore(flags);
}
