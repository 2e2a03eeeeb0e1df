// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: spinlocks that keep softirqs off while held, for Rust
 * (compat.rs's BhBackend).  The 6.12 kernel crate has spin_lock() only,
 * and 7.x adds an irq-disabling lock but no _bh one.  A lock that a
 * completion takes in softirq must be taken this way in process context,
 * or a softirq on the same CPU would spin on its own holder.
 */
#include <linux/lockdep.h>
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
