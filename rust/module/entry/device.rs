// SPDX-License-Identifier: GPL-2.0

//! The `ib_client` callbacks: a device's context is built on `add` and torn
//! down on `remove` (see `device.rs`).

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use super::context;
use crate::abi::Result;
use crate::device::DeviceCtx;
use crate::ffi::IbDevice;
use crate::foreign;

/// `ib_client.add`: builds the device's context.
///
/// # Safety
///
/// `ctx` is the pointer the shim was registered with, `dev` is a device
/// being added and `out` is valid for a write of the client data.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_device_add(
    ctx: *mut c_void,
    dev: *mut IbDevice,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let context = unsafe { context(ctx) };
    let Some(dev) = NonNull::new(dev) else {
        return EINVAL.to_errno();
    };
    let res = (|| -> Result<*mut c_void> {
        let device = DeviceCtx::new(dev)?;
        context.insert_device(device.clone())?;
        // The client data owns one reference, taken back in `remove`.
        Ok(foreign::into_c(device))
    })();
    match res {
        Ok(ptr) => {
            // SAFETY: `out` is valid by the function's safety requirements.
            unsafe { *out = ptr };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `ib_client.remove`: closes the device's connections, forgets it and
/// waits until the last reference to its context is gone.
///
/// # Safety
///
/// `ctx` is the pointer the shim was registered with; `client_data` is what
/// [`rrdma_rust_device_add`] returned for `dev`, not used afterwards.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_device_remove(
    ctx: *mut c_void,
    _dev: *mut IbDevice,
    client_data: *mut c_void,
) {
    // SAFETY: by the function's safety requirements.
    let context = unsafe { context(ctx) };
    // SAFETY: `client_data` holds the reference `add` handed to C; the
    // device is going, so C no longer uses it.
    let device: Arc<DeviceCtx> = unsafe { foreign::from_c(client_data) };
    let attr = device.attr();
    crate::ffi::trace::device_remove(
        core::ffi::CStr::from_bytes_until_nul(&attr.name).unwrap_or(c"?"),
    );
    device.start_removal();
    context.remove_device(&device);
    DeviceCtx::wait_unused(device);
    pr_info!("{}: removed\n", attr.name_str());
}
