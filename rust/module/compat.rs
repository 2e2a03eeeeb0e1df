// SPDX-License-Identifier: GPL-2.0

//! The one place that knows the differences between supported kernels.
//!
//! Kbuild sets `--cfg rrdma_compat="k6_12"` for kernels before 6.13 and
//! `"k7"` otherwise (see `Kbuild`); everything else in the crate calls the
//! functions re-exported here and stays version-agnostic.

#[cfg(rrdma_compat = "k6_12")]
#[path = "compat/k6_12.rs"]
mod imp;

#[cfg(not(rrdma_compat = "k6_12"))]
#[path = "compat/k7.rs"]
mod imp;

pub(crate) use imp::*;

/// Removes element `i`, keeping the order of the others.
pub(crate) fn vec_remove<T>(v: &mut kernel::alloc::KVec<T>, i: usize) -> Option<T> {
    if i >= v.len() {
        return None;
    }
    v.as_mut_slice()[i..].rotate_left(1);
    vec_pop(v)
}

/// Removes element `i`, moving the last one into its place.
pub(crate) fn vec_swap_remove<T>(v: &mut kernel::alloc::KVec<T>, i: usize) -> Option<T> {
    let last = v.len().checked_sub(1)?;
    if i > last {
        return None;
    }
    v.as_mut_slice().swap(i, last);
    vec_pop(v)
}

/// Removes (by address) `item` from `v`, returning the removed reference so
/// that the caller drops it outside its lock.
pub(crate) fn vec_remove_arc<T>(
    v: &mut kernel::alloc::KVec<kernel::sync::Arc<T>>,
    item: &T,
) -> Option<kernel::sync::Arc<T>> {
    let i = v.iter().position(|x| core::ptr::eq::<T>(&**x, item))?;
    vec_swap_remove(v, i)
}

/// A spinlock that keeps softirqs off on its CPU while held
/// (`spin_lock_bh()`), for state a completion handles in softirq: taken
/// with plain `spin_lock()` in process context, a softirq on the holder's
/// CPU would spin on it forever. Neither kernel's crate has one (7.x has
/// an irq-disabling lock only); the backend calls the shim
/// (`shim/lock.c`). Nothing may sleep under it.
pub(crate) type BhLock<T> = kernel::sync::lock::Lock<T, BhBackend>;

/// The guard of a [`BhLock`].
pub(crate) type BhGuard<'a, T> = kernel::sync::lock::Guard<'a, T, BhBackend>;

/// Creates a [`BhLock`] initialiser named `$name`, with a lock class of
/// its own (one per call site, as `new_spinlock!` has).
macro_rules! new_bh_lock {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::compat::BhLock::new($inner, kernel::c_str!($name), kernel::static_lock_class!())
    };
}
pub(crate) use new_bh_lock;

/// The backend of [`BhLock`].
pub(crate) struct BhBackend;

// SAFETY: `spin_lock_bh()` ensures mutual exclusion, and `relock` (the
// default) locks the same way as `lock`.
unsafe impl kernel::sync::lock::Backend for BhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: the caller ensures `ptr` is valid for writes, and `name`
        // and `key` valid for reads for good.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller ensures `ptr` is a lock `init` initialised.
        unsafe { crate::ffi::rrdma_shim_spin_lock_bh(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock at `ptr`.
        unsafe { crate::ffi::rrdma_shim_spin_unlock_bh(ptr) }
    }

    #[cfg(not(rrdma_compat = "k6_12"))]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: the caller ensures `ptr` is a lock `init` initialised.
        unsafe { crate::ffi::rrdma_shim_spin_trylock_bh(ptr) }.then_some(())
    }

    #[cfg(not(rrdma_compat = "k6_12"))]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: the caller ensures `ptr` is a lock `init` initialised.
        unsafe { crate::ffi::rrdma_shim_spin_assert_held(ptr) }
    }
}
