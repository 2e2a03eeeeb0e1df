// SPDX-License-Identifier: GPL-2.0

//! The caller's own memory as a region's pages (REGION_REGISTER): pinned
//! long term by `shim/umem.c`, which refuses memory a NIC may not keep,
//! and unpinned when the region goes.

use core::ptr;

use kernel::ffi::{c_char, c_ulong, c_void};
use kernel::prelude::*;
use kernel::str::CStr;

use crate::abi::errno::{Errno, EFAULT, ENOMEM};
use crate::abi::Result;
use crate::ffi;

/// Pages of the caller's memory, pinned; unpinned on drop.
///
/// # Invariants
///
/// Every entry of `pages` is a page pinned by `rrdma_shim_umem_pin`, and
/// unpinned only by `drop`.
pub(crate) struct Pinned {
    pages: KVVec<*mut c_void>,
}

// SAFETY: pinned pages may be used and unpinned from any thread.
unsafe impl Send for Pinned {}
// SAFETY: `&Pinned` only reads the page pointers.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// Pins the `npages` pages at `addr` of the calling process, which
    /// must be anonymous, shmem or hugetlb memory, mapped and writable;
    /// says why in a rate-limited line when it refuses.
    pub(crate) fn pin(addr: u64, npages: usize) -> Result<Self> {
        let mut pages = KVVec::with_capacity(npages, GFP_KERNEL).map_err(|_| ENOMEM)?;
        for _ in 0..npages {
            pages
                .push(ptr::null_mut(), GFP_KERNEL)
                .map_err(|_| ENOMEM)?;
        }
        let mut why: *const c_char = ptr::null();
        // SAFETY: `pages` has room for `npages` entries; `why` is a valid
        // out-pointer. Called from an ioctl, in the caller's context.
        let ret = unsafe {
            ffi::rrdma_shim_umem_pin(addr, npages as c_ulong, pages.as_mut_ptr(), &mut why)
        };
        if ret != 0 {
            let e = Errno::new(-ret).unwrap_or(EFAULT);
            if !why.is_null() {
                // SAFETY: the shim sets `why` to a static NUL-terminated
                // string.
                let why = unsafe { CStr::from_char_ptr(why) };
                ffi::warn_user!(
                    "REGION_REGISTER: {} pages at {:#x}: {}: errno {}\n",
                    npages,
                    addr,
                    why.to_str().unwrap_or("?"),
                    e.get()
                );
            }
            return Err(e);
        }
        // INVARIANT: every page was pinned just above.
        Ok(Self { pages })
    }

    /// The pinned pages.
    pub(crate) fn pages(&self) -> &[*mut c_void] {
        &self.pages
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, pinned and not unpinned before.
        unsafe { ffi::rrdma_shim_umem_unpin(self.pages.as_mut_ptr(), self.pages.len() as c_ulong) };
    }
}
