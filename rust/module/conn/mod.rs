// SPDX-License-Identifier: GPL-2.0

//! Connections: one RC queue pair over rdma_cm between two rrdma kernels.
//!
//! One concern per file:
//! - this file: the lifecycle — connect, accept, rdma_cm events, the state
//!   gate ([`Conn::advance`], the only place the state changes, through the
//!   pure machine `abi::conn`), teardown;
//! - `ctrl.rs`: the control channel (request slots, sending, dispatch);
//! - `grants.rs`: the exporter side (registrations granted to the peer,
//!   revocation);
//! - `imports.rs`: the importer side (imports, revocations received);
//! - `data.rs`: block operations (posting, operation slots, completions);
//! - `callbacks.rs`: the C-callable entry points of the id and queue pair.
//!
//! References: the cm_id's context holds one reference from id creation
//! until the id is destroyed (`CmId`), and covers the queue pair's
//! callbacks (the queue pair is destroyed before the id); the file's
//! registry, handles, imports and operations in flight hold the others.
//!
//! Teardown: every end of a connection (user close, peer disconnect, a
//! failed work completion, a protocol violation, device removal, a timeout)
//! goes through the state machine, which asks for the teardown exactly
//! once. It runs where it is asked for if that is process context outside
//! any handler (an ioctl, device removal), in the handler for rdma_cm's
//! device removal (the CM then destroys the id), and otherwise on the
//! module's work queue. It drains the queue pair at once (no waiting for
//! the peer's disconnect), so every posted operation completes exactly
//! once: with its own status, with the provider's flush, or, for what the
//! provider never completes, from the teardown itself.
//!
//! Locking (outer first):
//! - rdma_cm's handler mutex (the CM holds it around our handlers)
//!   → `Conn::inner` → `Shared::exports` (a grant re-checks its export)
//!   → the shim queue pair's spinlock (posting, control sends).
//! - `Conn::inner` is never held across anything that waits for a handler
//!   or a completion: destroying the id (`CmId` drop), the drain (`Qp`
//!   drop), or a copy to or from user memory. `Shared::ring`,
//!   `Shared::conns` and `DeviceCtx::conns` are taken alone.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, CondVarTimeoutResult, Mutex};
use kernel::workqueue::{self, impl_has_work, new_work, Work, WorkItem};

use crate::abi::{
    conn::{step, Action, Event, State},
    errno::{Errno, EADDRINUSE, EADDRNOTAVAIL, EINTR, ENODEV, ENOMEM, ENOTCONN, ETIMEDOUT},
    ops,
    wire::{self, Hello, CTRL_LEN},
};
use crate::cm_id::CmId;
use crate::device::DeviceCtx;
use crate::ffi::{self, cm_event, RdmaCmId, ShimAddr};
use crate::foreign;
use crate::listener::Listener;
use crate::shared::Shared;
use crate::verbs::{Pd, Qp, QpSizes};

mod callbacks;
mod ctrl;
mod data;
mod grants;
mod imports;

pub(crate) use data::{Posted, SQ_DEPTH};
pub(crate) use imports::Import;

/// Export registrations that may be in flight on one connection.
const GRANT_REG_DEPTH: u32 = 128;
/// Control receive buffers we post (and advertise).
const CTRL_RECV: u32 = 32;
/// Control send buffers: our requests and revokes, and our answers to the
/// peer's (bounded by the wire protocol).
const CTRL_SEND: u32 = 32;
/// Default timeout of connect and import.
pub(crate) const DEFAULT_TIMEOUT_MS: u32 = 5000;
/// Attempts of a connect whose local port turned out to be taken.
const CONNECT_ATTEMPTS: u32 = 4;

const _: () = assert!(CTRL_RECV >= wire::CTRL_RECV_MIN as u32);
const _: () = assert!(CTRL_SEND as usize >= 2 * (wire::REQ_MAX + wire::REVOKE_MAX));

/// Source of connection serial numbers (never reused).
static SERIAL: AtomicU64 = AtomicU64::new(1);

/// What a connection owns while it has a queue pair. Dropped by the
/// teardown, outside the lock, in field order: the queue pair first
/// (drained), the registrations, then the domain.
struct Resources {
    qp: Qp,
    local: data::LocalRegs,
    grants: grants::Grants,
    pd: Arc<Pd>,
    /// Registration chunk size (log2) on this connection's device.
    chunk_shift: u32,
    /// iWARP completes an RDMA WRITE once sent, not once placed: writes end
    /// with a one-byte READ (a fence) so that their completion means the
    /// data is in the peer's memory, as on InfiniBand and RoCE.
    write_fence: bool,
}

/// The state of a connection, under `Conn::inner`: one sub-struct per
/// concern.
struct Inner {
    state: State,
    timeout_ms: u32,
    /// The rdma_cm id; `None` before it exists and after the teardown.
    id: Option<CmId<Conn>>,
    /// Verbs objects; `None` before setup and after the teardown.
    res: Option<Resources>,
    /// The device this connection registered with for removal.
    device: Option<Arc<DeviceCtx>>,
    peer: ShimAddr,
    /// The listener that accepted this connection, until established.
    listener: Option<Arc<Listener>>,
    ctrl: ctrl::Channel,
    imports: imports::Table,
    ops: data::Slots,
}

/// A connection.
#[pin_data]
pub(crate) struct Conn {
    shared: Arc<Shared>,
    /// Identity for export restrictions: unique, never reused (an address
    /// could be a freed connection's).
    serial: u64,
    active: bool,
    #[pin]
    inner: Mutex<Inner>,
    /// State changes, answers, free slots, send-queue room.
    #[pin]
    cv: CondVar,
    /// Runs a teardown asked for where it cannot run.
    #[pin]
    teardown_work: Work<Conn>,
}

impl_has_work! {
    impl HasWork<Self> for Conn { self.teardown_work }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::teardown(&this, false);
    }
}

/// Waits on `cv` (with `g` locked) until `done` holds: `EINTR` on a
/// signal, `ETIMEDOUT` after `*left` jiffies (`None`: no timeout), which
/// is updated so that consecutive waits share one deadline.
fn wait_until<T: Unpin, B: kernel::sync::lock::Backend>(
    cv: &CondVar,
    g: &mut kernel::sync::lock::Guard<'_, T, B>,
    left: &mut Option<kernel::time::Jiffies>,
    mut done: impl FnMut(&mut T) -> bool,
) -> Result<(), Errno> {
    while !done(g) {
        match left {
            None => {
                if cv.wait_interruptible(g) {
                    return Err(EINTR);
                }
            }
            Some(j) => match cv.wait_interruptible_timeout(g, *j) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                CondVarTimeoutResult::Woken { jiffies } => *j = jiffies,
            },
        }
    }
    Ok(())
}

/// A deadline `timeout_ms` from now for [`wait_until`] (`u32::MAX`: none).
fn deadline(timeout_ms: u32) -> Option<kernel::time::Jiffies> {
    (timeout_ms != u32::MAX).then(|| kernel::time::msecs_to_jiffies(timeout_ms))
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
        let ops = data::Slots::new()?;
        Arc::pin_init(
            pin_init!(Self {
                shared,
                serial: SERIAL.fetch_add(1, Ordering::Relaxed),
                active,
                inner <- new_mutex!(Inner {
                    state,
                    timeout_ms,
                    id: None,
                    res: None,
                    device: None,
                    peer: ShimAddr::default(),
                    listener: None,
                    ctrl: ctrl::Channel::new(),
                    imports: imports::Table::new(),
                    ops,
                }, "Conn::inner"),
                cv <- new_condvar!("Conn::cv"),
                teardown_work <- new_work!("Conn::teardown_work"),
            }),
            GFP_KERNEL,
        )
    }

    /// The state gate: feeds `ev` to the state machine, the only place a
    /// connection's state changes, and returns what to do.
    fn advance(g: &mut Inner, ev: Event) -> Action {
        let (state, action) = step(g.state, ev);
        g.state = state;
        action
    }

    /// The connection's serial number (export restrictions).
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// The shim address of the peer.
    pub(crate) fn peer(&self) -> ShimAddr {
        self.inner.lock().peer
    }

    /// Whether the connection has ended (closing or closed).
    pub(crate) fn is_finished(&self) -> bool {
        self.inner.lock().state.is_finished()
    }

    /// Connects to `addr`; waits until established or failed. A local port
    /// that the transport finds taken (siw binds a TCP socket to the port
    /// rdma_cm chose, which rdma_cm's own port space does not know) is
    /// retried with a new id; `EADDRNOTAVAIL` if no free port is found.
    pub(crate) fn connect(
        shared: &Arc<Shared>,
        addr: &ShimAddr,
        timeout_ms: u32,
    ) -> Result<Arc<Self>, Errno> {
        let mut last = EADDRNOTAVAIL;
        for _ in 0..CONNECT_ATTEMPTS {
            match Self::connect_once(shared, addr, timeout_ms) {
                Err(e) if e == EADDRINUSE || e == EADDRNOTAVAIL => last = e,
                r => return r,
            }
        }
        crate::ffi::warn_user!(
            "CONNECT: no usable local port after {} attempts (errno {})\n",
            CONNECT_ATTEMPTS,
            last
        );
        Err(EADDRNOTAVAIL)
    }

    fn connect_once(
        shared: &Arc<Shared>,
        addr: &ShimAddr,
        timeout_ms: u32,
    ) -> Result<Arc<Self>, Errno> {
        let this =
            Self::new(shared.clone(), true, State::Resolving, timeout_ms).map_err(|_| ENOMEM)?;
        shared.register(&this).map_err(|_| ENOMEM)?;
        let started = CmId::create(&this, false).and_then(|id| {
            let mut g = this.inner.lock();
            // Held across the call: the id's first event waits until the id
            // is published. rdma_resolve_addr() takes no handler mutex.
            let r = id.resolve_addr(addr, timeout_ms);
            g.id = Some(id);
            r
        });
        if let Err(e) = started {
            Self::destroy(&this, Event::AddrError(e));
            return Err(e);
        }
        let mut left = deadline(timeout_ms);
        let waited = {
            let mut g = this.inner.lock();
            wait_until(&this.cv, &mut g, &mut left, |i| {
                i.state.is_connected() || i.state.is_finished()
            })
            .map(|()| g.state)
        };
        match waited {
            Ok(State::Connected) => Ok(this),
            Ok(state) => {
                Self::destroy(&this, Event::UserClose);
                Err(state.errno())
            }
            Err(e) => {
                Self::destroy(
                    &this,
                    if e == ETIMEDOUT {
                        Event::Timeout
                    } else {
                        Event::UserClose
                    },
                );
                Err(e)
            }
        }
    }

    /// Adopts the connect request on `child` (the listener's handler):
    /// checks the handshake, builds the queue pair and accepts. Returns the
    /// connection and the context the child id must carry; on error the
    /// caller rejects with the errno and the CM destroys the child.
    pub(crate) fn accept_request(
        shared: &Arc<Shared>,
        listener: &Arc<Listener>,
        child: core::ptr::NonNull<RdmaCmId>,
        pdata: &[u8],
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<(Arc<Self>, *mut kernel::ffi::c_void), Errno> {
        let peer_hello = Hello::decode(pdata)?;
        wire::negotiate(peer_hello.version)?;
        let this = Self::new(shared.clone(), false, State::Accepting, DEFAULT_TIMEOUT_MS)
            .map_err(|_| ENOMEM)?;
        // Registered before anything can tear it down, so that the
        // teardown always unregisters it.
        shared.register(&this).map_err(|_| ENOMEM)?;
        // SAFETY: `child` is the id of the request being handled; we return
        // success (the CM keeps the id) only while keeping this value.
        let id = unsafe { CmId::adopt(child, &this) };
        let mut g = this.inner.lock();
        g.id = Some(id);
        g.listener = Some(listener.clone());
        let h = hello().encode();
        let accepted = this.setup_qp(&mut g).and_then(|()| match g.id.as_ref() {
            // SAFETY: we run in the handler of the request that made the id.
            Some(id) => unsafe { id.accept(&h, peer_initiator, peer_responder) },
            None => Err(ENOTCONN),
        });
        match accepted {
            Ok(()) => {
                let ctx =
                    g.id.as_ref()
                        .map_or(core::ptr::null_mut(), |id| id.context());
                drop(g);
                Ok((this, ctx))
            }
            Err(e) => {
                let action = Self::advance(&mut g, Event::ConnectError(e));
                drop(g);
                if action == Action::Teardown {
                    // In the handler: the CM destroys the child we hand back.
                    Self::teardown(&this, true);
                }
                Err(e)
            }
        }
    }

    /// Builds the queue pair on the id's device (route resolved, or a
    /// request being accepted).
    fn setup_qp(self: &Arc<Self>, g: &mut Inner) -> Result<(), Errno> {
        let id = g.id.as_ref().ok_or(ENOTCONN)?;
        let dev = id.device();
        let device = self
            .shared
            .context
            .find_device(dev)
            .filter(|d| d.usable())
            .ok_or(ENODEV)?;
        // Registered for removal before the device is used.
        device.add_conn(self)?;
        g.device = Some(device.clone());
        let pd = Pd::new(&device).map_err(|e| -e.to_errno())?;
        // SAFETY: `dev` is live while `device` is held.
        let max_pages = unsafe { ffi::rrdma_shim_max_fast_reg_pages(dev) };
        let sizes = QpSizes {
            send: SQ_DEPTH + GRANT_REG_DEPTH,
            ops: SQ_DEPTH,
            recv: CTRL_RECV,
            ctrl_send: CTRL_SEND,
            msg_len: CTRL_LEN as u32,
        };
        // SAFETY: the id is live and has no queue pair; the queue pair is
        // dropped (by the teardown) before the id, and the id's context
        // reference keeps `self`, the callbacks' owner, alive until then.
        let qp = unsafe { Qp::new(id.as_ptr(), &pd, foreign::addr_of(self), &sizes) }
            .inspect_err(|e| pr_warn!("cannot create a queue pair: errno {}\n", e))?;
        g.peer = id.peer();
        g.res = Some(Resources {
            qp,
            local: data::LocalRegs::new(),
            grants: grants::Grants::new(),
            pd,
            chunk_shift: ops::chunk_shift(max_pages, ffi::page_size().trailing_zeros()),
            write_fence: device.attr().node_type == crate::abi::uapi::node_type::RNIC,
        });
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
        let mut action = Self::advance(&mut g, ev);
        let mut ready_listener = None;
        match action {
            Action::ResolveRoute => {
                let r =
                    g.id.as_ref()
                        .map_or(Err(ENOTCONN), |id| id.resolve_route(g.timeout_ms));
                if let Err(e) = r {
                    action = Self::advance(&mut g, Event::RouteError(e));
                }
            }
            Action::Connect => {
                let h = hello().encode();
                let r = self.setup_qp(&mut g).and_then(|()| match g.id.as_ref() {
                    // SAFETY: we run in the id's handler.
                    Some(id) => unsafe { id.connect_locked(&h) },
                    None => Err(ENOTCONN),
                });
                if let Err(e) = r {
                    action = Self::advance(&mut g, Event::ConnectError(e));
                }
            }
            Action::Ready => ready_listener = g.listener.take(),
            Action::Teardown | Action::None => {}
        }
        drop(g);
        self.cv.notify_all();
        if let Some(l) = ready_listener {
            l.established(self);
        }
        if action != Action::Teardown {
            return 0;
        }
        if ev == Event::DeviceRemoval {
            // The CM waits for this id before the device can go: release
            // everything now and let the CM destroy the id.
            return Self::teardown(self, true);
        }
        self.schedule_teardown();
        0
    }

    /// Queues the teardown on the module's work queue (from a handler or a
    /// completion, where it cannot run).
    fn schedule_teardown(self: &Arc<Self>) {
        // SAFETY: the shim's work queue exists while the module is loaded,
        // and it is destroyed (drained) only after every connection.
        let wq = unsafe { workqueue::Queue::from_raw(ffi::rrdma_shim_wq()) };
        // Asked for once per connection (the state machine says so), so the
        // work cannot be queued already.
        let _ = wq.enqueue(self.clone());
    }

    /// Ends the connection because of `ev` (a failed completion, a broken
    /// protocol, a peer that stopped answering), from any context: the
    /// teardown runs on the work queue.
    fn fail(self: &Arc<Self>, ev: Event, why: &str, e: Errno) {
        let action = Self::advance(&mut self.inner.lock(), ev);
        self.cv.notify_all();
        if action == Action::Teardown {
            if crate::ffi::ratelimit() {
                pr_warn!(
                    "connection {} closing: {} (errno {})\n",
                    self.serial,
                    why,
                    e
                );
            }
            self.schedule_teardown();
        }
    }

    /// Ends the connection because of `ev` and returns once it is torn
    /// down (process context, no lock held). If a teardown is already under
    /// way (device removal, a concurrent close, the work queue), waits for
    /// it: callers rely on the connection's resources being gone. That wait
    /// is bounded by a drain and is not interruptible, like `flush_work()`.
    pub(crate) fn destroy(this: &Arc<Self>, ev: Event) {
        let action = Self::advance(&mut this.inner.lock(), ev);
        if action == Action::Teardown {
            Self::teardown(this, false);
        }
        let mut g = this.inner.lock();
        while !g.state.is_closed() {
            this.cv.wait(&mut g);
        }
    }

    /// The teardown, asked for by the state machine (the state is
    /// `Closing`): disconnects, drains and destroys the queue pair (every
    /// operation in flight completes, with an error), frees registrations,
    /// leaves the device, destroys the id (or hands it to the CM when
    /// `in_handler`: device removal, a refused request), leaves the file.
    /// Returns what the handler must return to the CM.
    fn teardown(this: &Arc<Self>, in_handler: bool) -> c_int {
        let (id, res, listener, device) = {
            let mut g = this.inner.lock();
            (
                g.id.take(),
                g.res.take(),
                g.listener.take(),
                g.device.take(),
            )
        };
        // Waiters (imports, revokes, synchronous operations) see the end.
        this.cv.notify_all();
        drop(listener);
        if let Some(id) = &id {
            if !in_handler {
                id.disconnect();
            }
        }
        if let Some(res) = res {
            let Resources {
                qp,
                local,
                grants,
                pd,
                ..
            } = res;
            // Drained and destroyed: no completion callback runs any more.
            drop(qp);
            this.flush_ops();
            // Registrations before their domain.
            drop(local);
            drop(grants);
            drop(pd);
        } else {
            this.flush_ops();
        }
        if let Some(device) = device {
            device.remove_conn(this);
        }
        let handed = match id {
            Some(id) if in_handler => {
                id.into_cm();
                1
            }
            Some(id) => {
                drop(id);
                0
            }
            None => 0,
        };
        this.shared.unregister(this);
        Self::advance(&mut this.inner.lock(), Event::TornDown);
        this.cv.notify_all();
        handed
    }
}
