// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `struct rrdma_uring`: ops submitted as io_uring commands on a ring of
//! their own, without a system call per op.

use core::ffi::{c_int, c_uint};
use std::collections::VecDeque;
use std::time::Duration;

use rrdma_lib::abi::uapi::Op;
use rrdma_lib::{UringCompletion, UringEngine};

use crate::device::{device, rrdma};
use crate::ops::rrdma_op;
use crate::{einval, fail, fail_null, timeout};

/// `rrdma_uring_create` flag: set the ring up with `IORING_SETUP_IOPOLL`
/// (waiting polls the completion queues; one CPU spins while it waits).
pub const RRDMA_URING_IOPOLL: u32 = 1 << 0;
/// `rrdma_uring_create` flag: set the ring up with `IORING_SETUP_SQPOLL`
/// (a kernel thread takes the ops; it sleeps after 1 s without any).
pub const RRDMA_URING_SQPOLL: u32 = 1 << 1;

/// One completion of a ring: the op's `user_data`, and `res`, the bytes
/// moved or a negative errno.
#[repr(C)]
pub struct rrdma_cqe {
    /// The op's `user_data`.
    pub user_data: u64,
    /// Bytes moved, or the negative errno.
    pub res: i32,
    /// Zero.
    pub reserved: u32,
}

/// An io_uring instance submitting ops to one `struct rrdma`; one thread's
/// at a time (as a liburing ring).
pub struct rrdma_uring {
    engine: UringEngine,
    owner: &'static rrdma,
    /// CQEs taken from the ring but not yet handed out.
    ready: VecDeque<UringCompletion>,
}

/// A ring of `entries` (a power of two up to 32768) 128-byte SQEs for
/// `dev`'s ops; `flags`: 0, `RRDMA_URING_IOPOLL` or `RRDMA_URING_SQPOLL`.
///
/// Errors: those of io_uring_setup(2) (`ENOSYS` or `EPERM` where io_uring
/// is off), `EINVAL`.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed.
#[no_mangle]
pub unsafe extern "C" fn rrdma_uring_create(
    dev: *mut rrdma,
    entries: c_uint,
    flags: u32,
) -> *mut rrdma_uring {
    // SAFETY: by the caller's promise; the object count keeps `dev` open.
    let Some(owner) = (unsafe { device(dev) }) else {
        return fail_null(einval());
    };
    let engine = match flags {
        0 => UringEngine::new(&owner.dev, entries),
        RRDMA_URING_IOPOLL => UringEngine::with_iopoll(&owner.dev, entries),
        RRDMA_URING_SQPOLL => UringEngine::with_sqpoll(&owner.dev, entries, Duration::from_secs(1)),
        _ => return fail_null(einval()),
    };
    match engine {
        Ok(engine) => {
            owner.hold();
            Box::into_raw(Box::new(rrdma_uring {
                engine,
                owner,
                ready: VecDeque::new(),
            }))
        }
        Err(e) => fail_null(e),
    }
}

/// Queues `count` ops on `u`'s submission queue, as many as it has room
/// for; returns how many. Nothing reaches the kernel before
/// `rrdma_uring_submit`, but on an `RRDMA_URING_SQPOLL` ring, whose kernel
/// thread may take them at once.
///
/// # Safety
///
/// `u` must be NULL or live; `ops` valid for `count` ops.
#[no_mangle]
pub unsafe extern "C" fn rrdma_uring_push(
    u: *mut rrdma_uring,
    ops: *const rrdma_op,
    count: c_uint,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(u) = (unsafe { u.as_mut() }) else {
        return fail(einval());
    };
    if ops.is_null() {
        return fail(einval());
    }
    // No ring holds more than 32768 SQEs: what is beyond is not read.
    let count = count.min(32768) as usize;
    // SAFETY: `count` ops, by the caller's promise.
    let ops = unsafe { std::slice::from_raw_parts(ops, count) };
    let ops: Vec<Op> = ops.iter().map(|o| Op::decode(o.bytes())).collect();
    u.engine.push(&ops) as c_int
}

/// Submits what was pushed and waits until `want` completions are ready
/// (counting those `rrdma_uring_reap` left for later) or `timeout_ms`
/// passed (negative: 60 s at most per call); returns how many ops the
/// kernel took.
///
/// # Safety
///
/// `u` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rrdma_uring_submit(
    u: *mut rrdma_uring,
    want: c_uint,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(u) = (unsafe { u.as_mut() }) else {
        return fail(einval());
    };
    let t = timeout(timeout_ms).unwrap_or(Duration::from_secs(60));
    let want = (want as usize).saturating_sub(u.ready.len());
    match u.engine.submit(want, t) {
        Ok(n) => n.min(i32::MAX as usize) as c_int,
        Err(e) => fail(e),
    }
}

/// Stores up to `max` ready completions of `u` into `out`; returns how
/// many (0 when none is ready). Does not wait: `rrdma_uring_submit` does.
///
/// # Safety
///
/// `u` must be NULL or live; `out` writable for `max` completions.
#[no_mangle]
pub unsafe extern "C" fn rrdma_uring_reap(
    u: *mut rrdma_uring,
    out: *mut rrdma_cqe,
    max: c_uint,
) -> c_int {
    // SAFETY: by the caller's promise.
    let Some(u) = (unsafe { u.as_mut() }) else {
        return fail(einval());
    };
    if out.is_null() {
        return fail(einval());
    }
    let mut more = Vec::new();
    u.engine.reap(&mut more);
    u.ready.extend(more);
    let n = u.ready.len().min(max as usize).min(i32::MAX as usize);
    for i in 0..n {
        let c = u.ready.pop_front().expect("n <= ready.len()");
        // SAFETY: `out` is writable for `max >= n` completions.
        unsafe {
            out.add(i).write(rrdma_cqe {
                user_data: c.user_data,
                res: c.res,
                reserved: 0,
            })
        };
    }
    n as c_int
}

/// Frees `u` and its ring: ops still in flight complete in the kernel, and
/// their completions are lost.
///
/// # Safety
///
/// `u` must be NULL or live, not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn rrdma_uring_destroy(u: *mut rrdma_uring) -> c_int {
    if u.is_null() {
        return fail(einval());
    }
    // SAFETY: from `Box::into_raw`, by the caller's promise.
    let u = unsafe { Box::from_raw(u) };
    let owner = u.owner;
    drop(u);
    owner.release();
    0
}
