// SPDX-License-Identifier: GPL-2.0

//! The C-callable entry points of `/dev/rrdma` (`shim/chardev.c` calls
//! them from its `file_operations`): open, release, ioctl, mmap,
//! show_fdinfo, read and poll's readiness.

use kernel::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, ArcBorrow};

use super::FileState;
use crate::abi::{
    conn::Event,
    errno::{EAGAIN, EINVAL},
    uapi::Completion,
};
use crate::compat::user_slice;
use crate::conn::Conn;
use crate::context::Context;
use crate::ffi::{self, SeqFile, VmArea};
use crate::listener::Listener;
use crate::objects::{Object, Objects};
use crate::ring::READ_BATCH;
use crate::shared::Shared;

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
/// `context` is the pointer the shim was registered with, `waitq` the
/// file's wait queue (valid until release returns), and `out` is valid for
/// a write.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_open(
    context: *mut c_void,
    waitq: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let context: Arc<Context> = unsafe { Context::from_ffi(context) }.into();
    let shared = match Shared::new(context.clone(), waitq) {
        Ok(s) => s,
        Err(e) => return e.to_errno(),
    };
    let state = Arc::pin_init(
        pin_init!(FileState {
            context,
            shared,
            objects <- new_mutex!(Objects::new(), "FileState::objects"),
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
    let state = unsafe { Arc::from_raw(state.cast::<FileState>().cast_const()) };
    // Listeners first (no new connections), then every connection: their
    // operations complete with errors and their QPs are drained.
    // The table is taken out whole (no allocation that could fail) and
    // emptied outside its lock: closing a listener takes rdma_cm and socket
    // locks, and mmap(2) takes the table's lock under the mmap lock.
    let objects = state.objects.lock().take_all();
    for o in objects.values() {
        if let Object::Listener(l) = o {
            Listener::close(l);
        }
    }
    drop(objects);
    // `destroy` returns once the connection is torn down (waiting for a
    // teardown another path started), which unregisters it.
    loop {
        let conn = state.shared.conns.lock().iter().next().cloned();
        match conn {
            Some(c) => {
                Conn::destroy(&c, Event::UserClose);
                state.shared.unregister(&c);
            }
            None => break,
        }
    }
    drop(state.shared.exports.lock().take_all());
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
    let exports = state.shared.exports.lock().len() as u64;
    let (in_flight, pending) = {
        let r = state.shared.ring.lock();
        (r.in_flight() as u64, r.len() as u64)
    };
    let live = state.shared.conns.lock().len() as u64;
    for (key, value) in [
        (&b"rrdma-regions\0"[..], counts.regions),
        (&b"rrdma-region-bytes\0"[..], counts.region_bytes),
        (&b"rrdma-listeners\0"[..], counts.listeners),
        (&b"rrdma-connections\0"[..], counts.conns),
        (&b"rrdma-connections-live\0"[..], live),
        (&b"rrdma-exports\0"[..], exports),
        (&b"rrdma-imports\0"[..], counts.imports),
        (&b"rrdma-ops-in-flight\0"[..], in_flight),
        (&b"rrdma-completions\0"[..], pending),
    ] {
        // SAFETY: `m` is valid by the function's safety requirements and
        // `key` is NUL-terminated.
        unsafe { ffi::rrdma_shim_seq_u64(m, key.as_ptr().cast(), value) };
    }
}

/// `read`: copies whole completion records; `-EAGAIN` when there are none
/// (the shim sleeps unless `O_NONBLOCK`). Records are lent out of the ring
/// under its lock and copied to user memory without it (`abi::ring`): a
/// copy stalled on a fault holds up nothing else, and records it could not
/// deliver go back to the front of the ring.
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
    let max = len / Completion::SIZE;
    if max == 0 {
        return EINVAL.to_errno() as c_long;
    }
    let mut writer = user_slice(buf as u64, max * Completion::SIZE).writer();
    let mut done = 0;
    let mut batch = [Completion::zeroed(); READ_BATCH];
    while done < max {
        let want = (max - done).min(READ_BATCH);
        let n = state.shared.ring.lock().lend(&mut batch[..want]);
        if n == 0 {
            break;
        }
        let mut delivered = 0;
        let mut fault = None;
        for c in &batch[..n] {
            if let Err(e) = writer.write_slice(&c.encode()) {
                fault = Some(e);
                break;
            }
            delivered += 1;
        }
        state.shared.ring.lock().settle(&batch[..n], delivered);
        done += delivered;
        if let Some(e) = fault {
            if done == 0 {
                return e.to_errno() as c_long;
            }
            break;
        }
    }
    if done == 0 {
        return EAGAIN.to_errno() as c_long;
    }
    (done * Completion::SIZE) as c_long
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
    let n = state.shared.ring.lock().len();
    n > 0
}
