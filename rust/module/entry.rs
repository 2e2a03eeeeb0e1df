// SPDX-License-Identifier: GPL-2.0

//! Every C-callable entry point of the module (`rrdma_rust_*`, declared in
//! `shim/rrdma_shim.h`), beside `ffi/`, which declares what Rust calls.
//!
//! An entry point only turns C's pointers back into Rust's types (an
//! `Arc` reference handed over with `foreign::into_c`, a slice, a
//! `NonNull`) and forwards to safe code of the concern it serves; results
//! go back as a negative errno. One file per C caller:
//! - `device.rs`: the `ib_client` (device add and remove);
//! - `file.rs`: `/dev/rrdma`'s `file_operations`;
//! - `region.rs`: the `vm_operations` of a mapped region;
//! - `listener.rs`: a listening cm_id's events;
//! - `conn.rs`: a connection's cm_id events and queue pair completions;
//! - `poll.rs`: the polling policy, for the shim's IOPOLL polls.

use kernel::ffi::c_void;
use kernel::sync::ArcBorrow;

use crate::context::Context;
use crate::foreign;

mod conn;
mod device;
mod file;
mod listener;
mod poll;
mod region;

/// Borrows the module's context from the pointer the shim was registered
/// with.
///
/// # Safety
///
/// `ptr` is the pointer `context::Registration` handed to the shim, and
/// the registration is alive for `'a` (the shim calls back only between
/// register and unregister).
unsafe fn context<'a>(ptr: *mut c_void) -> ArcBorrow<'a, Context> {
    // SAFETY: by the function's safety requirements, `ptr` came from
    // `foreign::into_c` for a `Context` that the registration keeps.
    unsafe { foreign::borrow::<Context>(ptr) }
}

/// The bytes C passes as a pointer and a length (a null pointer or a zero
/// length is empty).
///
/// # Safety
///
/// Unless null, `ptr` is valid for reads of `len` bytes for `'a`.
unsafe fn bytes<'a>(ptr: *const c_void, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: by the function's safety requirements.
    unsafe { core::slice::from_raw_parts(ptr.cast(), len) }
}
