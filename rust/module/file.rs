// SPDX-License-Identifier: GPL-2.0

//! Per-open-file state of `/dev/rrdma`: ioctl dispatch, mmap and fdinfo.
//!
//! Locking: `objects` is never held across a user copy (a fault takes the
//! mmap lock, and mmap(2) takes `objects` under the mmap lock) nor across
//! page allocation.

use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, ArcBorrow, Mutex};

use crate::abi::{
    self,
    errno::{EINVAL, ENXIO},
    ioctl::{Command, Decoded},
    region::{validate_create, MapRequest},
    uapi::{RegionCreate, RegionDestroy},
};
use crate::context::Context;
use crate::ffi::{self, warn_user, SeqFile, VmArea, VmaInfo};
use crate::info;
use crate::objects::{Object, Objects};
use crate::region::Region;
use crate::uarg;

/// State of one open `/dev/rrdma`.
#[pin_data]
pub(crate) struct FileState {
    context: Arc<Context>,
    #[pin]
    objects: Mutex<Objects>,
}

impl FileState {
    fn ioctl(&self, cmd: u32, arg: u64) -> Result {
        // Unknown commands are routine (isatty() probes): no warning.
        let d = abi::ioctl::decode(cmd).map_err(abi::error)?;
        match d.cmd {
            Command::GetInfo => info::get_info(&self.context, arg, &d),
            Command::RegionCreate => self.region_create(arg, &d),
            Command::RegionDestroy => self.region_destroy(arg, &d),
        }
    }

    fn region_create(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = RegionCreate::decode(&uarg::read::<{ RegionCreate::SIZE }>(arg, d)?);
        // SAFETY: no preconditions.
        let max = unsafe { ffi::rrdma_shim_max_region_bytes() };
        let geometry = validate_create(&req, max).map_err(|e| {
            warn_user!(
                "REGION_CREATE: invalid argument (block size {}, blocks {}, flags {:#x}, reserved {:#x}, limit {} bytes): errno {}\n",
                req.block_size,
                req.nblocks,
                req.flags,
                req.reserved,
                max,
                e
            );
            abi::error(e)
        })?;
        let page = ffi::page_size();
        let offset = self
            .objects
            .lock()
            .alloc_mmap_offset(geometry.pages(page) * page)
            .map_err(abi::error)?;
        let region = Region::new(geometry, offset)?;
        let handle = self.objects.lock().insert(Object::Region(region))?;
        req.handle = handle;
        req.mmap_offset = offset;
        req.size = geometry.bytes();
        if let Err(e) = uarg::write(arg, d, &req.encode()) {
            // The caller never learned the handle: undo rather than keep an
            // object nobody can name until close.
            let region = self.objects.lock().remove_region(handle);
            drop(region);
            return Err(e);
        }
        Ok(())
    }

    fn region_destroy(&self, arg: u64, d: &Decoded) -> Result {
        let req = RegionDestroy::decode(&uarg::read::<{ RegionDestroy::SIZE }>(arg, d)?);
        if req.flags != 0 {
            warn_user!("REGION_DESTROY: flags {:#x} must be zero\n", req.flags);
            return Err(abi::error(EINVAL));
        }
        let region = self
            .objects
            .lock()
            .remove_region(req.handle)
            .map_err(abi::error)?;
        // The pages go when the last mapping of them does.
        drop(region);
        Ok(())
    }

    fn mmap(&self, vma: *mut VmArea) -> Result {
        let mut info = VmaInfo::default();
        // SAFETY: `vma` is the VMA of the mmap(2) call in progress.
        unsafe { ffi::rrdma_shim_vma_info(vma, &mut info) };
        let offset = info
            .pgoff
            .checked_mul(1 << info.page_shift)
            .ok_or_else(|| abi::error(ENXIO))?;
        let req = MapRequest {
            offset,
            len: info.end - info.start,
            shared: info.shared != 0,
            exec: info.exec != 0,
        };
        let region: Option<Arc<Region>> = self.objects.lock().region_at(offset);
        let Some(region) = region else {
            warn_user!("mmap: no region at offset {:#x}\n", offset);
            return Err(abi::error(ENXIO));
        };
        region.map(vma, &req)
    }
}

/// Borrows the file state the shim hands back.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and the file is open for `'a`.
unsafe fn borrow<'a>(state: *mut c_void) -> ArcBorrow<'a, FileState> {
    // SAFETY: by the function's safety requirements, `state` is the
    // reference `open` leaked with `Arc::into_raw`, alive until `release`.
    unsafe { ArcBorrow::from_raw(state.cast::<FileState>().cast_const()) }
}

/// `open`: allocates the file's state.
///
/// # Safety
///
/// `context` is the pointer the shim was registered with, and `out` is
/// valid for a write.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_open(context: *mut c_void, out: *mut *mut c_void) -> c_int {
    // SAFETY: by the function's safety requirements.
    let context: Arc<Context> = unsafe { Context::from_ffi(context) }.into();
    let state = Arc::pin_init(
        pin_init!(FileState {
            context,
            objects <- new_mutex!(Objects::new()),
        }),
        GFP_KERNEL,
    );
    match state {
        Ok(state) => {
            // SAFETY: `out` is valid by the function's safety requirements.
            unsafe { *out = Arc::into_raw(state).cast_mut().cast() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `release`: drops the file's state; every object of the file dies with it.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is not used afterwards.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_release(state: *mut c_void) {
    // SAFETY: by the function's safety requirements, this is the reference
    // `open` leaked.
    drop(unsafe { Arc::from_raw(state.cast::<FileState>().cast_const()) });
}

/// `unlocked_ioctl`.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_ioctl(
    state: *mut c_void,
    cmd: c_uint,
    arg: c_ulong,
) -> c_long {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    match state.ioctl(cmd, arg as u64) {
        Ok(()) => 0,
        Err(e) => e.to_errno() as c_long,
    }
}

/// `mmap`: maps a region.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live; `vma` is the VMA
/// of the mmap(2) call in progress.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_mmap(state: *mut c_void, vma: *mut VmArea) -> c_int {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    match state.mmap(vma) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `show_fdinfo`: per-file object counts, so that tests can see leaks.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live; `m` is the
/// seq_file being written.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_show_fdinfo(state: *mut c_void, m: *mut SeqFile) {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    let counts = state.objects.lock().counts();
    for (key, value) in [
        (&b"rrdma-regions\0"[..], counts.regions),
        (&b"rrdma-region-bytes\0"[..], counts.region_bytes),
    ] {
        // SAFETY: `m` is valid by the function's safety requirements and
        // `key` is NUL-terminated.
        unsafe { ffi::rrdma_shim_seq_u64(m, key.as_ptr().cast(), value) };
    }
}
