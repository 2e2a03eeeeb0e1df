// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Block operations: preparing `struct rrdma_op`s, submitting them in
//! batches, reading their completions, and the synchronous calls.

use core::ffi::{c_int, c_uint};

use rrdma_lib::abi::uapi::{Completion, Op, Submit, OP_READ, OP_WRITE, SUBMIT_MAX};

use crate::device::{device, rrdma};
use crate::region::{region, rrdma_region};
use crate::share::{remote, rrdma_remote};
use crate::{einval, fail, ret, timeout};

/// `<linux/rrdma.h>`'s `struct rrdma_op` (48 bytes), which the header
/// includes rather than defines; the library reads and writes it in the
/// UAPI's layout.
#[repr(C)]
pub struct rrdma_op {
    bytes: [u8; Op::SIZE],
}

impl rrdma_op {
    /// The op's bytes, in the UAPI's layout.
    pub(crate) fn bytes(&self) -> &[u8; Op::SIZE] {
        &self.bytes
    }
}

/// `<linux/rrdma.h>`'s `struct rrdma_completion` (24 bytes).
#[repr(C)]
pub struct rrdma_completion {
    bytes: [u8; Completion::SIZE],
}

/// The import and region of an op, if both are live and of one file.
///
/// # Safety
///
/// `m` and `r` must each be NULL or live.
unsafe fn pair<'a>(
    m: *const rrdma_remote,
    r: *const rrdma_region,
) -> Option<(&'a rrdma_remote, &'a rrdma_region)> {
    // SAFETY: by the caller's promise.
    let (m, r) = unsafe { (remote(m)?, region(r)?) };
    std::ptr::eq(m.owner, r.owner).then_some((m, r))
}

/// Fills `*op` with an `opcode` op of `count` blocks between `r` at
/// `local_block` and `m` at `remote_block`.
///
/// # Safety
///
/// As for `rrdma_prep_read`.
#[allow(clippy::too_many_arguments)]
unsafe fn prep(
    op: *mut rrdma_op,
    opcode: u32,
    flags: u32,
    m: *const rrdma_remote,
    remote_block: u64,
    r: *const rrdma_region,
    local_block: u64,
    count: u32,
    user_data: u64,
) -> c_int {
    // SAFETY: by the caller's promises.
    let (Some(op), Some((m, r))) = (unsafe { op.as_mut() }, unsafe { pair(m, r) }) else {
        return fail(einval());
    };
    let o = m.remote.op(
        opcode,
        &r.region,
        local_block,
        remote_block,
        count,
        user_data,
    );
    op.bytes = Op { flags, ..o }.encode();
    0
}

/// Fills `*op` with a READ of `count` blocks of the import `m` from
/// `remote_block` into the region `r` at `local_block`, completing with
/// `user_data`. `-EINVAL` when a pointer is NULL or `m` and `r` belong
/// to different `struct rrdma`s. Bounds are checked when it is submitted.
///
/// # Safety
///
/// `op` must be NULL or writable; `m` and `r` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rrdma_prep_read(
    op: *mut rrdma_op,
    m: *const rrdma_remote,
    remote_block: u64,
    r: *const rrdma_region,
    local_block: u64,
    count: u32,
    user_data: u64,
) -> c_int {
    // SAFETY: the caller's promises are `prep`'s.
    unsafe {
        prep(
            op,
            OP_READ,
            0,
            m,
            remote_block,
            r,
            local_block,
            count,
            user_data,
        )
    }
}

/// Fills `*op` with a WRITE of `count` blocks of `r` from `local_block` to
/// the import `m` at `remote_block`: it completes once the blocks are
/// placed in the peer's memory. As `rrdma_prep_read` otherwise.
///
/// # Safety
///
/// As for `rrdma_prep_read`.
#[no_mangle]
pub unsafe extern "C" fn rrdma_prep_write(
    op: *mut rrdma_op,
    m: *const rrdma_remote,
    remote_block: u64,
    r: *const rrdma_region,
    local_block: u64,
    count: u32,
    user_data: u64,
) -> c_int {
    // SAFETY: the caller's promises are `prep`'s.
    unsafe {
        prep(
            op,
            OP_WRITE,
            0,
            m,
            remote_block,
            r,
            local_block,
            count,
            user_data,
        )
    }
}

/// As `rrdma_prep_write`, but the write completes once sent
/// (`RRDMA_OP_F_SENT`): its local blocks may then be reused, and its bytes
/// are placed only once a later fence on `m` completes.
///
/// # Safety
///
/// As for `rrdma_prep_read`.
#[no_mangle]
pub unsafe extern "C" fn rrdma_prep_write_sent(
    op: *mut rrdma_op,
    m: *const rrdma_remote,
    remote_block: u64,
    r: *const rrdma_region,
    local_block: u64,
    count: u32,
    user_data: u64,
) -> c_int {
    let sent = rrdma_lib::abi::uapi::OP_F_SENT;
    // SAFETY: the caller's promises are `prep`'s.
    unsafe {
        prep(
            op,
            OP_WRITE,
            sent,
            m,
            remote_block,
            r,
            local_block,
            count,
            user_data,
        )
    }
}

/// Fills `*op` with a fence on `m`: it completes once every write
/// submitted before it on `m` is placed.
///
/// # Safety
///
/// `op` must be NULL or writable; `m` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rrdma_prep_fence(
    op: *mut rrdma_op,
    m: *const rrdma_remote,
    user_data: u64,
) -> c_int {
    // SAFETY: by the caller's promises.
    let (Some(op), Some(m)) = (unsafe { op.as_mut() }, unsafe { remote(m) }) else {
        return fail(einval());
    };
    op.bytes = m.remote.fence_op(user_data).encode();
    0
}

/// Submits `count` ops (1 to `RRDMA_SUBMIT_MAX`), in order, on `dev`, the
/// `struct rrdma` their imports and regions belong to (an op prepared from
/// another's objects names whatever has the same handles in `dev`). The
/// array goes to the kernel as it is. Returns how many were posted: all,
/// or when the queues are full a first part (submit the rest once
/// completions came). Each posted op yields exactly one completion
/// (`rrdma_wait`).
///
/// On failure nothing was posted, and `*refused` (if not NULL) says where
/// the kernel stopped: the index of the op it refused while checking the
/// batch (`E2BIG`: more blocks than one op may move; `ERANGE`: out of
/// bounds; `ENOENT`: a stale handle; `EKEYREVOKED`; `EPERM`: a write
/// through a read-only import), 0 when the checks passed but none could
/// be posted (`EAGAIN`: the queues are full; `ENOTCONN`), or `count` when
/// the call itself was refused (`EINVAL`: `count` out of range; `EFAULT`).
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open`; `ops` valid for `count` ops;
/// `refused` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rrdma_submit(
    dev: *mut rrdma,
    ops: *const rrdma_op,
    count: c_uint,
    refused: *mut c_uint,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(d) = (unsafe { device(dev) }) else {
        return fail(einval());
    };
    let tell = |index: u32| {
        if !refused.is_null() {
            // SAFETY: writable, by the caller's promise; unaligned is
            // allowed.
            unsafe { refused.write_unaligned(index) };
        }
    };
    if count == 0 || count > SUBMIT_MAX || ops.is_null() {
        tell(count);
        return fail(einval());
    }
    // The kernel leaves `submitted` as it is when it refuses the call
    // itself (a value no op can have), and writes it otherwise.
    match d.dev.submit_raw(&Submit {
        ops: ops as u64,
        count,
        op_size: Op::SIZE as u32,
        submitted: u32::MAX,
        ..Submit::zeroed()
    }) {
        Ok(out) => out.submitted as c_int,
        Err(e) => {
            let index = e
                .get_ref()
                .and_then(|x| x.downcast_ref::<rrdma_lib::SubmitError>())
                .map_or(u32::MAX, |s| s.index);
            tell(if index == u32::MAX { count } else { index });
            fail(e)
        }
    }
}

/// Stores up to `max` (at most 4096 per call) completions of `dev`'s ops
/// into `out`, waiting at most `timeout_ms` for the first; returns how
/// many (0 when none came in time). Several threads may wait at once. Each completion carries its op's `user_data`, its opcode, the
/// bytes moved, and a status of 0 or a negative errno.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open`; `out` writable for `max`.
#[no_mangle]
pub unsafe extern "C" fn rrdma_wait(
    dev: *mut rrdma,
    out: *mut rrdma_completion,
    max: c_uint,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(d) = (unsafe { device(dev) }) else {
        return fail(einval());
    };
    if out.is_null() || max == 0 {
        return fail(einval());
    }
    let max = max.min(4096) as usize;
    let mut got = vec![Completion::zeroed(); max];
    let n = match d.dev.completions(&mut got, timeout(timeout_ms)) {
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    // SAFETY: `out` is writable for `max` completions, and `n <= max`.
    let out = unsafe { std::slice::from_raw_parts_mut(out, n) };
    for (o, c) in out.iter_mut().zip(&got) {
        o.bytes = c.encode();
    }
    n as c_int
}

/// Reads `count` blocks of `m` from `remote_block` into `r` at
/// `local_block`, and returns once they are there (in several ops if more
/// than one may move). Errors as `rrdma_submit`'s, and the completion's.
///
/// # Safety
///
/// `m` and `r` must each be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rrdma_read(
    m: *const rrdma_remote,
    remote_block: u64,
    r: *const rrdma_region,
    local_block: u64,
    count: u32,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some((m, r)) = (unsafe { pair(m, r) }) else {
        return fail(einval());
    };
    ret(m
        .remote
        .read(&r.region, local_block, remote_block, count)
        .map(|()| 0))
}

/// Writes `count` blocks of `r` from `local_block` to `m` at
/// `remote_block`, and returns once they are placed in the peer's memory.
///
/// # Safety
///
/// `m` and `r` must each be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rrdma_write(
    m: *const rrdma_remote,
    remote_block: u64,
    r: *const rrdma_region,
    local_block: u64,
    count: u32,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some((m, r)) = (unsafe { pair(m, r) }) else {
        return fail(einval());
    };
    ret(m
        .remote
        .write(&r.region, local_block, remote_block, count)
        .map(|()| 0))
}

/// Returns once every write submitted before on `m` is placed.
/// `ECONNRESET`: the connection ended since the last fence, and writes
/// sent before it may be lost.
///
/// # Safety
///
/// `m` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rrdma_fence(m: *const rrdma_remote) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(m) = (unsafe { remote(m) }) else {
        return fail(einval());
    };
    ret(m.remote.fence().map(|()| 0))
}
