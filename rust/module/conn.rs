// SPDX-License-Identifier: GPL-2.0

//! Connections: one RC QP over rdma_cm, with its handshake, its state
//! machine (`abi::conn`), its control messages (import, revoke), its
//! registrations and its block operations.
//!
//! References: the cm_id's context (and the QP's callbacks) hold one
//! reference from id creation until the id is destroyed; the file's
//! registry, handles, imports and in-flight operations hold the others.
//!
//! Locking: `inner` is a mutex; the rdma_cm handler, the CQ callbacks
//! (`IB_POLL_WORKQUEUE`, process context) and ioctls take it. Nothing that
//! waits for those callbacks (drain, `rdma_destroy_id`) runs under it.

use core::ptr;

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, CondVarTimeoutResult, Mutex};

use crate::abi::{
    self,
    blocks::Geometry,
    conn::{step, Action, Event, State},
    errno::{
        Errno, E2BIG, EBUSY, ECANCELED, ECONNABORTED, ECONNRESET, EINTR, EINVAL, EKEYREVOKED,
        ENODEV, ENOENT, ENOTCONN, EPROTO, ETIMEDOUT,
    },
    ops::{self, Checked, Dir},
    uapi::Completion,
    wire::{self, Ctrl, Grant, Hello, CTRL_LEN, GRANT_KEYS_MAX},
};
use crate::device::DeviceCtx;
use crate::ffi::{self, cm_event, IbPd, RdmaCmId, ShimAddr, ShimQp, ShimWr};
use crate::listener::Listener;
use crate::mr::{Chunks, Mr};
use crate::region::Region;
use crate::shared::Shared;

/// Send-queue slots for data work requests (and their registrations).
pub(crate) const SQ_DEPTH: u32 = 256;
/// Export registrations that may be in flight on one connection.
const GRANT_REG_DEPTH: u32 = 128;
/// Control messages the peer may have outstanding (our posted receives).
const CTRL_RECV: u32 = 32;
/// Control messages we may have outstanding.
const CTRL_SEND: u32 = 16;
/// Default timeout of connect and import.
pub(crate) const DEFAULT_TIMEOUT_MS: u32 = 5000;
/// Most registration chunks an import accepts (1 TiB at 1 MiB chunks).
const IMPORT_CHUNKS_MAX: u64 = 1 << 20;

/// A local region's registrations on this connection.
/// Field order is drop order: the registrations go before the region
/// reference, which may be the last one keeping the pages.
struct LocalReg {
    chunks: Chunks,
    region: Arc<Region>,
    /// Operations in flight that use it.
    inflight: u32,
}

/// Registrations handed to the peer for one export.
struct Granted {
    token: u64,
    // Keeps the pages alive while registered; dropped after `chunks`.
    chunks: Chunks,
    _region: Arc<Region>,
}

/// An import request waiting for its answer.
struct Pending {
    req_id: u64,
    result: Option<Result<Grant, Errno>>,
}

struct Inner {
    state: State,
    /// Null before creation and once destroyed (or handed to the CM).
    id: *mut RdmaCmId,
    /// Whether the id's context holds a reference on the connection.
    ctx_ref: bool,
    qp: *mut ShimQp,
    device: Option<Arc<DeviceCtx>>,
    pd: *mut IbPd,
    chunk_shift: u32,
    /// iWARP completes an RDMA WRITE once sent, not once placed: writes
    /// end with a one-byte READ (a fence) so that their completion means
    /// the data is in the peer's memory, as on InfiniBand and RoCE.
    write_fence: bool,
    sq_free: u32,
    grant_regs: u32,
    fatal: Option<Errno>,
    peer: ShimAddr,
    local: KVec<LocalReg>,
    grants: KVec<Granted>,
    retired: KVec<Granted>,
    revoked: KVec<u64>,
    pending: KVec<Pending>,
    next_req: u64,
    listener: Option<Arc<Listener>>,
    timeout_ms: u32,
    destroyed: bool,
    /// Operation slots (`SQ_DEPTH`, one completion context each in the
    /// shim): `Some` while the operation is in flight. A completion takes
    /// its slot's operation; a second completion of the same slot finds
    /// nothing (siw's flush path can complete a READ twice). What the
    /// provider never completes, the teardown completes, once.
    ops: KVec<Option<KBox<OpCtx>>>,
    /// Free operation slots.
    free_slots: KVec<u32>,
    /// The teardown finished (set last, under the lock).
    torn_down: bool,
}

/// A connection.
#[pin_data]
pub(crate) struct Conn {
    shared: Arc<Shared>,
    active: bool,
    #[pin]
    inner: Mutex<Inner>,
    /// State changes, import answers, send-queue room.
    #[pin]
    cv: CondVar,
}

// SAFETY: the raw pointers are kernel objects owned by the connection and
// used under `inner`'s lock or after being taken out of it.
unsafe impl Send for Inner {}

/// An operation in flight: the signaled, last work request of an
/// operation carries its slot.
struct OpCtx {
    region: Arc<Region>,
    user_data: u64,
    opcode: u32,
    wrs: u32,
    bytes: u64,
    sync: Option<Arc<SyncWait>>,
}

/// Where a synchronous operation's status lands.
#[pin_data]
pub(crate) struct SyncWait {
    #[pin]
    status: Mutex<Option<i32>>,
    #[pin]
    cv: CondVar,
}

impl SyncWait {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                status <- new_mutex!(None),
                cv <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    fn set(&self, status: i32) {
        *self.status.lock() = Some(status);
        self.cv.notify_all();
    }
}

/// A remote region imported over a connection.
pub(crate) struct Import {
    pub(crate) conn: Arc<Conn>,
    pub(crate) token: u64,
    pub(crate) geometry: Geometry,
    pub(crate) writable: bool,
    chunk_shift: u32,
    rkeys: KVVec<u32>,
}

/// Waits on `cv` (with `g` locked) until `done` holds: `EINTR` on a
/// signal, `ETIMEDOUT` after `timeout_ms` (`u32::MAX`: no timeout).
fn wait_until<T: Unpin, B: kernel::sync::lock::Backend>(
    cv: &CondVar,
    g: &mut kernel::sync::lock::Guard<'_, T, B>,
    timeout_ms: u32,
    mut done: impl FnMut(&mut T) -> bool,
) -> Result<(), Errno> {
    let mut left = kernel::time::msecs_to_jiffies(timeout_ms);
    while !done(g) {
        if timeout_ms == u32::MAX {
            if cv.wait_interruptible(g) {
                return Err(EINTR);
            }
            continue;
        }
        match cv.wait_interruptible_timeout(g, left) {
            CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
            CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
            CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
        }
    }
    Ok(())
}

fn hello() -> Hello {
    Hello {
        version: wire::VERSION,
        ctrl_credits: CTRL_RECV as u16,
        qps: 1,
        // SAFETY: no preconditions.
        nonce: unsafe { ffi::rrdma_shim_random_u64() },
    }
}

impl Conn {
    fn new(shared: Arc<Shared>, active: bool, state: State, timeout_ms: u32) -> Result<Arc<Self>> {
        let mut ops = KVec::with_capacity(SQ_DEPTH as usize, GFP_KERNEL)?;
        let mut free_slots = KVec::with_capacity(SQ_DEPTH as usize, GFP_KERNEL)?;
        for i in 0..SQ_DEPTH {
            ops.push(None, GFP_KERNEL)?;
            free_slots.push(SQ_DEPTH - 1 - i, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                shared,
                active,
                inner <- new_mutex!(Inner {
                    state,
                    id: ptr::null_mut(),
                    ctx_ref: false,
                    qp: ptr::null_mut(),
                    device: None,
                    pd: ptr::null_mut(),
                    chunk_shift: 12,
                    write_fence: false,
                    sq_free: SQ_DEPTH,
                    grant_regs: 0,
                    fatal: None,
                    peer: ShimAddr::default(),
                    local: KVec::new(),
                    grants: KVec::new(),
                    retired: KVec::new(),
                    revoked: KVec::new(),
                    pending: KVec::new(),
                    next_req: 1,
                    listener: None,
                    timeout_ms,
                    destroyed: false,
                    ops,
                    free_slots,
                    torn_down: false,
                }),
                cv <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// The pointer the cm_id and the QP callbacks carry.
    fn raw(this: &Arc<Self>) -> *mut c_void {
        crate::compat::arc_ptr(this).cast_mut().cast()
    }

    /// Takes a reference for the cm_id's context.
    fn leak_ref(this: &Arc<Self>) -> *mut c_void {
        Arc::into_raw(this.clone()).cast_mut().cast()
    }

    /// Drops the reference [`Self::leak_ref`] took.
    ///
    /// # Safety
    ///
    /// `this` had a reference leaked for the cm_id, and nothing uses that
    /// reference any more.
    unsafe fn drop_ref(this: &Arc<Self>) {
        // SAFETY: by the function's safety requirements.
        drop(unsafe { Arc::from_raw(crate::compat::arc_ptr(this)) });
    }

    /// Borrows a connection from a callback's context pointer.
    ///
    /// # Safety
    ///
    /// `ptr` is a connection's [`Self::raw`] pointer whose cm_id context
    /// reference is still held.
    unsafe fn from_ctx(ptr: *mut c_void) -> Arc<Self> {
        // SAFETY: by the function's safety requirements the reference is
        // alive; we take a new one for the callback's duration.
        unsafe { kernel::sync::ArcBorrow::from_raw(ptr.cast::<Self>().cast_const()) }.into()
    }

    /// The shim address of the peer.
    pub(crate) fn peer(&self) -> ShimAddr {
        self.inner.lock().peer
    }

    /// Whether the connection has closed (or was destroyed).
    pub(crate) fn is_closed(&self) -> bool {
        let g = self.inner.lock();
        g.state.is_closed() || g.destroyed
    }

    /// Connects to `addr`; waits until established or failed.
    pub(crate) fn connect(
        shared: &Arc<Shared>,
        addr: &ShimAddr,
        timeout_ms: u32,
    ) -> Result<Arc<Self>> {
        let this = Self::new(shared.clone(), true, State::Resolving, timeout_ms)?;
        shared.register(&this)?;
        let ret = {
            let mut g = this.inner.lock();
            let owner = Self::leak_ref(&this);
            let mut id = ptr::null_mut();
            // SAFETY: `owner` is a reference for the id's context; `addr`
            // and `id` are valid. Events wait for `inner`, which we hold.
            let ret = unsafe { ffi::rrdma_shim_cm_connect_start(owner, addr, timeout_ms, &mut id) };
            if ret == 0 {
                g.id = id;
                g.ctx_ref = true;
            } else {
                g.state = State::Closed { error: Some(-ret) };
                // SAFETY: the id was not created: nothing uses the reference.
                unsafe { Self::drop_ref(&this) };
            }
            ret
        };
        if ret != 0 {
            Self::destroy(&this, None);
            return Err(kernel::error::Error::from_errno(ret));
        }
        let res = {
            let mut g = this.inner.lock();
            wait_until(&this.cv, &mut g, timeout_ms, |i| {
                i.state.is_connected() || i.state.is_closed()
            })
            .and_then(|()| {
                if g.state.is_connected() {
                    Ok(())
                } else {
                    Err(g.state.errno())
                }
            })
        };
        if let Err(e) = res {
            Self::destroy(&this, Some(e));
            return Err(abi::error(e));
        }
        Ok(this)
    }

    /// Adopts an incoming connection request on `child` (listener handler
    /// context): checks the handshake, builds the QP and accepts. On error
    /// the caller rejects with the errno.
    pub(crate) fn accept_request(
        shared: &Arc<Shared>,
        listener: &Arc<Listener>,
        child: *mut RdmaCmId,
        pdata: &[u8],
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<Arc<Self>, Errno> {
        let peer_hello = Hello::decode(pdata)?;
        wire::negotiate(peer_hello.version)?;
        let this = Self::new(shared.clone(), false, State::Accepting, DEFAULT_TIMEOUT_MS)
            .map_err(|_| abi::errno::ENOMEM)?;
        // Registered before anything can tear it down (device removal finds
        // it once the QP exists), so the teardown always unregisters it.
        shared.register(&this).map_err(|_| abi::errno::ENOMEM)?;
        let mut g = this.inner.lock();
        g.id = child;
        g.listener = Some(listener.clone());
        if let Err(e) = this.setup_qp(&mut g) {
            g.id = ptr::null_mut();
            g.listener = None;
            drop(g);
            // The CM destroys the child id when we reject.
            Self::teardown(&this, e, true);
            return Err(e);
        }
        let h = hello().encode();
        // SAFETY: `child` is the id of this request (handler context) and
        // `h` outlives the call.
        let ret = unsafe {
            ffi::rrdma_shim_cm_accept(
                child,
                h.as_ptr().cast(),
                h.len() as u8,
                peer_initiator,
                peer_responder,
            )
        };
        if ret != 0 {
            g.id = ptr::null_mut();
            g.listener = None;
            drop(g);
            Self::teardown(&this, -ret, true);
            return Err(-ret);
        }
        g.ctx_ref = true;
        drop(g);
        // The caller stores the context pointer in the child id.
        let _ = Self::leak_ref(&this);
        Ok(this)
    }

    /// Builds the QP on the id's device (route resolved or request).
    fn setup_qp(self: &Arc<Self>, g: &mut Inner) -> Result<(), Errno> {
        // SAFETY: `g.id` is live (we are in its handler or own it).
        let dev = unsafe { ffi::rrdma_shim_cm_device(g.id) };
        let device = self
            .shared
            .context
            .find_device(dev)
            .filter(|d| d.usable())
            .ok_or(ENODEV)?;
        let pd = device.pd().ok_or(ENODEV)?;
        // SAFETY: `dev` is live while `device` is held.
        let max_pages = unsafe { ffi::rrdma_shim_max_fast_reg_pages(dev) };
        let mut qp = ptr::null_mut();
        // SAFETY: `g.id` is live and has no QP yet, `pd` belongs to its
        // device, and the callbacks' owner pointer stays valid while the
        // id's context reference is held (until after the QP is destroyed).
        let ret = unsafe {
            ffi::rrdma_shim_qp_create(
                g.id,
                pd,
                Self::raw(self),
                SQ_DEPTH + GRANT_REG_DEPTH,
                SQ_DEPTH,
                CTRL_RECV,
                CTRL_SEND,
                CTRL_LEN as u32,
                &mut qp,
            )
        };
        if ret != 0 {
            pr_warn!("cannot create a queue pair: errno {}\n", -ret);
            return Err(-ret);
        }
        g.qp = qp;
        g.pd = pd;
        device.add_conn(self).map_err(|_| abi::errno::ENOMEM)?;
        g.chunk_shift = ops::chunk_shift(max_pages, ffi::page_size().trailing_zeros());
        g.write_fence = device.attr().node_type == crate::abi::uapi::node_type::RNIC;
        // SAFETY: `g.id` is live; `peer` is a valid out-pointer.
        unsafe { ffi::rrdma_shim_cm_peer(g.id, &mut g.peer) };
        g.device = Some(device);
        Ok(())
    }

    /// An rdma_cm event (handler context). Returns non-zero when the CM
    /// must destroy the id (device removal).
    fn cm_event(self: &Arc<Self>, event: i32, status: i32, pdata: &[u8]) -> c_int {
        let ev = match event {
            cm_event::ADDR_RESOLVED => Event::AddrResolved,
            cm_event::ADDR_ERROR => Event::AddrError(status),
            cm_event::ROUTE_RESOLVED => Event::RouteResolved,
            cm_event::ROUTE_ERROR => Event::RouteError(status),
            cm_event::ESTABLISHED if self.active => match Hello::decode(pdata) {
                Ok(_) => Event::Established,
                Err(e) => {
                    pr_warn!("peer's handshake reply is malformed: errno {}\n", e);
                    Event::ConnectError(e)
                }
            },
            cm_event::ESTABLISHED => Event::Established,
            cm_event::REJECTED => Event::Rejected(wire::decode_reject(pdata)),
            cm_event::UNREACHABLE => Event::Unreachable,
            cm_event::CONNECT_ERROR => Event::ConnectError(status),
            cm_event::DISCONNECTED => Event::Disconnected,
            cm_event::DEVICE_REMOVAL => Event::DeviceRemoval,
            _ => return 0,
        };
        let mut g = self.inner.lock();
        if g.destroyed {
            return 0;
        }
        let (state, action) = step(g.state, ev);
        g.state = state;
        let mut ready_listener = None;
        match action {
            Action::ResolveRoute => {
                // SAFETY: `g.id` is the id of this handler.
                let ret = unsafe { ffi::rrdma_shim_cm_resolve_route(g.id, g.timeout_ms) };
                if ret != 0 {
                    g.state = step(g.state, Event::RouteError(ret)).0;
                }
            }
            Action::Connect => {
                let res = self.setup_qp(&mut g).and_then(|()| {
                    let h = hello().encode();
                    // SAFETY: handler context of `g.id`; `h` outlives the call.
                    let ret = unsafe {
                        ffi::rrdma_shim_cm_connect(g.id, h.as_ptr().cast(), h.len() as u8)
                    };
                    if ret == 0 {
                        Ok(())
                    } else {
                        Err(-ret)
                    }
                });
                if let Err(e) = res {
                    g.state = State::Closed { error: Some(e) };
                }
            }
            Action::Ready => ready_listener = g.listener.take(),
            Action::Disconnect => {
                // SAFETY: handler context of `g.id`.
                unsafe { ffi::rrdma_shim_cm_disconnect(g.id) };
            }
            Action::Teardown | Action::None => {}
        }
        drop(g);
        self.cv.notify_all();
        if let Some(l) = ready_listener {
            l.established(self);
        }
        if ev == Event::DeviceRemoval {
            // The CM waits for this id before the device can go: release
            // everything now and let the CM destroy the id.
            return Self::teardown(self, ENODEV, true);
        }
        0
    }

    /// Marks the connection failed (a work completion error, a malformed
    /// control message) and starts the disconnect.
    fn fail(&self, e: Errno) {
        let mut g = self.inner.lock();
        if g.fatal.is_none() {
            g.fatal = Some(e);
        }
        let (state, action) = step(g.state, Event::QpFatal);
        g.state = match state {
            State::Closing { error: Some(_) } => State::Closing { error: Some(e) },
            s => s,
        };
        if action == Action::Disconnect && !g.id.is_null() {
            // SAFETY: `g.id` is live while set.
            unsafe { ffi::rrdma_shim_cm_disconnect(g.id) };
        }
        drop(g);
        self.cv.notify_all();
    }

    /// Tears the connection down: closes it with `error` unless it closed
    /// already, drains and destroys the QP (every operation in flight
    /// completes, with an error), frees registrations, destroys the id and
    /// leaves the device and the file. Idempotent; process context only.
    /// If another teardown is under way (device removal, a concurrent
    /// close), waits for it to finish: callers rely on the connection's
    /// resources being gone when this returns. That wait is bounded by a
    /// drain and is not interruptible, like `flush_work()`.
    pub(crate) fn destroy(this: &Arc<Self>, error: Option<Errno>) {
        Self::teardown(this, error.unwrap_or(ECANCELED), false);
        let mut g = this.inner.lock();
        while !g.torn_down {
            this.cv.wait(&mut g);
        }
    }

    fn teardown(this: &Arc<Self>, error: Errno, in_handler: bool) -> c_int {
        let mut g = this.inner.lock();
        if g.destroyed {
            return 0;
        }
        g.destroyed = true;
        if !g.state.is_closed() {
            let e = match g.state {
                State::Closing { error: Some(e) } => Some(e),
                State::Connected | State::Closing { .. } if error == ECANCELED => None,
                _ => Some(error),
            };
            g.state = State::Closed { error: e };
        }
        let id = g.id;
        g.id = ptr::null_mut();
        let ctx_ref = core::mem::take(&mut g.ctx_ref);
        let listener = g.listener.take();
        drop(g);
        this.cv.notify_all();
        drop(listener);
        if !id.is_null() && !in_handler {
            // SAFETY: `id` is live until destroyed below.
            unsafe { ffi::rrdma_shim_cm_disconnect(id) };
        }
        Self::release_resources(this);
        if !id.is_null() && !in_handler {
            // SAFETY: we own `id`, and we are not in its handler.
            unsafe { ffi::rrdma_shim_cm_destroy_id(id) };
        }
        if ctx_ref {
            // SAFETY: the id is destroyed (or will be by the CM once this
            // handler returns, and `this` keeps the connection alive until
            // then); its context reference is unused.
            unsafe { Self::drop_ref(this) };
        }
        this.shared.unregister(this);
        this.inner.lock().torn_down = true;
        this.cv.notify_all();
        c_int::from(in_handler && !id.is_null())
    }

    /// Drains and destroys the QP, frees registrations, leaves the device.
    fn release_resources(this: &Arc<Self>) {
        let qp = {
            let mut g = this.inner.lock();
            let qp = g.qp;
            g.qp = ptr::null_mut();
            qp
        };
        if !qp.is_null() {
            // SAFETY: `qp` is ours; nothing is posted once draining starts,
            // and we hold no lock the completion callbacks take.
            unsafe { ffi::rrdma_shim_qp_drain(qp) };
            // SAFETY: drained; its id is still alive.
            unsafe { ffi::rrdma_shim_qp_destroy(qp) };
        }
        // The CQs are gone: no completion callback runs any more. What the
        // provider did not complete, completes here.
        loop {
            let op = {
                let mut g = this.inner.lock();
                g.ops.iter_mut().find_map(|o| o.take())
            };
            match op {
                Some(op) => this.op_done(op, ops::wc::WR_FLUSH_ERR),
                None => break,
            }
        }
        let (local, grants, retired, device) = {
            let mut g = this.inner.lock();

            (
                core::mem::take(&mut g.local),
                core::mem::take(&mut g.grants),
                core::mem::take(&mut g.retired),
                g.device.take(),
            )
        };
        // Registrations go before the device reference.
        drop(local);
        drop(grants);
        drop(retired);
        if let Some(device) = device {
            device.remove_conn(this);
        }
        this.cv.notify_all();
    }

    /// A control message from the peer (receive CQ callback).
    fn ctrl_recv(self: &Arc<Self>, msg: &[u8]) {
        let m = match Ctrl::decode(msg) {
            Ok(m) => m,
            Err(e) => {
                pr_warn!(
                    "peer sent a malformed control message ({} bytes); disconnecting\n",
                    msg.len()
                );
                self.fail(e);
                return;
            }
        };
        match m {
            Ctrl::ImportReq {
                req_id,
                token,
                first_chunk,
            } => {
                let result = self.grant(token, first_chunk);
                let resp = Ctrl::ImportResp { req_id, result }.encode();
                if let Err(e) = self.send_ctrl(&resp) {
                    pr_warn!("cannot answer an import request: errno {}\n", e);
                }
            }
            Ctrl::ImportResp { req_id, result } => {
                let mut g = self.inner.lock();
                if let Some(p) = g.pending.iter_mut().find(|p| p.req_id == req_id) {
                    p.result = Some(result);
                }
                drop(g);
                self.cv.notify_all();
            }
            Ctrl::Revoke { token, .. } => {
                let mut g = self.inner.lock();
                if !g.revoked.contains(&token) && g.revoked.push(token, GFP_KERNEL).is_err() {
                    drop(g);
                    // Cannot remember it: fail safe.
                    self.fail(abi::errno::ENOMEM);
                }
            }
        }
    }

    fn send_ctrl(&self, msg: &[u8; CTRL_LEN]) -> Result<(), Errno> {
        let g = self.inner.lock();
        if g.qp.is_null() || !g.state.can_talk() {
            return Err(ENOTCONN);
        }
        // SAFETY: `g.qp` is live while set and we hold the lock.
        let ret = unsafe { ffi::rrdma_shim_ctrl_send(g.qp, msg.as_ptr().cast(), CTRL_LEN as u32) };
        if ret == 0 {
            Ok(())
        } else {
            Err(-ret)
        }
    }

    /// Registers chunks of the export behind `token` for the peer and
    /// returns their keys.
    fn grant(self: &Arc<Self>, token: u64, first: u32) -> Result<Grant, Errno> {
        let export = self
            .shared
            .exports
            .lock()
            .find(token)
            .cloned()
            .ok_or(ENOENT)?;
        if export
            .conn
            .is_some_and(|c| c != crate::compat::arc_ptr(self) as usize)
        {
            // Same answer as an unknown token: do not confirm it exists.
            return Err(ENOENT);
        }
        let geometry = *export.region.geometry();
        let mut g = self.inner.lock();
        if !g.state.can_talk() || g.qp.is_null() {
            return Err(ENOTCONN);
        }
        let shift = g.chunk_shift;
        let nchunks = geometry.bytes().div_ceil(1u64 << shift);
        if u64::from(first) >= nchunks {
            return Err(EINVAL);
        }
        let n = (nchunks - u64::from(first)).min(GRANT_KEYS_MAX as u64) as u32;
        if g.grant_regs + n > GRANT_REG_DEPTH {
            return Err(EBUSY);
        }
        // Unexport may have run since the lookup; it revokes under our lock.
        if self.shared.exports.lock().find(token).is_none() {
            return Err(ENOENT);
        }
        let i = match g.grants.iter().position(|x| x.token == token) {
            Some(i) => i,
            None => {
                let chunks =
                    Chunks::new(geometry.bytes(), shift).map_err(|_| abi::errno::ENOMEM)?;
                g.grants
                    .push(
                        Granted {
                            token,
                            chunks,
                            _region: export.region.clone(),
                        },
                        GFP_KERNEL,
                    )
                    .map_err(|_| abi::errno::ENOMEM)?;
                g.grants.len() - 1
            }
        };
        let access = if export.writable {
            ffi::ACCESS_REMOTE_READ | ffi::ACCESS_REMOTE_WRITE | ffi::ACCESS_LOCAL_WRITE
        } else {
            ffi::ACCESS_REMOTE_READ
        };
        let mut grant = Grant {
            block_size: geometry.block_size(),
            nblocks: geometry.nblocks(),
            generation: export.generation,
            writable: export.writable,
            chunk_shift: shift as u8,
            first_chunk: first,
            nkeys: n as u16,
            rkeys: [0; GRANT_KEYS_MAX],
        };
        let mut wrs = KVec::new();
        let pd = g.pd;
        for k in 0..n {
            let c = (first + k) as usize;
            if g.grants[i].chunks.get(c).is_none() {
                let mr = Mr::new(pd, &export.region, c as u64, shift).map_err(|e| -e.to_errno())?;
                wrs.push(ShimWr::reg(mr.as_ptr(), access, true), GFP_KERNEL)
                    .map_err(|_| abi::errno::ENOMEM)?;
                g.grants[i].chunks.set(c, mr).map_err(|_| EINVAL)?;
            }
            grant.rkeys[k as usize] = g.grants[i].chunks.get(c).map_or(0, |m| m.rkey());
        }
        if !wrs.is_empty() {
            let mut posted = 0;
            // SAFETY: `g.qp` is live; the MRs stay registered in `g.grants`
            // (or `g.retired`) until their registrations completed.
            let ret =
                unsafe { ffi::rrdma_shim_post(g.qp, wrs.as_ptr(), wrs.len() as u32, &mut posted) };
            g.grant_regs += posted;
            if ret != 0 {
                return Err(-ret);
            }
        }
        Ok(grant)
    }

    /// Revokes the export `token`: deregisters what this connection granted
    /// for it and tells the peer.
    pub(crate) fn revoke(&self, token: u64, generation: u32) {
        let mut g = self.inner.lock();
        let Some(i) = g.grants.iter().position(|x| x.token == token) else {
            return;
        };
        let Some(granted) = crate::compat::vec_swap_remove(&mut g.grants, i) else {
            return;
        };
        drop(g);
        // Tell the importer first, so that its later operations fail in its
        // kernel (EKEYREVOKED); one already on the wire meets the
        // invalidated key and takes the connection down.
        let msg = Ctrl::Revoke { token, generation }.encode();
        let _ = self.send_ctrl(&msg);
        let mut g = self.inner.lock();
        let mut now = None;
        if g.grant_regs == 0 {
            now = Some(granted);
        } else if g.retired.push(granted, GFP_KERNEL).is_err() {
            pr_warn!("cannot defer a deregistration; it happens at disconnect\n");
        }
        drop(g);
        // Deregistering invalidates the keys: the peer's NIC access fails.
        drop(now);
    }

    /// A registration of the control path completed (`wc_status`).
    fn quiet_done(self: &Arc<Self>, wc_status: u32) {
        if let Some(e) = ops::wc_errno(wc_status) {
            if e != ECANCELED {
                self.fail(e);
            }
            return;
        }
        let retired = {
            let mut g = self.inner.lock();
            g.grant_regs = g.grant_regs.saturating_sub(1);
            if g.grant_regs == 0 {
                core::mem::take(&mut g.retired)
            } else {
                KVec::new()
            }
        };
        drop(retired);
    }

    /// Imports the peer's export `token`.
    pub(crate) fn import(self: &Arc<Self>, token: u64, timeout_ms: u32) -> Result<Import> {
        let mut rkeys: KVVec<u32> = KVVec::new();
        let mut first: u32 = 0;
        let mut head: Option<Grant> = None;
        loop {
            let g = self.request(token, first, timeout_ms).map_err(abi::error)?;
            let chunks = g.chunks();
            match &head {
                None => {
                    Geometry::new(g.block_size, g.nblocks, u64::MAX)
                        .map_err(|_| abi::error(EPROTO))?;
                    if chunks > IMPORT_CHUNKS_MAX {
                        return Err(abi::error(E2BIG));
                    }
                    rkeys = KVVec::with_capacity(chunks as usize, GFP_KERNEL)?;
                }
                Some(h) => {
                    if (
                        h.block_size,
                        h.nblocks,
                        h.chunk_shift,
                        h.generation,
                        h.writable,
                    ) != (
                        g.block_size,
                        g.nblocks,
                        g.chunk_shift,
                        g.generation,
                        g.writable,
                    ) {
                        return Err(abi::error(EPROTO));
                    }
                }
            }
            if g.first_chunk != first
                || g.nkeys == 0
                || u64::from(first) + u64::from(g.nkeys) > chunks
            {
                return Err(abi::error(EPROTO));
            }
            for k in g.keys() {
                rkeys.push(*k, GFP_KERNEL)?;
            }
            first += u32::from(g.nkeys);
            if head.is_none() {
                head = Some(g);
            }
            if u64::from(first) >= chunks {
                break;
            }
        }
        let h = head.ok_or(abi::error(EINVAL))?;
        Ok(Import {
            conn: self.clone(),
            token,
            geometry: Geometry::new(h.block_size, h.nblocks, u64::MAX).map_err(abi::error)?,
            writable: h.writable,
            chunk_shift: u32::from(h.chunk_shift),
            rkeys,
        })
    }

    /// One import request and its answer.
    fn request(self: &Arc<Self>, token: u64, first: u32, timeout_ms: u32) -> Result<Grant, Errno> {
        let req_id = {
            let mut g = self.inner.lock();
            if !g.state.is_connected() {
                return Err(g.state.errno());
            }
            let id = g.next_req;
            g.next_req += 1;
            g.pending
                .push(
                    Pending {
                        req_id: id,
                        result: None,
                    },
                    GFP_KERNEL,
                )
                .map_err(|_| abi::errno::ENOMEM)?;
            id
        };
        let sent = self.send_ctrl(
            &Ctrl::ImportReq {
                req_id,
                token,
                first_chunk: first,
            }
            .encode(),
        );
        let mut g = self.inner.lock();
        let res = sent.and_then(|()| {
            wait_until(&self.cv, &mut g, timeout_ms, |i| {
                !i.state.is_connected()
                    || i.destroyed
                    || i.pending
                        .iter()
                        .any(|p| p.req_id == req_id && p.result.is_some())
            })
        });
        let i = g.pending.iter().position(|p| p.req_id == req_id);
        let entry = i.and_then(|i| crate::compat::vec_swap_remove(&mut g.pending, i));
        res?;
        match entry.and_then(|p| p.result) {
            Some(r) => r,
            None => Err(g.state.errno()),
        }
    }

    /// Whether the peer revoked `token`.
    pub(crate) fn is_revoked(&self, token: u64) -> bool {
        self.inner.lock().revoked.contains(&token)
    }

    /// Posts one checked operation. `Ok(false)`: no room in the send queue.
    pub(crate) fn post_op(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        user_data: u64,
        opcode: u32,
        sync: Option<Arc<SyncWait>>,
    ) -> Result<bool> {
        let mut g = self.inner.lock();
        if !g.state.is_connected() || g.qp.is_null() {
            return Err(abi::error(g.state.errno()));
        }
        if g.revoked.contains(&import.token) {
            return Err(abi::error(EKEYREVOKED));
        }
        let li = match g.local.iter().position(|l| Arc::ptr_eq(&l.region, region)) {
            Some(i) => i,
            None => {
                let chunks = Chunks::new(region.geometry().bytes(), g.chunk_shift)?;
                g.local.push(
                    LocalReg {
                        region: region.clone(),
                        chunks,
                        inflight: 0,
                    },
                    GFP_KERNEL,
                )?;
                g.local.len() - 1
            }
        };
        let lshift = g.local[li].chunks.shift();
        let mut wrs: KVec<ShimWr> = KVec::new();
        let pd = g.pd;
        for s in ops::segments(c, lshift, import.chunk_shift) {
            let lc = ops::chunk_of(s.local_off, lshift) as usize;
            if g.local[li].chunks.get(lc).is_none() {
                let mr = Mr::new(pd, region, lc as u64, lshift)?;
                wrs.push(
                    ShimWr::reg(mr.as_ptr(), ffi::ACCESS_LOCAL_WRITE, false),
                    GFP_KERNEL,
                )?;
                g.local[li].chunks.set(lc, mr)?;
            }
            let lkey = g.local[li].chunks.get(lc).map_or(0, |m| m.lkey());
            let rc = ops::chunk_of(s.remote_off, import.chunk_shift) as usize;
            let rkey = *import.rkeys.get(rc).ok_or(abi::error(EINVAL))?;
            wrs.push(
                ShimWr {
                    opcode: if c.dir == Dir::Read {
                        ffi::WR_READ
                    } else {
                        ffi::WR_WRITE
                    },
                    signaled: 0,
                    slot: ffi::NO_SLOT,
                    pad: 0,
                    local_addr: s.local_off,
                    lkey,
                    len: s.len,
                    remote_addr: s.remote_off,
                    rkey,
                    access: 0,
                    mr: ptr::null_mut(),
                },
                GFP_KERNEL,
            )?;
        }
        if c.dir == Dir::Write && g.write_fence {
            if let Some(last) = wrs.last() {
                let (addr, rkey) = (last.remote_addr + u64::from(last.len) - 1, last.rkey);
                wrs.push(
                    ShimWr {
                        opcode: ffi::WR_FENCE,
                        signaled: 0,
                        slot: ffi::NO_SLOT,
                        pad: 0,
                        local_addr: 0,
                        lkey: 0,
                        len: 1,
                        remote_addr: addr,
                        rkey,
                        access: 0,
                        mr: ptr::null_mut(),
                    },
                    GFP_KERNEL,
                )?;
            }
        }
        let n = wrs.len() as u32;
        if n > SQ_DEPTH {
            return Err(abi::error(E2BIG));
        }
        if n > g.sq_free {
            return Ok(false);
        }
        let Some(slot) = crate::compat::vec_pop(&mut g.free_slots) else {
            return Ok(false);
        };
        let ctx = KBox::new(
            OpCtx {
                region: region.clone(),
                user_data,
                opcode,
                wrs: n,
                bytes: c.len,
                sync,
            },
            GFP_KERNEL,
        );
        let ctx = match ctx {
            Ok(ctx) => ctx,
            Err(e) => {
                let _ = g.free_slots.push(slot, GFP_KERNEL);
                return Err(e.into());
            }
        };
        if let Some(last) = wrs.last_mut() {
            last.signaled = 1;
            last.slot = slot;
        }
        g.ops[slot as usize] = Some(ctx);
        let mut posted = 0;
        // SAFETY: `g.qp` is live while set; every MR the requests name is
        // kept in `g.local` until no operation uses it.
        let ret = unsafe { ffi::rrdma_shim_post(g.qp, wrs.as_ptr(), n, &mut posted) };
        if posted < n {
            // The signaled request was not posted: no completion will come
            // for the slot. What was posted fails with the QP.
            g.ops[slot as usize] = None;
            let _ = g.free_slots.push(slot, GFP_KERNEL);
            g.sq_free -= posted;
            drop(g);
            let e = if ret != 0 { -ret } else { abi::errno::EIO };
            self.fail(e);
            return Err(abi::error(e));
        }
        g.sq_free -= n;
        g.local[li].inflight += 1;
        Ok(true)
    }

    /// The completion of operation slot `slot`. A second completion of a
    /// slot (siw's flush path) finds it empty, or holding a newer
    /// operation that then fails with the flush status: only flushes are
    /// ever duplicated, and they happen while the connection is failing.
    fn slot_done(&self, slot: u32, wc_status: u32) {
        let op = {
            let mut g = self.inner.lock();
            let op = g.ops.get_mut(slot as usize).and_then(|o| o.take());
            if op.is_some() {
                let _ = g.free_slots.push(slot, GFP_KERNEL);
            }
            op
        };
        match op {
            Some(op) => self.op_done(op, wc_status),
            None => pr_debug!(
                "second completion of slot {} (status {}) ignored\n",
                slot,
                wc_status
            ),
        }
    }

    /// An operation completed (it no longer occupies a slot).
    fn op_done(&self, op: KBox<OpCtx>, wc_status: u32) {
        let (errno, prune) = {
            let mut g = self.inner.lock();
            g.sq_free += op.wrs;
            let mut prune = None;
            if let Some(i) = g
                .local
                .iter()
                .position(|l| Arc::ptr_eq(&l.region, &op.region))
            {
                match g.local[i].inflight.checked_sub(1) {
                    Some(n) => g.local[i].inflight = n,
                    None => pr_warn!(
                        "BUG: completion of an operation not in flight (user_data {:#x}, opcode {}, wrs {}, status {})\n",
                        op.user_data, op.opcode, op.wrs, wc_status
                    ),
                }
                if g.local[i].inflight == 0 && op.region.is_destroyed() {
                    prune = crate::compat::vec_swap_remove(&mut g.local, i);
                }
            }
            let errno = match ops::wc_errno(wc_status) {
                Some(ECANCELED) if g.fatal.is_some() => Some(ECONNABORTED),
                // Flushed: by our own close (ECANCELED), or because the
                // connection failed under it (the peer went away).
                Some(ECANCELED) => match g.state {
                    State::Closing { error: Some(e) } | State::Closed { error: Some(e) } => Some(e),
                    State::Closing { error: None } | State::Closed { error: None } => {
                        Some(ECANCELED)
                    }
                    _ => Some(ECONNRESET),
                },
                e => e,
            };
            (errno, prune)
        };
        drop(prune);
        self.cv.notify_all();
        if let Some(e) = errno {
            if wc_status != ops::wc::WR_FLUSH_ERR {
                pr_warn!(
                    "operation failed (work completion status {}); closing the connection\n",
                    wc_status
                );
                self.fail(e);
            }
        }
        let status = errno.map_or(0, |e| -e);
        match &op.sync {
            Some(w) => w.set(status),
            None => self.shared.complete(Completion {
                user_data: op.user_data,
                status,
                opcode: op.opcode,
                bytes: if status == 0 { op.bytes } else { 0 },
            }),
        }
    }

    /// Drops cached registrations of `region` that no operation uses
    /// (region destroyed); those in use go when their last operation does.
    pub(crate) fn forget_region(&self, region: &Arc<Region>) {
        let gone = {
            let mut g = self.inner.lock();
            match g.local.iter().position(|l| Arc::ptr_eq(&l.region, region)) {
                Some(i) if g.local[i].inflight == 0 => {
                    crate::compat::vec_swap_remove(&mut g.local, i)
                }
                _ => None,
            }
        };
        drop(gone);
    }

    /// Runs a synchronous operation: posts it (waiting for room) and waits
    /// for its status.
    pub(crate) fn run_sync(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        opcode: u32,
    ) -> Result<i32> {
        let w = SyncWait::new()?;
        loop {
            if self.post_op(import, region, c, 0, opcode, Some(w.clone()))? {
                break;
            }
            let mut g = self.inner.lock();
            wait_until(&self.cv, &mut g, u32::MAX, |i| {
                i.sq_free >= SQ_DEPTH / 2 || !i.state.is_connected()
            })
            .map_err(abi::error)?;
        }
        let mut s = w.status.lock();
        wait_until(&w.cv, &mut s, u32::MAX, |s| s.is_some()).map_err(abi::error)?;
        Ok(s.unwrap_or(0))
    }
}

impl Import {
    /// The remote view `abi::ops::check_op` needs.
    pub(crate) fn view(&self) -> ops::RemoteView {
        ops::RemoteView {
            geometry: self.geometry,
            writable: self.writable,
            revoked: self.conn.is_revoked(self.token),
        }
    }
}

/// rdma_cm event of a connection id.
///
/// # Safety
///
/// `conn` is the id's context, a [`Conn::raw`] pointer whose reference is
/// held; `pdata` is valid for `len` bytes (or `len` is 0).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_conn_event(
    conn: *mut c_void,
    event: c_int,
    status: c_int,
    pdata: *const c_void,
    len: u8,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { Conn::from_ctx(conn) };
    let pdata: &[u8] = if pdata.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: by the function's safety requirements.
        unsafe { core::slice::from_raw_parts(pdata.cast(), usize::from(len)) }
    };
    this.cm_event(event, status, pdata)
}

/// A receive or unsignaled request failed on a connection's QP.
///
/// # Safety
///
/// `conn` is a live connection's [`Conn::raw`] pointer (its QP exists).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_qp_error(conn: *mut c_void, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { Conn::from_ctx(conn) };
    if let Some(e) = ops::wc_errno(wc_status as u32) {
        if e != ECANCELED {
            this.fail(e);
        }
    }
}

/// A control-path registration completed.
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`].
#[no_mangle]
unsafe extern "C" fn rrdma_rust_quiet_done(conn: *mut c_void, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { Conn::from_ctx(conn) };
    this.quiet_done(wc_status as u32);
}

/// A control message arrived.
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`]; `msg` is valid for `len` bytes.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_ctrl_recv(conn: *mut c_void, msg: *const c_void, len: u32) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { Conn::from_ctx(conn) };
    // SAFETY: by the function's safety requirements.
    let msg = unsafe { core::slice::from_raw_parts(msg.cast::<u8>(), len as usize) };
    this.ctrl_recv(msg);
}

/// A control message was sent (or flushed).
///
/// # Safety
///
/// As [`rrdma_rust_qp_error`].
#[no_mangle]
unsafe extern "C" fn rrdma_rust_ctrl_sent(conn: *mut c_void, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { Conn::from_ctx(conn) };
    if let Some(e) = ops::wc_errno(wc_status as u32) {
        if e != ECANCELED {
            this.fail(e);
        }
    }
}

/// The signaled last request of the operation in slot `slot` completed.
///
/// # Safety
///
/// `conn` is the completion queue's owner (a live connection's
/// [`Conn::raw`] pointer).
#[no_mangle]
unsafe extern "C" fn rrdma_rust_op_done(conn: *mut c_void, slot: u32, wc_status: c_int) {
    // SAFETY: by the function's safety requirements.
    let this = unsafe { Conn::from_ctx(conn) };
    this.slot_done(slot, wc_status as u32);
}
