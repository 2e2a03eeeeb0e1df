// SPDX-License-Identifier: GPL-2.0

//! The C-callable entry points of a listening cm_id: connect requests and
//! the other rdma_cm events (only device removal matters).

use core::ptr::NonNull;

use kernel::ffi::{c_int, c_void};
use kernel::sync::Arc;

use super::bytes;
use crate::abi::wire;
use crate::cm_id::InHandler;
use crate::ffi::{cm_event, warn_user, RdmaCmId};
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
    // SAFETY: the request's handler runs with `child`'s handler mutex held
    // until we return, and `h` does not outlive this call. `request` keeps
    // the `CmId` it adopts exactly when it succeeds; on failure it has not
    // adopted one or has handed it back with `into_cm`.
    let h = unsafe { InHandler::new(child) };
    match this.request(&h, pdata, initiator, responder) {
        Ok(conn) => {
            // SAFETY: by the function's safety requirements.
            unsafe { *out = conn };
            0
        }
        Err(e) => {
            // Any host that reaches the port can send any handshake.
            warn_user!(
                "listener: connect request refused: {} (errno {})\n",
                wire::refusal_reason(e),
                e.get()
            );
            h.reject(&wire::reject(wire::errno_for_peer(e)));
            1
        }
    }
}

/// Any other event of a listening id, `id`. Returns non-zero when the CM
/// must destroy the id.
///
/// # Safety
///
/// Called by the id's event handler; `ctx` is the listening id's context
/// (a held reference).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_listen_event(
    ctx: *mut c_void,
    id: *mut RdmaCmId,
    event: c_int,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { listener(ctx) };
    let Some(id) = NonNull::new(id) else {
        return 0;
    };
    if event != cm_event::DEVICE_REMOVAL {
        return 0;
    }
    // SAFETY: we run in `id`'s handler until we return, and `h` does not
    // outlive this call. `device_removal` returns non-zero only after
    // handing the listener's `CmId` back with `into_cm`.
    let h = unsafe { InHandler::new(id) };
    // `this` keeps the listener alive until the handler returns; on a
    // non-zero return the CM destroys the id without another event.
    this.device_removal(&h)
}
