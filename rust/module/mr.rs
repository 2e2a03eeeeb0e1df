// SPDX-License-Identifier: GPL-2.0

//! Fast-registration memory regions over a run of a region's pages.
//!
//! A region is registered in chunks of `1 << chunk_shift` bytes (at most
//! what the device maps per registration); chunk `i` is registered at I/O
//! virtual address `i << chunk_shift`, so addresses on the wire are offsets
//! in the region. Each [`Mr`] is a fresh registration with a fresh key and
//! is deregistered (its keys invalidated) on drop. Each counts against the
//! device's `max_mr` ([`crate::device::DeviceCtx::take_mr`]).

use core::ptr::NonNull;

use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::abi::errno::{Errno, EINVAL, ENOMEM};
use crate::abi::Result;
use kernel::sync::Arc;

use crate::ffi::{self, ShimMr};
use crate::region::Region;
use crate::verbs::Pd;

/// One registration; deregistered on drop.
///
/// # Invariants
///
/// `ptr` was allocated by `rrdma_shim_mr_alloc` in `pd` over pages of a
/// region its owner keeps alive, and is freed only in `drop`; it holds one
/// of the device's registrations (`take_mr`), given back in `drop`.
pub(crate) struct Mr {
    ptr: NonNull<ShimMr>,
    lkey: u32,
    rkey: u32,
    pd: Arc<Pd>,
}

// SAFETY: an MR may be used and deregistered from any thread.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads immutable keys.
unsafe impl Sync for Mr {}

impl Mr {
    /// Maps chunk `chunk` of `region` (chunks of `1 << chunk_shift` bytes)
    /// in `pd`. The caller posts the registration work request.
    pub(crate) fn new(pd: &Arc<Pd>, region: &Region, chunk: u64, chunk_shift: u32) -> Result<Self> {
        let page_shift = ffi::page_size().trailing_zeros();
        let per_chunk = 1usize << (chunk_shift - page_shift);
        let first = usize::try_from(chunk).map_err(|_| EINVAL)? * per_chunk;
        if first >= region.npages() {
            return Err(EINVAL);
        }
        let end = region
            .npages()
            .min(first.checked_add(per_chunk).ok_or(EINVAL)?);
        let mut ptrs = region.page_ptrs(first, end)?;
        pd.device().take_mr()?;
        let mut err: c_int = 0;
        // SAFETY: `pd` is live while referenced; `ptrs` holds `end - first`
        // valid pages that the region keeps allocated for as long as the
        // region lives, and the caller keeps the region alive as long as
        // this MR.
        let raw = unsafe {
            ffi::rrdma_shim_mr_alloc(
                pd.as_ptr(),
                ptrs.as_mut_ptr(),
                (end - first) as u32,
                chunk << chunk_shift,
                &mut err,
            )
        };
        let Some(ptr) = NonNull::new(raw) else {
            pd.device().put_mr();
            return Err(Errno::new(-err).unwrap_or(ENOMEM));
        };
        let (mut lkey, mut rkey) = (0, 0);
        // SAFETY: `ptr` was just allocated.
        unsafe { ffi::rrdma_shim_mr_keys(ptr.as_ptr(), &mut lkey, &mut rkey) };
        // INVARIANT: allocated just above in `pd`, with one of its device's
        // registrations taken.
        Ok(Self {
            ptr,
            lkey,
            rkey,
            pd: pd.clone(),
        })
    }

    /// The shim object, for a registration work request.
    pub(crate) fn as_ptr(&self) -> *mut ShimMr {
        self.ptr.as_ptr()
    }

    /// Local key.
    pub(crate) fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Remote key.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }
}

/// A registration lent to work requests by an owner that keeps it
/// registered until every request built from it has completed or been
/// flushed. A [`ShimWr`](crate::ffi::ShimWr) names a local registration
/// only through one, which is what makes posting safe
/// ([`crate::verbs::QpRef::post`]).
///
/// # Invariants
///
/// `mr` stays registered until every work request built from this one
/// has completed or been flushed.
#[derive(Clone, Copy)]
pub(crate) struct Lent<'a> {
    mr: &'a Mr,
}

impl<'a> Lent<'a> {
    /// Lends `mr` to work requests.
    ///
    /// # Safety
    ///
    /// The owner of `mr` keeps it registered until every work request
    /// built from the result has completed or been flushed.
    pub(crate) unsafe fn new(mr: &'a Mr) -> Self {
        // INVARIANT: by the function's safety requirements.
        Self { mr }
    }

    /// The shim object, for a registration work request.
    pub(crate) fn as_ptr(&self) -> *mut ShimMr {
        self.mr.as_ptr()
    }

    /// Local key.
    pub(crate) fn lkey(&self) -> u32 {
        self.mr.lkey()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: by the type invariant; no work request uses it any more
        // (the owners drop MRs only once their registrations completed).
        unsafe { ffi::rrdma_shim_mr_free(self.ptr.as_ptr()) };
        self.pd.device().put_mr();
    }
}

/// The registration chunks of one region on one connection, registered
/// lazily as operations first touch them.
pub(crate) struct Chunks {
    mrs: KVec<Option<Mr>>,
}

impl Chunks {
    /// No chunk registered yet, for a region of `bytes` bytes.
    pub(crate) fn new(bytes: u64, shift: u32) -> Result<Self> {
        let n = usize::try_from(bytes.div_ceil(1u64 << shift)).map_err(|_| EINVAL)?;
        let mut mrs = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            mrs.push(None, GFP_KERNEL)?;
        }
        Ok(Self { mrs })
    }

    /// The registration of chunk `i`, if made.
    pub(crate) fn get(&self, i: usize) -> Option<&Mr> {
        self.mrs.get(i).and_then(|m| m.as_ref())
    }

    /// Stores the registration of chunk `i` (its registration work
    /// request was posted); gives `mr` back if the chunk already has one or
    /// does not exist.
    pub(crate) fn set(&mut self, i: usize, mr: Mr) -> Result<(), Mr> {
        match self.mrs.get_mut(i) {
            Some(slot @ None) => {
                *slot = Some(mr);
                Ok(())
            }
            _ => Err(mr),
        }
    }

    /// Takes the registration of chunk `i` back out: only for one whose
    /// registration work request was not posted, so that no posted
    /// request names it (the owners' invariants rely on it).
    pub(crate) fn take_unposted(&mut self, i: usize) -> Option<Mr> {
        self.mrs.get_mut(i).and_then(Option::take)
    }
}
