// SPDX-License-Identifier: GPL-2.0

//! Fast-registration MRs over region chunks (`shim/mr.c`).

use kernel::ffi::{c_int, c_void};

use super::IbPd;

/// Opaque `struct rrdma_shim_mr`: one fast-registration MR.
#[repr(C)]
pub(crate) struct ShimMr {
    _opaque: [u8; 0],
}

extern "C" {
    /// Allocates and maps an MR over `npages` pages at I/O address `iova`.
    pub(crate) fn rrdma_shim_mr_alloc(
        pd: *mut IbPd,
        pages: *mut *mut c_void,
        npages: u32,
        iova: u64,
        err: *mut c_int,
    ) -> *mut ShimMr;
    /// The MR's keys.
    pub(crate) fn rrdma_shim_mr_keys(m: *mut ShimMr, lkey: *mut u32, rkey: *mut u32);
    /// Deregisters and frees an MR.
    pub(crate) fn rrdma_shim_mr_free(m: *mut ShimMr);
}
