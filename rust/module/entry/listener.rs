// SPDX-License-Identifier: GPL-2.0

//! The C-callable entry points of a listening cm_id: connect requests and
//! the other rdma_cm events (only device removal matters).

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};
use kernel::sync::Arc;

use super::bytes;
use crate::abi::wire;
use crate::ffi::{self, cm_event, RdmaCmId};
use crate::foreign;
use crate::listener::Listener;

/// Borrows a listener from its id's context.
///
/// # Safety
///
/// `ctx` is a listening id's context (a held reference).
unsafe fn listener(ctx: *mut c_void) -> Arc<Listener> {
    // SAFETY: by the function's safety requirements.
    unsafe { foreign::borrow::<Listener>(ctx) }.into()
}

/// A connect request on a listening id. Returns non-zero when the CM must
/// destroy `child` (the request was rejected).
///
/// # Safety
///
/// `ctx` is the listening id's context (a held reference); `child` is the
/// request's new id; `pdata` is valid for `len` bytes (or null); `out` is
/// valid for a write.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_listen_request(
    ctx: *mut c_void,
    child: *mut RdmaCmId,
    pdata: *const c_void,
    len: u8,
    initiator: u8,
    responder: u8,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { listener(ctx) };
    // SAFETY: by the function's safety requirements.
    let pdata = unsafe { bytes(pdata, usize::from(len)) };
    let Some(child) = NonNull::new(child) else {
        return 1;
    };
    match this.request(child, pdata, initiator, responder) {
        Ok(conn) => {
            // SAFETY: by the function's safety requirements.
            unsafe { *out = conn };
            0
        }
        Err(e) => {
            let r = wire::reject(e);
            // SAFETY: handler context of `child`; `r` outlives the call.
            unsafe { ffi::rrdma_shim_cm_reject(child.as_ptr(), r.as_ptr().cast(), r.len() as u8) };
            1
        }
    }
}

/// Any other event of a listening id. Returns non-zero when the CM must
/// destroy the id.
///
/// # Safety
///
/// `ctx` is the listening id's context (a held reference).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_listen_event(ctx: *mut c_void, event: c_int) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { listener(ctx) };
    // `this` keeps the listener alive until the handler returns; on a
    // non-zero return the CM destroys the id without another event.
    c_int::from(event == cm_event::DEVICE_REMOVAL && this.device_removal())
}
