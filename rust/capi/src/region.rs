// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `struct rrdma_region`: a region created by the module and mapped, or
//! the caller's own memory registered as one.

use core::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use rrdma_lib::Region;

use crate::device::{device, rrdma};
use crate::{einval, fail, fail_null};

/// A region of a `struct rrdma`.
pub struct rrdma_region {
    pub(crate) region: Region<'static>,
    pub(crate) owner: &'static rrdma,
}

/// The region behind `r`.
///
/// # Safety
///
/// `r` must be NULL or a live region of this library.
pub(crate) unsafe fn region<'a>(r: *const rrdma_region) -> Option<&'a rrdma_region> {
    // SAFETY: by the caller's promise.
    unsafe { r.as_ref() }
}

fn boxed(owner: &'static rrdma, region: Region<'static>) -> *mut rrdma_region {
    owner.hold();
    Box::into_raw(Box::new(rrdma_region { region, owner }))
}

/// Creates a region of `nblocks` blocks of `block_size` bytes (a power of
/// two from 512 to 1 MiB) in kernel memory, and maps it: its bytes are at
/// `rrdma_region_addr`, zeroed, without copies. Charged to RLIMIT_MEMLOCK.
///
/// Errors: `EINVAL` (a size above), `EOVERFLOW` (larger than the module's
/// `max_region_mb`), `ENOMEM` (RLIMIT_MEMLOCK or no memory), `ENOSPC`
/// (the file's objects are at their limit).
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed.
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_create(
    dev: *mut rrdma,
    block_size: u32,
    nblocks: u64,
) -> *mut rrdma_region {
    // SAFETY: by the caller's promise; the object count keeps `dev` open
    // while the region lives.
    let Some(owner) = (unsafe { device(dev) }) else {
        return fail_null(einval());
    };
    match owner.dev.create_region(block_size, nblocks) {
        Ok(r) => boxed(owner, r),
        Err(e) => fail_null(e),
    }
}

/// Registers `len` bytes of the caller's memory at `addr` (page aligned;
/// `len` a whole number of pages and of blocks) as a region of
/// `block_size` blocks, without copying: anonymous memory, a memfd or
/// tmpfs mapping, or hugetlb memory, all writable. The pages stay pinned
/// until the region is destroyed, whatever the process does to its mapping
/// meanwhile; destroying the region does not unmap them.
///
/// Errors: `EINVAL`, `EFAULT` (not mapped), `EACCES` (not writable),
/// `EOPNOTSUPP` (memory a NIC cannot use: device mappings, DAX, other
/// file-backed memory), `ENOMEM` (RLIMIT_MEMLOCK), `EOVERFLOW`, `ENOSPC`.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed; `addr` must stay
/// mapped while the region lives (the library never reads or writes it).
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_register(
    dev: *mut rrdma,
    addr: *mut c_void,
    len: usize,
    block_size: u32,
) -> *mut rrdma_region {
    // SAFETY: as in `rrdma_region_create`.
    let (Some(owner), Some(addr)) = (unsafe { device(dev) }, NonNull::new(addr.cast::<u8>()))
    else {
        return fail_null(einval());
    };
    // SAFETY: the caller keeps the memory mapped while the region lives;
    // this library makes no slice of it (`rrdma_region_addr` returns the
    // pointer).
    match unsafe { owner.dev.register_memory(addr, len, block_size) } {
        Ok(r) => boxed(owner, r),
        Err(e) => fail_null(e),
    }
}

/// The region's bytes: the mapping of a created region, or the memory a
/// registered one was made from. NULL for NULL.
///
/// # Safety
///
/// `r` must be NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_addr(r: *const rrdma_region) -> *mut c_void {
    // SAFETY: by the caller's promise.
    unsafe { region(r) }.map_or(std::ptr::null_mut(), |r| r.region.as_ptr().cast())
}

/// The region's size in bytes (block size times blocks); 0 for NULL.
///
/// # Safety
///
/// `r` must be NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_len(r: *const rrdma_region) -> usize {
    // SAFETY: by the caller's promise.
    unsafe { region(r) }.map_or(0, |r| r.region.len())
}

/// The region's block size; 0 for NULL.
///
/// # Safety
///
/// `r` must be NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_block_size(r: *const rrdma_region) -> u32 {
    // SAFETY: by the caller's promise.
    unsafe { region(r) }.map_or(0, |r| r.region.block_size())
}

/// The region's number of blocks; 0 for NULL.
///
/// # Safety
///
/// `r` must be NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_nblocks(r: *const rrdma_region) -> u64 {
    // SAFETY: by the caller's promise.
    unsafe { region(r) }.map_or(0, |r| r.region.nblocks())
}

/// Destroys `r` and frees it. `EBUSY` while it is exported: `r` then stays
/// as it was. A created region's mapping goes; a registered region's
/// memory stays mapped (the caller's), and a peer no longer reaches it.
///
/// # Safety
///
/// `r` must be NULL or a live region, not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn rrdma_region_destroy(r: *mut rrdma_region) -> c_int {
    if r.is_null() {
        return fail(einval());
    }
    // SAFETY: a live region from `Box::into_raw` in `boxed`, by the
    // caller's promise.
    let slot = unsafe { &mut *r };
    // SAFETY: moved out here, and below either written back or its box
    // freed without dropping it.
    let region = unsafe { std::ptr::read(&slot.region) };
    match region.destroy() {
        Ok(()) => {
            slot.owner.release();
            // SAFETY: from `Box::into_raw`; `ManuallyDrop` is transparent,
            // so the box is freed without dropping the region moved out.
            drop(unsafe { Box::from_raw(r.cast::<ManuallyDrop<rrdma_region>>()) });
            0
        }
        Err((region, e)) => {
            // SAFETY: the slot the region was read from, still allocated.
            unsafe { std::ptr::write(&mut slot.region, region) };
            fail(e)
        }
    }
}
