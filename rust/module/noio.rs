// SPDX-License-Identifier: GPL-2.0

//! A mutex whose holder's allocations start no I/O (`memalloc_noio`).
//!
//! A disk's `queue_rq` (rrdma-blk) takes its connection's lock to post.
//! Whoever holds that lock and allocates (a reconnect building its queue
//! pair, a teardown, an import) could otherwise enter direct reclaim, whose
//! I/O may be that very disk's (swap, writeback): the I/O waits for the
//! lock, the lock's holder for the I/O. Holding the lock puts the holder in
//! a no-I/O scope, whatever path took it, so no allocation under it can
//! close that cycle. The mutexes taken under a connection's lock are
//! `NoIoMutex`es too (`Context::devices`, `Shared::exports`,
//! `DeviceCtx::conns`): a holder of one of them that reclaimed into the
//! disk would hold up the connection's lock's holder, waiting for it. (A
//! path's lock and the locks below it are spinlocks: nothing under them
//! allocates in a way that may sleep.)

use core::ops::{Deref, DerefMut};

use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::Mutex;

use crate::ffi::AllocScope;

/// A [`Mutex`] held in a no-I/O scope ([`NoIoGuard`]).
#[pin_data]
pub(crate) struct NoIoMutex<T> {
    #[pin]
    mutex: Mutex<T>,
}

impl<T> NoIoMutex<T> {
    /// Wraps `mutex` (`new_mutex!`, which names its lock class).
    pub(crate) fn new(mutex: impl PinInit<Mutex<T>>) -> impl PinInit<Self> {
        pin_init!(Self { mutex <- mutex })
    }

    /// Takes the lock (sleeps); the scope ends once it is released.
    pub(crate) fn lock(&self) -> NoIoGuard<'_, T> {
        let noio = AllocScope::noio();
        NoIoGuard {
            guard: self.mutex.lock(),
            _noio: noio,
        }
    }
}

/// The lock held, in a no-I/O scope. Fields drop in order: the lock is
/// released, then the scope ends.
pub(crate) struct NoIoGuard<'a, T> {
    guard: Guard<'a, T, MutexBackend>,
    _noio: AllocScope,
}

impl<'a, T> NoIoGuard<'a, T> {
    /// The lock's own guard, for a wait on a condition variable (which
    /// releases and retakes the lock; the task stays in the scope).
    pub(crate) fn guard(&mut self) -> &mut Guard<'a, T, MutexBackend> {
        &mut self.guard
    }
}

impl<T> Deref for NoIoGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: Unpin> DerefMut for NoIoGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}
