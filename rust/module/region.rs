// SPDX-License-Identifier: GPL-2.0

//! Regions: kernel-allocated, zeroed pages that userspace maps without copies
//! and that the NIC will read and write; or the caller's own memory, pinned
//! (REGION_REGISTER, [`crate::umem`]), which it maps already.
//!
//! The pages are allocated in physically contiguous chunks of up to
//! [`CHUNK_ORDER_MAX`] (falling back to smaller ones), split so that every
//! page is independent, and charged to the creator's `RLIMIT_MEMLOCK`. The
//! region keeps one descriptor per chunk, not per page: its own memory is a
//! small fraction of the region's. The pages are charged to the creator's
//! memory cgroup too.
//!
//! A mapping is the region's very pages, faulted in on first touch. Each
//! VMA of a region holds a reference on the region (see `shim/mm.c`), so a
//! mapping stays valid after REGION_DESTROY or close, and the region - its
//! pages and its `RLIMIT_MEMLOCK` charge together - goes when the last of
//! its handle, its mappings and its users does. A VMA copied into a fork(2)
//! child holds nothing and faults with SIGBUS.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;

use crate::abi::errno::{Errno, EINTR, EINVAL, ENOMEM, ENXIO};
use crate::abi::Result;
use kernel::sync::Arc;

use crate::abi::{self, blocks::Geometry, region::MapRequest};
use crate::caps::Charge;
use crate::ffi::{self, UserStruct};
use crate::umem::Pinned;
use crate::vma::NewVma;

/// Pages charged to a user's `RLIMIT_MEMLOCK`; uncharged on drop.
struct MemlockCharge {
    // INVARIANT: a reference on the user returned by the charge.
    user: NonNull<UserStruct>,
    npages: c_ulong,
}

// SAFETY: the user reference and the atomic counter may be released from
// any thread.
unsafe impl Send for MemlockCharge {}
// SAFETY: no `&self` method.
unsafe impl Sync for MemlockCharge {}

impl MemlockCharge {
    fn new(npages: usize) -> Result<Self> {
        let npages = npages as c_ulong;
        let mut err: c_int = 0;
        // SAFETY: `err` is a valid out-pointer.
        let user = unsafe { ffi::rrdma_shim_memlock_charge(npages, &mut err) };
        let user = NonNull::new(user).ok_or_else(|| Errno::new(-err).unwrap_or(ENOMEM))?;
        // INVARIANT: the charge succeeded and returned a user reference.
        Ok(Self { user, npages })
    }
}

impl Drop for MemlockCharge {
    fn drop(&mut self) {
        // SAFETY: charged in `new()` and uncharged only here.
        unsafe { ffi::rrdma_shim_memlock_uncharge(self.user.as_ptr(), self.npages) };
    }
}

/// Largest chunk order (64 KiB with 4 KiB pages).
pub(crate) const CHUNK_ORDER_MAX: u32 = 4;

/// `2^order` physically contiguous pages, split; each page's reference is
/// put on drop.
struct Chunk {
    // INVARIANT: from `rrdma_shim_alloc_chunk(order)`, put only in `drop`.
    page: NonNull<c_void>,
    order: u32,
    /// Index in the region of its first page.
    first: usize,
}

// SAFETY: pages may be freed from any thread.
unsafe impl Send for Chunk {}
// SAFETY: no `&self` method mutates.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn alloc(order: u32, first: usize) -> Option<Self> {
        // SAFETY: no preconditions.
        let page = unsafe { ffi::rrdma_shim_alloc_chunk(order) };
        // INVARIANT: allocated just above.
        NonNull::new(page).map(|page| Self { page, order, first })
    }

    fn pages(&self) -> usize {
        1 << self.order
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: by the type invariant.
        unsafe { ffi::rrdma_shim_free_chunk(self.page.as_ptr(), self.order) };
    }
}

/// A region's pages.
enum Backing {
    /// Allocated by the module, in chunks in page order; mapped by mmap(2)
    /// at the region's offset.
    Allocated {
        chunks: KVec<Chunk>,
        mmap_offset: u64,
    },
    /// The caller's own pages (REGION_REGISTER); not mapped by rrdma.
    Pinned(Pinned),
}

/// A region.
/// Field order is drop order: the pages go before their memlock charge.
pub(crate) struct Region {
    geometry: Geometry,
    backing: Backing,
    npages: usize,
    destroyed: AtomicBool,
    /// Exports of its file that name it: kept by `export::Exports`
    /// under the file's exports lock, so that REGION_DESTROY's "is it
    /// exported" is O(1), not a walk of every export.
    exports: AtomicU32,
    /// Registration cache entries of it, on every connection of its file
    /// (a connection's path's `LocalReg`): REGION_DESTROY visits the
    /// connections only if there are any.
    cached: AtomicU32,
    _memlock: MemlockCharge,
    /// Its file's region charge (`None`: a disk's staging region).
    _charge: Option<Charge>,
}

impl Region {
    /// Allocates a zeroed region of `geometry`, to be mapped at `mmap_offset`.
    ///
    /// Interruptible by fatal signals; an allocation that would exceed the
    /// caller's `RLIMIT_MEMLOCK` fails with `ENOMEM` before any page is taken.
    pub(crate) fn new(
        geometry: Geometry,
        mmap_offset: u64,
        charge: Option<Charge>,
    ) -> Result<Arc<Self>> {
        let npages = usize::try_from(geometry.pages(ffi::page_size())).map_err(|_| EINVAL)?;
        let memlock = MemlockCharge::new(npages).inspect_err(|_| {
            crate::ffi::warn_user!(
                "{}: {} pages exceed RLIMIT_MEMLOCK (see ulimit -l)\n",
                // Without a file's charge: a disk's staging region.
                if charge.is_some() {
                    "REGION_CREATE"
                } else {
                    "BLK_MAP"
                },
                npages
            );
        })?;
        let mut chunks = KVec::new();
        let mut have = 0;
        let mut order = CHUNK_ORDER_MAX;
        while have < npages {
            if ffi::should_stop() {
                return Err(EINTR);
            }
            while order > 0 && (1usize << order) > npages - have {
                order -= 1;
            }
            match Chunk::alloc(order, have) {
                Some(c) => {
                    have += c.pages();
                    chunks.push(c, GFP_KERNEL)?;
                }
                // Memory is fragmented: smaller chunks from now on.
                None if order > 0 => order -= 1,
                None => return Err(ENOMEM),
            }
        }
        Ok(Arc::new(
            Self {
                geometry,
                backing: Backing::Allocated {
                    chunks,
                    mmap_offset,
                },
                npages,
                destroyed: AtomicBool::new(false),
                exports: AtomicU32::new(0),
                cached: AtomicU32::new(0),
                _memlock: memlock,
                _charge: charge,
            },
            GFP_KERNEL,
        )?)
    }

    /// A region of `geometry` over the caller's memory at `addr` (page
    /// aligned, whole pages: checked by `abi::region::validate_register`),
    /// pinned. Charged to `RLIMIT_MEMLOCK` before any page is pinned.
    pub(crate) fn register(geometry: Geometry, addr: u64, charge: Charge) -> Result<Arc<Self>> {
        let npages = usize::try_from(geometry.pages(ffi::page_size())).map_err(|_| EINVAL)?;
        let memlock = MemlockCharge::new(npages).inspect_err(|_| {
            crate::ffi::warn_user!(
                "REGION_REGISTER: {} pages exceed RLIMIT_MEMLOCK (see ulimit -l)\n",
                npages
            );
        })?;
        let pinned = Pinned::pin(addr, npages)?;
        Ok(Arc::new(
            Self {
                geometry,
                backing: Backing::Pinned(pinned),
                npages,
                destroyed: AtomicBool::new(false),
                exports: AtomicU32::new(0),
                cached: AtomicU32::new(0),
                _memlock: memlock,
                _charge: Some(charge),
            },
            GFP_KERNEL,
        )?)
    }

    /// The region's geometry.
    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Marks the region's handle destroyed: connections drop their cached
    /// registrations of it once no operation uses them.
    pub(crate) fn mark_destroyed(&self) {
        // SeqCst, as `is_destroyed` and the cache count: REGION_DESTROY
        // marks, then reads the count; a cache entry's maker counts, then
        // reads the mark (`CacheCount`); one of them sees the other.
        self.destroyed.store(true, Ordering::SeqCst);
    }

    /// Whether an export of its file names it.
    pub(crate) fn is_exported(&self) -> bool {
        self.exports.load(Ordering::Relaxed) != 0
    }

    /// One more export names it (`up`), or one fewer.
    pub(crate) fn count_export(&self, up: bool) {
        if up {
            self.exports.fetch_add(1, Ordering::Relaxed);
        } else {
            self.exports.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether a connection's registration cache holds it.
    pub(crate) fn is_cached(&self) -> bool {
        self.cached.load(Ordering::SeqCst) != 0
    }

    /// One more cache entry holds it (`up`), or one fewer.
    pub(crate) fn count_cached(&self, up: bool) {
        if up {
            self.cached.fetch_add(1, Ordering::SeqCst);
        } else {
            self.cached.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether the region's handle was destroyed.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::SeqCst)
    }

    /// Number of pages.
    pub(crate) fn npages(&self) -> usize {
        self.npages
    }

    /// Pointers to pages `[first, end)` (clamped to the region), in order,
    /// for registration and mapping.
    pub(crate) fn page_ptrs(&self, first: usize, end: usize) -> Result<KVVec<*mut c_void>> {
        let end = end.min(self.npages);
        let mut out = KVVec::with_capacity(end.saturating_sub(first), GFP_KERNEL)?;
        let chunks = match &self.backing {
            Backing::Allocated { chunks, .. } => chunks,
            Backing::Pinned(p) => {
                for &page in p.pages().get(first..end).unwrap_or(&[]) {
                    out.push(page, GFP_KERNEL)?;
                }
                return Ok(out);
            }
        };
        let mut base = 0;
        for c in chunks.iter() {
            let n = c.pages();
            if base + n > first && base < end {
                for i in first.max(base)..end.min(base + n) {
                    // SAFETY: `i - base < 2^order`: a page of this chunk.
                    let p =
                        unsafe { ffi::rrdma_shim_nth_page(c.page.as_ptr(), (i - base) as c_ulong) };
                    out.push(p, GFP_KERNEL)?;
                }
            }
            base += n;
        }
        Ok(out)
    }

    /// The offset userspace passes to mmap(2); none for a registered
    /// region.
    pub(crate) fn mmap_offset(&self) -> Option<u64> {
        match &self.backing {
            Backing::Allocated { mmap_offset, .. } => Some(*mmap_offset),
            Backing::Pinned(_) => None,
        }
    }

    /// Bytes a mapping of the region covers (whole pages).
    pub(crate) fn mapped_len(&self) -> u64 {
        self.npages as u64 * ffi::page_size()
    }

    /// The page a fault at file page offset `pgoff` of a mapping maps, or
    /// null (SIGBUS) outside the region.
    pub(crate) fn fault_page(&self, pgoff: u64) -> *mut c_void {
        let Some(offset) = self.mmap_offset() else {
            return core::ptr::null_mut();
        };
        match pgoff.checked_sub(offset / ffi::page_size()) {
            Some(i) => self.page_at(i as usize),
            None => core::ptr::null_mut(),
        }
    }

    /// Page `index` of the region, or null past the end.
    fn page_at(&self, index: usize) -> *mut c_void {
        if index >= self.npages {
            return core::ptr::null_mut();
        }
        let chunks = match &self.backing {
            Backing::Allocated { chunks, .. } => chunks,
            Backing::Pinned(p) => {
                return p
                    .pages()
                    .get(index)
                    .copied()
                    .unwrap_or(core::ptr::null_mut())
            }
        };
        // Chunks are in page order: the last one starting at or before it.
        let i = chunks.as_slice().partition_point(|c| c.first <= index) - 1;
        let c = &chunks[i];
        // SAFETY: `index - c.first < 2^order`: a page of this chunk.
        unsafe { ffi::rrdma_shim_nth_page(c.page.as_ptr(), (index - c.first) as c_ulong) }
    }

    /// Maps the region into `vma` after checking the request: the VMA
    /// takes a reference on the region and faults its pages in.
    pub(crate) fn map(self: &Arc<Self>, vma: NewVma<'_>, req: &MapRequest) -> Result {
        // A registered region is not rrdma's to map (`region_at` never
        // finds one).
        let offset = self.mmap_offset().ok_or(ENXIO)?;
        abi::region::check_map(req, offset, self.mapped_len()).inspect_err(|e| {
            crate::ffi::warn_user!(
                "mmap: refused (offset {:#x}, len {}, shared {}, exec {}; region at {:#x}, {} bytes): errno {}\n",
                req.offset,
                req.len,
                req.shared,
                req.exec,
                offset,
                self.mapped_len(),
                e.get()
            );
        })?;
        vma.map_region(self.clone());
        Ok(())
    }
}
