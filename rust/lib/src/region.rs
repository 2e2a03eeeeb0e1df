// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Regions: kernel memory blocks mapped into this process without copies,
//! or this process's own memory registered as a region.

use std::io;
use std::ptr::NonNull;

use rrdma_abi::uapi::{self, RegionCreate, RegionDestroy, RegionRegister};

use crate::Rrdma;

/// A region, mapped; or memory of this process registered as one
/// ([`Rrdma::register_region`]). Destroyed on drop, and unmapped if the
/// module mapped it.
#[derive(Debug)]
pub struct Region<'a> {
    dev: &'a Rrdma,
    handle: u32,
    block_size: u32,
    nblocks: u64,
    map: NonNull<u8>,
    map_len: usize,
    backing: Backing,
}

/// Whose memory a [`Region`] shows, and so what its destruction unmaps.
#[derive(Debug)]
enum Backing {
    /// The module's pages, mapped by [`Rrdma::create_region`]: unmapped.
    Mapped,
    /// Memory registered from a [`PageBuf`] the region owns, unmapped only
    /// after the region is destroyed: then the process no longer sees pages
    /// that a peer or an operation still in flight may write.
    Owned(Option<PageBuf>),
    /// The caller's memory ([`Rrdma::register_memory`]): left as it is.
    Caller,
}

// SAFETY: the mapping is plain shared memory; `Region` hands out slices only
// through `&self`/`&mut self`, so Rust's aliasing rules hold within this
// process.
unsafe impl Send for Region<'_> {}
// SAFETY: as above.
unsafe impl Sync for Region<'_> {}

impl Rrdma {
    /// Issues `REGION_CREATE` with `req`, returning the kernel's answer.
    pub fn region_create_raw(&self, req: &RegionCreate) -> io::Result<RegionCreate> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_REGION_CREATE, &mut b)?;
        Ok(RegionCreate::decode(&b))
    }

    /// Issues `REGION_DESTROY` for `handle` with `flags`.
    pub fn region_destroy_raw(&self, handle: u32, flags: u32) -> io::Result<()> {
        let mut b = RegionDestroy { handle, flags }.encode();
        self.ioctl_bytes(uapi::IOCTL_REGION_DESTROY, &mut b)
    }

    /// Creates a region of `nblocks` blocks of `block_size` bytes and maps it.
    pub fn create_region(&self, block_size: u32, nblocks: u64) -> io::Result<Region<'_>> {
        let out = self.region_create_raw(&RegionCreate {
            block_size,
            nblocks,
            ..RegionCreate::zeroed()
        })?;
        let page = page_size();
        let map_len = usize::try_from(out.size.div_ceil(page) * page)
            .map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        match self.map_raw(
            out.mmap_offset,
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
        ) {
            Ok(map) => Ok(Region {
                dev: self,
                handle: out.handle,
                block_size,
                nblocks,
                map,
                map_len,
                backing: Backing::Mapped,
            }),
            Err(e) => {
                let _ = self.region_destroy_raw(out.handle, 0);
                Err(e)
            }
        }
    }

    /// Issues `REGION_REGISTER` with `req`, returning the kernel's answer.
    pub fn region_register_raw(&self, req: &RegionRegister) -> io::Result<RegionRegister> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_REGION_REGISTER, &mut b)?;
        Ok(RegionRegister::decode(&b))
    }

    /// Registers `buf` (anonymous or memfd memory: [`PageBuf`]) as a
    /// region of `block_size` blocks, without copying it: operations move
    /// its bytes directly. The region owns `buf` and unmaps it once
    /// destroyed, so this process never sees its pages again while an
    /// export or an operation in flight may still write them.
    pub fn register_region(&self, buf: PageBuf, block_size: u32) -> io::Result<Region<'_>> {
        // SAFETY: `buf` is mapped for `buf.len` bytes, and the region owns
        // it from here on: nothing else reaches the memory, which `buf`'s
        // drop unmaps only after the region is destroyed.
        let mut region = unsafe { self.register_memory(buf.ptr, buf.len, block_size)? };
        region.backing = Backing::Owned(Some(buf));
        Ok(region)
    }

    /// Registers `len` bytes of this process's memory at `addr` as a region
    /// of `block_size` blocks, leaving the memory the caller's: destroying
    /// the region unpins it but does not unmap it (the C library's
    /// `rrdma_region_register`).
    ///
    /// # Safety
    ///
    /// `addr` must be valid for reads and writes of `len` bytes for as
    /// long as the region lives, and not be accessed through other
    /// references while a slice from [`Region::as_mut_slice`] is alive.
    pub unsafe fn register_memory(
        &self,
        addr: NonNull<u8>,
        len: usize,
        block_size: u32,
    ) -> io::Result<Region<'_>> {
        if block_size == 0 || !len.is_multiple_of(block_size as usize) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let nblocks = (len / block_size as usize) as u64;
        let out = self.region_register_raw(&RegionRegister {
            addr: addr.as_ptr() as u64,
            block_size,
            nblocks,
            ..RegionRegister::zeroed()
        })?;
        Ok(Region {
            dev: self,
            handle: out.handle,
            block_size,
            nblocks,
            map: addr,
            map_len: len,
            backing: Backing::Caller,
        })
    }

    /// mmap(2) of this file at `offset`.
    pub fn map_raw(
        &self,
        offset: u64,
        len: usize,
        prot: i32,
        flags: i32,
    ) -> io::Result<NonNull<u8>> {
        // SAFETY: a fresh mapping chosen by the kernel; nothing aliases it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                flags,
                self.raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(NonNull::new(p.cast()).expect("mmap returned NULL"))
    }
}

/// Zeroed, page-aligned memory of this process, to register as a region
/// ([`Rrdma::register_region`]): a private anonymous mapping
/// ([`PageBuf::new`]) or a shared mapping of a memfd ([`PageBuf::memfd`]);
/// unmapped on drop.
#[derive(Debug)]
pub struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain private memory, handed out only through `&self`/`&mut self`.
unsafe impl Send for PageBuf {}
// SAFETY: as above.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    /// `len` bytes of private anonymous memory (rounded up to whole
    /// pages).
    pub fn new(len: usize) -> io::Result<Self> {
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
    }

    /// `len` bytes of a new memfd (shmem), mapped shared (rounded up to
    /// whole pages); the descriptor is closed once mapped.
    pub fn memfd(len: usize) -> io::Result<Self> {
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"rrdma".as_ptr(), 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let page = page_size() as usize;
        let rounded = len.div_ceil(page).max(1) * page;
        // SAFETY: our own descriptor.
        let res = if unsafe { libc::ftruncate(fd, rounded as libc::off_t) } != 0 {
            Err(io::Error::last_os_error())
        } else {
            Self::map(rounded, libc::MAP_SHARED, fd)
        };
        // SAFETY: our own descriptor; the mapping keeps the memory.
        unsafe { libc::close(fd) };
        res
    }

    fn map(len: usize, flags: i32, fd: i32) -> io::Result<Self> {
        let page = page_size() as usize;
        let len = len.div_ceil(page).max(1) * page;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh mapping chosen by the kernel; nothing aliases it.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: NonNull::new(p.cast()).expect("mmap returned NULL"),
            len,
        })
    }

    /// The memory.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes mapped readable and writable while `self`
        // lives; `&mut self` excludes other slices.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: our own mapping, not used after this.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

impl Region<'_> {
    /// The region's handle in its file.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of blocks.
    pub fn nblocks(&self) -> u64 {
        self.nblocks
    }

    /// The start of the region's bytes, without making a slice of them
    /// (a peer, the kernel or other threads may write them meanwhile).
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// The region's bytes (the mapping itself: no copy).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `map_len` bytes, readable, and lives as long
        // as `self`; the region's size is at most `map_len`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.len()) }
    }

    /// The region's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` excludes other slices.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr(), self.len()) }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        (u64::from(self.block_size) * self.nblocks) as usize
    }

    /// Whether the region is empty (never: regions have at least one block).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> Region<'a> {
    /// Destroys the region, returning it with the error if the kernel
    /// refuses (`EBUSY` while it is exported); dropping it destroys it too,
    /// but cannot say whether that worked.
    pub fn destroy(mut self) -> Result<(), (Region<'a>, io::Error)> {
        match self.dev.region_destroy_raw(self.handle, 0) {
            Ok(()) => {
                self.release_memory();
                std::mem::forget(self);
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }

    /// Unmaps what the region's destruction unmaps.
    fn release_memory(&mut self) {
        match &mut self.backing {
            // SAFETY: our own mapping, not used after this.
            Backing::Mapped => unsafe {
                libc::munmap(self.map.as_ptr().cast(), self.map_len);
            },
            // Unmapped by `PageBuf`'s drop.
            Backing::Owned(buf) => drop(buf.take()),
            Backing::Caller => {}
        }
    }
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        // A module mapping may go first: the pages live on while the
        // region does. Registered memory goes only after the destroy,
        // whether or not it succeeded (an export keeps the pages pinned;
        // the process no longer sees them either way).
        let _ = self.dev.region_destroy_raw(self.handle, 0);
        self.release_memory();
    }
}
