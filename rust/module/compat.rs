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
