// SPDX-License-Identifier: GPL-2.0

//! The one way an `Arc` crosses into C and back.
//!
//! C holds a reference as the pointer `Arc::into_raw` gives (the address of
//! the value, the same on every supported kernel, unlike
//! `ForeignOwnable::into_foreign`, whose pointer and signature changed
//! after 6.12). A callback borrows it for its duration; whoever owns the C
//! object takes the reference back when the object is gone.

use kernel::ffi::c_void;
use kernel::sync::{Arc, ArcBorrow};

/// Hands one reference of `this` to C.
pub(crate) fn into_c<T>(this: Arc<T>) -> *mut c_void {
    Arc::into_raw(this).cast_mut().cast()
}

/// The address C knows `this` by, without handing it a reference (for a
/// C object whose lifetime another handed reference already covers).
pub(crate) fn addr_of<T>(this: &Arc<T>) -> *mut c_void {
    core::ptr::from_ref::<T>(this).cast_mut().cast()
}

/// Borrows the value behind a pointer C holds.
///
/// # Safety
///
/// `ptr` came from [`into_c`] (or [`addr_of`]) for a `T`, and the reference
/// covering it is not taken back for `'a`.
pub(crate) unsafe fn borrow<'a, T>(ptr: *mut c_void) -> ArcBorrow<'a, T> {
    // SAFETY: by the function's safety requirements, `ptr` is the address
    // of a live `Arc<T>`'s value for `'a`.
    unsafe { ArcBorrow::from_raw(ptr.cast::<T>().cast_const()) }
}

/// Takes back the reference [`into_c`] handed to C.
///
/// # Safety
///
/// `ptr` came from [`into_c`] for a `T`, C no longer uses it, and this is
/// the only time that reference is taken back.
pub(crate) unsafe fn from_c<T>(ptr: *mut c_void) -> Arc<T> {
    // SAFETY: by the function's safety requirements.
    unsafe { Arc::from_raw(ptr.cast::<T>().cast_const()) }
}
