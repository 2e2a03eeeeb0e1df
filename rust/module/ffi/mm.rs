// SPDX-License-Identifier: GPL-2.0

//! Memory for regions (`shim/mm.c`): mapping a region into a VMA,
//! `RLIMIT_MEMLOCK`, page chunks, fdinfo; and the caller's own pages for a
//! registered region (`shim/umem.c`).

use kernel::ffi::{c_char, c_int, c_ulong, c_void};

/// Opaque `struct vm_area_struct`.
#[repr(C)]
pub(crate) struct VmArea {
    _opaque: [u8; 0],
}

/// Opaque `struct seq_file`.
#[repr(C)]
pub(crate) struct SeqFile {
    _opaque: [u8; 0],
}

/// Opaque `struct user_struct`.
#[repr(C)]
pub(crate) struct UserStruct {
    _opaque: [u8; 0],
}

/// `struct rrdma_shim_vma_info` (layout checked in `layout.rs`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct VmaInfo {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) shared: u32,
    pub(crate) exec: u32,
    pub(crate) page_shift: u32,
    pub(crate) pad: u32,
}

extern "C" {
    /// Reads the VMA's range, offset and flags.
    pub(crate) fn rrdma_shim_vma_info(vma: *mut VmArea, info: *mut VmaInfo);
    /// Sets a region VMA's flags and operations; `region` is a region
    /// reference the VMA owns from now on (dropped by its close).
    pub(crate) fn rrdma_shim_vma_setup(vma: *mut VmArea, region: *mut c_void);
    /// Charges `npages` to the caller's RLIMIT_MEMLOCK; NULL and `*err` on failure.
    pub(crate) fn rrdma_shim_memlock_charge(npages: c_ulong, err: *mut c_int) -> *mut UserStruct;
    /// Undoes [`rrdma_shim_memlock_charge`].
    pub(crate) fn rrdma_shim_memlock_uncharge(user: *mut UserStruct, npages: c_ulong);
    /// `seq_printf(m, "%s:\t%llu\n", key, value)`.
    pub(crate) fn rrdma_shim_seq_u64(m: *mut SeqFile, key: *const c_char, value: u64);
    /// Zeroed, split `2^order` pages, or NULL.
    pub(crate) fn rrdma_shim_alloc_chunk(order: u32) -> *mut c_void;
    /// Puts every page of a chunk from [`rrdma_shim_alloc_chunk`].
    pub(crate) fn rrdma_shim_free_chunk(page: *mut c_void, order: u32);
    /// `nth_page(page, n)`.
    pub(crate) fn rrdma_shim_nth_page(page: *mut c_void, n: c_ulong) -> *mut c_void;
    /// Pins `npages` pages of the caller's memory at `addr` into `pages`
    /// (0), or refuses with a negative errno and `*why` (a static string).
    pub(crate) fn rrdma_shim_umem_pin(
        addr: u64,
        npages: c_ulong,
        pages: *mut *mut c_void,
        why: *mut *const c_char,
    ) -> c_int;
    /// Unpins pages from [`rrdma_shim_umem_pin`], marking them dirty.
    pub(crate) fn rrdma_shim_umem_unpin(pages: *mut *mut c_void, npages: c_ulong);
}
