// SPDX-License-Identifier: GPL-2.0

//! The VMA of an mmap(2) call in progress, as a type: built once by the
//! `mmap` entry point, it lets safe code read the request and hand the VMA
//! a region.

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::sync::Arc;

use crate::ffi::{self, VmArea, VmaInfo};
use crate::foreign;
use crate::region::Region;

/// A VMA being set up by `file_operations.mmap`.
///
/// # Invariants
///
/// `raw` is the VMA of the mmap(2) call in progress (the caller holds the
/// mmap lock) for `'a`.
pub(crate) struct NewVma<'a> {
    raw: NonNull<VmArea>,
    _call: PhantomData<&'a mut VmArea>,
}

impl NewVma<'_> {
    /// Wraps the VMA `file_operations.mmap` was given.
    ///
    /// # Safety
    ///
    /// `raw` is that VMA, and the mmap(2) call lasts for `'a`.
    pub(crate) unsafe fn new(raw: NonNull<VmArea>) -> Self {
        // INVARIANT: by the function's safety requirements.
        Self {
            raw,
            _call: PhantomData,
        }
    }

    /// What the caller asked for: range, page offset, flags.
    pub(crate) fn info(&self) -> VmaInfo {
        let mut info = VmaInfo::default();
        // SAFETY: the VMA is valid (type invariant); `info` is a valid
        // out-pointer.
        unsafe { ffi::rrdma_shim_vma_info(self.raw.as_ptr(), &mut info) };
        info
    }

    /// Makes the VMA map `region`, whose reference it owns from now on (a
    /// split VMA takes one more, each VMA's close gives its own back, see
    /// `entry/region.rs`).
    pub(crate) fn map_region(self, region: Arc<Region>) {
        // SAFETY: the VMA is being set up by this mmap(2) call (type
        // invariant); the pointer is a region reference, which is what the
        // VMA operations expect.
        unsafe { ffi::rrdma_shim_vma_setup(self.raw.as_ptr(), foreign::into_c(region)) };
    }
}
