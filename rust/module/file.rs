// SPDX-License-Identifier: GPL-2.0

//! Per-open-file state of `/dev/rrdma` and ioctl dispatch.

use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::{self, ioctl::Command};
use crate::context::Context;
use crate::info;

/// State of one open `/dev/rrdma`.
pub(crate) struct FileState {
    context: Arc<Context>,
}

impl FileState {
    fn ioctl(&self, cmd: u32, arg: u64) -> Result {
        // Unknown commands are routine (isatty() probes): no warning.
        let d = abi::ioctl::decode(cmd).map_err(abi::error)?;
        match d.cmd {
            Command::GetInfo => info::get_info(&self.context, arg, &d),
        }
    }
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
    match KBox::new(FileState { context }, GFP_KERNEL) {
        Ok(state) => {
            // SAFETY: `out` is valid by the function's safety requirements.
            unsafe { *out = KBox::into_raw(state).cast() };
            0
        }
        Err(_) => ENOMEM.to_errno(),
    }
}

/// `release`: frees the file's state; every object of the file dies with it.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is not used afterwards.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_release(state: *mut c_void) {
    // SAFETY: by the function's safety requirements.
    drop(unsafe { KBox::from_raw(state.cast::<FileState>()) });
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
    let state = unsafe { &*state.cast::<FileState>() };
    match state.ioctl(cmd, arg as u64) {
        Ok(()) => 0,
        Err(e) => e.to_errno() as c_long,
    }
}
