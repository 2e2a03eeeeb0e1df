// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Exports (tokens), imports (`struct rrdma_remote`) and block devices.

use core::ffi::c_int;

use rrdma_lib::{Access, RemoteRegion};

use crate::conn::rrdma_conn;
use crate::device::{device, rrdma};
use crate::region::{region, rrdma_region};
use crate::{einval, fail, fail_null, ret, timeout};

/// A peer's region, imported over a connection.
pub struct rrdma_remote {
    pub(crate) remote: RemoteRegion<'static>,
    pub(crate) owner: &'static rrdma,
}

/// Exports `r` to peers with `access` (`RRDMA_ACCESS_READ`, or with
/// `RRDMA_ACCESS_WRITE`), to every connection of its `struct rrdma`, or
/// only to `only` when not NULL; stores the token to hand to peers in
/// `*token`. The export lasts until `rrdma_unexport` or close; the region
/// cannot be destroyed meanwhile.
///
/// Errors: `EINVAL`, `ENOSPC` (4096 exports per file).
///
/// # Safety
///
/// `r` must be NULL or a live region; `only` NULL or a live connection of
/// the same `struct rrdma`; `token` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rrdma_export_region(
    r: *const rrdma_region,
    access: u32,
    only: *const rrdma_conn,
    token: *mut u64,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(r) = (unsafe { region(r) }) else {
        return fail(einval());
    };
    if token.is_null() {
        return fail(einval());
    }
    let access = match access {
        a if a == Access::ReadOnly.bits() => Access::ReadOnly,
        a if a == Access::ReadWrite.bits() => Access::ReadWrite,
        _ => return fail(einval()),
    };
    // SAFETY: by the caller's promise.
    let only = unsafe { only.as_ref() };
    if only.is_some_and(|c| !std::ptr::eq(c.owner, r.owner)) {
        return fail(einval());
    }
    match r.owner.dev.export(&r.region, access, only.map(|c| &c.conn)) {
        Ok(export) => {
            // SAFETY: writable, by the caller's promise; unaligned is
            // allowed.
            unsafe { token.write_unaligned(export.token()) };
            // The token names the export from now on: `rrdma_unexport`
            // ends it, or the close of the file.
            std::mem::forget(export);
            0
        }
        Err(e) => fail(e),
    }
}

/// Revokes the export `token` of `dev`: importers' later operations fail
/// with `EKEYREVOKED`, and once this returns no write through the token
/// lands. An unknown token fails.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed.
#[no_mangle]
pub unsafe extern "C" fn rrdma_unexport(dev: *mut rrdma, token: u64) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(d) = (unsafe { device(dev) }) else {
        return fail(einval());
    };
    ret(d.dev.unexport_raw(token, 0).map(|()| 0))
}

/// Imports the peer's export `token` over `c`, waiting at most
/// `timeout_ms` (0 or negative: 5 s) for the peer's answer.
///
/// Errors: `ENOENT` (the peer has no such export), `ETIMEDOUT`, `EAGAIN`
/// (the connection is reconnecting), `ENOSPC`, and the others of
/// `RRDMA_IOCTL_IMPORT`.
///
/// # Safety
///
/// `c` must be NULL or a live connection.
#[no_mangle]
pub unsafe extern "C" fn rrdma_import_region(
    c: *const rrdma_conn,
    token: u64,
    timeout_ms: c_int,
) -> *mut rrdma_remote {
    // SAFETY: by the caller's promise.
    let Some(c) = (unsafe { c.as_ref() }) else {
        return fail_null(einval());
    };
    let t = timeout(timeout_ms)
        .filter(|d| !d.is_zero())
        .unwrap_or(std::time::Duration::from_secs(5));
    match c.conn.import(token, t) {
        Ok(remote) => {
            c.owner.hold();
            Box::into_raw(Box::new(rrdma_remote {
                remote,
                owner: c.owner,
            }))
        }
        Err(e) => fail_null(e),
    }
}

/// The remote region behind `m`.
///
/// # Safety
///
/// `m` must be NULL or a live import.
pub(crate) unsafe fn remote<'a>(m: *const rrdma_remote) -> Option<&'a rrdma_remote> {
    // SAFETY: by the caller's promise.
    unsafe { m.as_ref() }
}

/// The remote region's block size; 0 for NULL.
///
/// # Safety
///
/// `m` must be NULL or a live import.
#[no_mangle]
pub unsafe extern "C" fn rrdma_remote_block_size(m: *const rrdma_remote) -> u32 {
    // SAFETY: by the caller's promise.
    unsafe { remote(m) }.map_or(0, |m| m.remote.block_size())
}

/// The remote region's number of blocks; 0 for NULL.
///
/// # Safety
///
/// `m` must be NULL or a live import.
#[no_mangle]
pub unsafe extern "C" fn rrdma_remote_nblocks(m: *const rrdma_remote) -> u64 {
    // SAFETY: by the caller's promise.
    unsafe { remote(m) }.map_or(0, |m| m.remote.nblocks())
}

/// 1 when the export allows writes, else 0.
///
/// # Safety
///
/// `m` must be NULL or a live import.
#[no_mangle]
pub unsafe extern "C" fn rrdma_remote_writable(m: *const rrdma_remote) -> c_int {
    // SAFETY: by the caller's promise.
    unsafe { remote(m) }.map_or(0, |m| c_int::from(m.remote.writable()))
}

/// The largest block count of one op on this import (a larger one is
/// refused with `E2BIG`; `rrdma_read` and `rrdma_write` split); 0 for NULL.
///
/// # Safety
///
/// `m` must be NULL or a live import.
#[no_mangle]
pub unsafe extern "C" fn rrdma_remote_max_op_blocks(m: *const rrdma_remote) -> u32 {
    // SAFETY: by the caller's promise.
    unsafe { remote(m) }.map_or(0, |m| m.remote.max_op_blocks())
}

/// Forgets the import and frees `m`; ops on it still in flight complete.
///
/// # Safety
///
/// `m` must be NULL or a live import, not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn rrdma_unimport(m: *mut rrdma_remote) -> c_int {
    if m.is_null() {
        return fail(einval());
    }
    // SAFETY: from `Box::into_raw`, by the caller's promise.
    let m = unsafe { Box::from_raw(m) };
    let owner = m.owner;
    drop(m);
    owner.release();
    0
}

/// Maps the export behind `m` as a disk, `/dev/rrdmabN`, storing N in
/// `*index`: the kernel imports it again over a connection of its own,
/// which reconnects, and keeps the disk until `rrdma_blk_unmap`, whatever
/// becomes of `m` or this process. `read_only` non-zero: a read-only disk.
///
/// # Safety
///
/// `m` must be NULL or a live import; `index` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rrdma_blk_map(
    m: *const rrdma_remote,
    read_only: c_int,
    index: *mut u32,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(m) = (unsafe { remote(m) }) else {
        return fail(einval());
    };
    if index.is_null() {
        return fail(einval());
    }
    match m.owner.dev.blk_map(&m.remote, read_only != 0) {
        Ok(n) => {
            // SAFETY: writable, by the caller's promise; unaligned is
            // allowed.
            unsafe { index.write_unaligned(n) };
            0
        }
        Err(e) => fail(e),
    }
}

/// Removes the disk `/dev/rrdmabN`: `EBUSY` while it is open or mounted,
/// unless `force` is non-zero (its I/O then fails).
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed.
#[no_mangle]
pub unsafe extern "C" fn rrdma_blk_unmap(dev: *mut rrdma, index: u32, force: c_int) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(d) = (unsafe { device(dev) }) else {
        return fail(einval());
    };
    ret(d.dev.blk_unmap(index, force != 0).map(|()| 0))
}
