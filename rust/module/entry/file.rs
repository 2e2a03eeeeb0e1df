// SPDX-License-Identifier: GPL-2.0

//! The `file_operations` of `/dev/rrdma` (`shim/chardev.c`): open, release,
//! ioctl, mmap, show_fdinfo, read and poll's readiness. The file's state is
//! one `Arc<FileState>` reference, handed to C by open and taken back by
//! release.

use core::ptr::NonNull;

use kernel::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use super::context;
use crate::abi::uapi::Op;
use crate::ffi::{self, SeqFile, VmArea};
use crate::file::FileState;
use crate::foreign;
use crate::vma::NewVma;

/// Borrows the file state the shim hands back.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and the file is open for `'a`.
unsafe fn borrow<'a>(state: *mut c_void) -> ArcBorrow<'a, FileState> {
    // SAFETY: by the function's safety requirements, `state` is the
    // reference `open` handed to C, alive until `release`.
    unsafe { foreign::borrow::<FileState>(state) }
}

/// `open`: allocates the file's state.
///
/// # Safety
///
/// `ctx` is the pointer the shim was registered with, `waitq` the file's
/// wait queue (valid until release returns), and `out` is valid for a
/// write.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_open(
    ctx: *mut c_void,
    waitq: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let context: Arc<_> = unsafe { context(ctx) }.into();
    let Some(waitq) = NonNull::new(waitq) else {
        return kernel::error::code::EINVAL.to_errno();
    };
    // SAFETY: by the function's safety requirements; the file's release
    // ends every connection, and with them every completion, before it
    // returns.
    let waitq = unsafe { ffi::FileWaitq::new(waitq) };
    match FileState::open(context, waitq) {
        Ok(state) => {
            // SAFETY: `out` is valid by the function's safety requirements.
            unsafe { *out = foreign::into_c(state) };
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
    // `open` handed to C, and C is done with it.
    let state: Arc<FileState> = unsafe { foreign::from_c(state) };
    state.release();
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
        Ok(n) => n as c_long,
        Err(e) => e.to_errno() as c_long,
    }
}

/// `uring_cmd`: one operation from an io_uring command; `shim/uring.c`
/// checked the SQE's size, its `cmd_op` and that the fields it does not use
/// are zero, and copied the operation. Returns 0
/// when the operation was posted (the shim then returns `-EIOCBQUEUED` and
/// the operation's completion posts the CQE), or the negative errno.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live; `cmd` is the
/// io_uring command being issued; `op` points to a `struct rrdma_op`.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_uring_op(
    state: *mut c_void,
    cmd: *mut ffi::IoUringCmd,
    op: *const c_void,
    nonblock: bool,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    let (Some(cmd), false) = (NonNull::new(cmd), op.is_null()) else {
        return kernel::error::code::EINVAL.to_errno();
    };
    // SAFETY: `op` points to the shim's copy of a `struct rrdma_op`
    // (`Op::SIZE` bytes, checked against the header by the ABI tests).
    let op = Op::decode(unsafe { &*op.cast::<[u8; Op::SIZE]>() });
    // SAFETY: `cmd` is being issued to rrdma; the shim returns
    // `-EIOCBQUEUED` exactly when this returns 0, which is when the posted
    // operation kept `cmd` (on an error it was dropped unused).
    let cmd = unsafe { ffi::UringCmd::new(cmd) };
    match state.uring_op(cmd, &op, nonblock) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
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
    let Some(vma) = NonNull::new(vma) else {
        return EINVAL.to_errno();
    };
    // SAFETY: by the function's safety requirements.
    let vma = unsafe { NewVma::new(vma) };
    match state.mmap(vma) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `show_fdinfo`: per-file object counts.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live; `m` is the
/// seq_file being written.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_show_fdinfo(state: *mut c_void, m: *mut SeqFile) {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    for (key, value) in state.fdinfo() {
        // SAFETY: `m` is valid by the function's safety requirements and
        // `key` is NUL-terminated.
        unsafe { ffi::rrdma_shim_seq_u64(m, key.as_ptr().cast(), value) };
    }
}

/// `read`: whole completion records, `-EAGAIN` when there are none (the
/// shim sleeps unless `O_NONBLOCK`).
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_read(
    state: *mut c_void,
    buf: *mut c_char,
    len: usize,
    _nonblock: bool,
) -> c_long {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    match state.read(buf as u64, len) {
        Ok(n) => n as c_long,
        Err(e) => e.to_errno() as c_long,
    }
}

/// Whether completions are waiting (poll and blocking read).
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_readable(state: *mut c_void) -> bool {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    state.readable()
}
