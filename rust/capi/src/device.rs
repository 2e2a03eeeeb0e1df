// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `struct rrdma`: an open `/dev/rrdma`, and the count of objects made from
//! it that keeps it open.

use core::ffi::{c_char, c_int, CStr};
use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use rrdma_lib::Rrdma;

use crate::{fail, fail_null};

/// An open `/dev/rrdma`. Its objects (regions, listeners, connections,
/// imports, rings) must be destroyed before it is closed.
pub struct rrdma {
    pub(crate) dev: Rrdma,
    /// Objects made from this file and not yet destroyed.
    objects: AtomicUsize,
}

impl rrdma {
    /// Counts a new object of this file.
    pub(crate) fn hold(&self) {
        self.objects.fetch_add(1, Ordering::Relaxed);
    }

    /// Uncounts a destroyed object.
    pub(crate) fn release(&self) {
        self.objects.fetch_sub(1, Ordering::Release);
    }
}

/// The `struct rrdma` behind `p`, for as long as an object made from it
/// lives.
///
/// # Safety
///
/// `p` must be NULL or a pointer from `rrdma_open` not yet closed; the
/// reference must not outlive the close, which the object count ensures
/// for objects that keep it (`rrdma_close` refuses while they live).
pub(crate) unsafe fn device<'a>(p: *const rrdma) -> Option<&'a rrdma> {
    // SAFETY: by the caller's promise.
    unsafe { p.as_ref() }
}

/// Opens the device node `path` (NULL: `/dev/rrdma`), non-blocking (which
/// only read(2) of its descriptor sees).
///
/// Errors: those of open(2) (`ENOENT`: the module is not loaded; `EACCES`:
/// see the udev rule and the `dev_mode` module parameter).
///
/// # Safety
///
/// `path` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rrdma_open(path: *const c_char) -> *mut rrdma {
    let path: &Path = if path.is_null() {
        Path::new(rrdma_lib::DEFAULT_PATH)
    } else {
        // SAFETY: a NUL-terminated string, by the caller's promise.
        Path::new(OsStr::from_bytes(
            unsafe { CStr::from_ptr(path) }.to_bytes(),
        ))
    };
    // Non-blocking reads: `rrdma_wait` polls first, and a waiter whose
    // completions another thread took must not sleep in read(2) past its
    // timeout. The errno of a failed open is kept as it is.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    match file {
        Ok(file) => Box::into_raw(Box::new(rrdma {
            dev: Rrdma::from_file(file),
            objects: AtomicUsize::new(0),
        })),
        Err(e) => fail_null(e),
    }
}

/// Closes `dev`. `EBUSY` (and `dev` stays open) while an object made from
/// it lives: destroy regions, listeners, connections, imports and rings
/// first. NULL is `EINVAL`.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed, and not in use
/// by another thread.
#[no_mangle]
pub unsafe extern "C" fn rrdma_close(dev: *mut rrdma) -> c_int {
    if dev.is_null() {
        return fail(crate::einval());
    }
    // SAFETY: a live `rrdma`, by the caller's promise.
    if unsafe { &*dev }.objects.load(Ordering::Acquire) != 0 {
        return fail(std::io::Error::from_raw_os_error(libc::EBUSY));
    }
    // SAFETY: from `Box::into_raw` in `rrdma_open`, and no object refers
    // to it any more.
    drop(unsafe { Box::from_raw(dev) });
    0
}

/// The file descriptor of `dev`, for poll(2) (readable: completions are
/// ready) or io_uring; owned by `dev`. `-EINVAL` for NULL.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed.
#[no_mangle]
pub unsafe extern "C" fn rrdma_fd(dev: *const rrdma) -> c_int {
    // SAFETY: by the caller's promise.
    match unsafe { device(dev) } {
        Some(d) => d.dev.raw_fd(),
        None => fail(crate::einval()),
    }
}
