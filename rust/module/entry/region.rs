// SPDX-License-Identifier: GPL-2.0

//! The `vm_operations` of a mapped region (`shim/mm.c`): every VMA
//! holds one region reference, handed over by `Region::map`.

use kernel::ffi::{c_ulong, c_void};
use kernel::sync::Arc;

use crate::foreign;
use crate::region::Region;

/// A VMA of a region was split or moved: the new VMA holds a reference.
///
/// # Safety
///
/// `region` is a region reference a VMA holds (from `Region::map`).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_region_get(region: *mut c_void) {
    // SAFETY: by the function's safety requirements the region is alive.
    let r: Arc<Region> = unsafe { foreign::borrow::<Region>(region) }.into();
    // The new VMA's reference; given back by its close.
    let _ = foreign::into_c(r);
}

/// A VMA of a region is gone: its reference goes.
///
/// # Safety
///
/// `region` is a region reference the closing VMA holds, not used after.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_region_put(region: *mut c_void) {
    // SAFETY: by the function's safety requirements.
    drop(unsafe { foreign::from_c::<Region>(region) });
}

/// The page a fault at file page offset `pgoff` of a region's VMA maps, or
/// null (SIGBUS) outside the region.
///
/// # Safety
///
/// `region` is a region reference the faulting VMA holds.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_region_page(region: *mut c_void, pgoff: c_ulong) -> *mut c_void {
    // SAFETY: by the function's safety requirements the region is alive
    // for the duration of the fault.
    let r = unsafe { foreign::borrow::<Region>(region) };
    r.fault_page(pgoff as u64)
}
