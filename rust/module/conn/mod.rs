// SPDX-License-Identifier: GPL-2.0

//! Connections: an RC queue pair over rdma_cm between two rrdma kernels,
//! with data lanes (more queue pairs for operations) beside it.
//!
//! One concern per file:
//! - this file: the lifecycle — rdma_cm events, the state gate
//!   ([`Conn::advance`], the only place the state changes, through the
//!   pure machine `abi::conn`), teardown;
//! - `setup.rs`: connect, a listener's connect request, the resources;
//! - `ctrl.rs`: the control channel (request slots, sending, dispatch);
//! - `grants.rs`: the exporter side (registrations granted to the peer,
//!   revocation);
//! - `imports.rs`: the importer side (imports, revocations received);
//! - `data/`: block operations (posting, operation slots, fences,
//!   completions), one data path per queue pair, one concern a file;
//! - `lanes.rs`: data lanes (their handshake, events and failures);
//! - `keepalive.rs`: pings, and the end of a connection whose peer went
//!   silent;
//! - `reconnect.rs`: backoff, attempts and restored imports of a connection
//!   that reconnects.
//!
//! The C-callable entry points of the id and the queue pair are in
//! `entry/conn.rs`.
//!
//! References: the cm_id's context holds one reference from id creation
//! until the id is destroyed (`CmId`), and covers the queue pair's
//! callbacks (the queue pair is destroyed before the id); each queued run
//! of the timer holds one (`timer.rs`), and so do the queued teardown,
//! restore and unplug works and an io_uring submission's plug callback
//! (`data/fence.rs`); the file's registry, handles, imports and operations in
//! flight hold the others.
//!
//! Teardown: every end of a connection (user close, peer disconnect, a
//! failed work completion, a protocol violation, device removal, a timeout)
//! goes through the state machine, which asks for the teardown exactly
//! once. It runs where it is asked for if that is process context outside
//! any handler (an ioctl, device removal), in the handler for rdma_cm's
//! device removal (the CM then destroys the id), and otherwise on the
//! module's work queue. It cancels the timer (keepalive re-arms it only
//! while `Connected`, reconnect only from `Waiting` and the attempt's
//! states) and drains the queue pair at once (no waiting for the peer's
//! disconnect), so every posted operation completes exactly once: with its
//! own status, with the provider's flush, or, for what the provider never
//! completes, from the teardown itself. Its lanes go with it: every queue
//! pair is drained and destroyed before any path's registrations, and
//! those before the domain. A connection that reconnects goes
//! through the same teardown for each queue pair it loses; only the last
//! leaves the file's registry.
//!
//! Locking (outer first):
//! - rdma_cm's handler mutex (the CM holds it around our handlers; a
//!   lane's id has its own, taken like the connection's)
//!   → `Conn::inner` (which also covers the lanes) → `Shared::exports`
//!   (a grant re-checks its export) → a path's lock (`Conn::path_data`,
//!   one per queue pair, never two at once) → `Shared::ring` → the shim
//!   queue pair's spinlock (posting, control sends).
//! - A path's lock and `Shared::ring` are softirq-safe spinlocks
//!   (`compat::BhLock`): an operation's completion takes its path's lock
//!   alone (`data/complete.rs`), and reports under it to `Shared::ring` (a batch
//!   fence's writes), a synchronous operation's `SyncWait::status` (a
//!   leaf, softirq-safe too) or io_uring (task work, or the CQE an IOPOLL
//!   poller posts, under io_uring's lock it holds already). Nothing sleeps
//!   under them.
//! - `Conn::inner` is never held across anything that waits for a handler
//!   or a completion: destroying the id (`CmId` drop), the drain (`Qp`
//!   drop), or a copy to or from user memory. `Shared::conns` and
//!   `DeviceCtx::conns` are taken alone.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, CondVarTimeoutResult, Mutex};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

use crate::abi::Result;
use crate::abi::{
    conn::{step_gated, Action, Event, State},
    errno::{Errno, EAGAIN, ECANCELED, ECONNRESET, ENOTCONN, ERESTARTSYS, ETIMEDOUT},
    keepalive::Settings,
    ops,
    wire::{self, Hello},
};
use crate::cm_id::{CmId, InHandler};
use crate::device::DeviceCtx;
use crate::ffi::{self, cm_event, ShimAddr};
use crate::listener::Listener;
use crate::shared::Shared;
use crate::verbs::Pd;

mod ctrl;
mod data;
mod grants;
mod imports;
mod keepalive;
mod lanes;
mod reconnect;
mod setup;

pub(crate) use ctrl::Counts as CtrlCounts;
pub(crate) use data::{Posted, ReportTo};
pub(crate) use imports::Import;
pub(crate) use keepalive::Counts as KeepaliveCounts;
pub(crate) use reconnect::Counts as ReconnectCounts;

/// The kind of a work request whose completion failed, for the log line.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wr {
    /// A posted control-message receive.
    Receive,
    /// A control message's send.
    ControlSend,
    /// A registration (an export's grant or a data-path chunk).
    Registration,
    /// A data operation.
    Operation,
}

impl Wr {
    fn name(self) -> &'static str {
        match self {
            Wr::Receive => "a receive",
            Wr::ControlSend => "a control message's send",
            Wr::Registration => "a registration",
            Wr::Operation => "an operation",
        }
    }
}

/// Control receive buffers we post (and advertise). The other queue sizes
/// come from the device's limits (`abi::limits::queue_sizes`).
const CTRL_RECV: u32 = crate::abi::limits::CTRL_RECV;
/// Default timeout of connect and import.
pub(crate) const DEFAULT_TIMEOUT_MS: u32 = 5000;
/// Attempts of a connect whose local port turned out to be taken.
const CONNECT_ATTEMPTS: u32 = 4;

const _: () = assert!(CTRL_RECV >= wire::CTRL_RECV_MIN as u32);

/// Source of connection serial numbers (never reused).
static SERIAL: AtomicU64 = AtomicU64::new(1);

/// What a connection owns beside its id's queue pair, once it has one.
/// Dropped by the teardown, outside the lock, after the queue pairs (every
/// request that names a registration has completed) and after the paths'
/// registrations, in field order: the grants' registrations, then the
/// domain.
struct Resources {
    grants: grants::Grants,
    pd: Arc<Pd>,
    /// Registration chunk size (log2) on this connection's device.
    chunk_shift: u32,
    /// Export registrations that may be in flight on the queue pair.
    grant_regs: u32,
    /// The sizes of a data lane's queue pair (`lanes.rs`).
    lane_sizes: crate::verbs::QpSizes,
    /// iWARP's rules apply: an RDMA WRITE completes once sent, not once
    /// placed, so writes end with a one-byte READ (a fence) and their
    /// completion means the data is in the peer's memory, as on InfiniBand
    /// and RoCE; and a READ's sink must allow remote write, so each READ
    /// (a fence's included) has a sink registered for it alone, which the
    /// READ invalidates (`abi::ops::op_wrs`).
    iwarp: bool,
}

/// The state of a connection, under `Conn::inner`: one sub-struct per
/// concern.
struct Inner {
    state: State,
    /// The wire protocol version both sides speak; 0 until known (the
    /// passive side knows it at accept, the active side at establishment).
    version: u16,
    /// The active side's hello nonce: names this queue pair's connection on
    /// both sides (a reconnect's fence).
    nonce: u64,
    timeout_ms: u32,
    /// The rdma_cm id with its queue pair; `None` before it exists and
    /// after the teardown.
    id: Option<CmId<Conn>>,
    /// The raw id of `id` (kept while `id` is taken out): an event of
    /// another id of this connection is a lane's (`lanes.rs`).
    main_id: Option<usize>,
    /// Data lanes the peer granted (active side) or this side granted
    /// (passive side) on the current queue pair: the queue pairs beyond
    /// the connection's own.
    lanes: u16,
    /// Registrations and domain; `None` before setup and after the
    /// teardown.
    res: Option<Resources>,
    /// The device this connection registered with for removal.
    device: Option<Arc<DeviceCtx>>,
    peer: ShimAddr,
    /// The listener that accepted this connection, until established.
    listener: Option<Arc<Listener>>,
    ctrl: ctrl::Channel,
    imports: imports::Table,
    /// Each queue pair's path: `[0]` the connection's own, then its data
    /// lanes (`lanes.rs`), at most `wire::QPS_MAX`; their data state is
    /// in `Conn::path_data`.
    paths: KVec<data::Path>,
    keepalive: keepalive::State,
    /// Set on a CONNECT with `RRDMA_CONNECT_RECONNECT`.
    reconnect: Option<reconnect::State>,
    /// The handler is in `rdma_connect_locked()` with `id` taken out and
    /// this lock released (siw's blocks in a TCP connect, for up to the
    /// SYN retries while the peer is unreachable): the teardown waits for
    /// it before it takes the id.
    connecting: bool,
    /// A work request was flushed while connecting (`abi::conn::step_gated`).
    flushed_early: bool,
}

impl Inner {
    /// Installs the connection's id.
    fn install_id(&mut self, id: CmId<Conn>) {
        self.main_id = Some(id.addr());
        self.id = Some(id);
    }

    /// The errno a new operation, import or request fails with now.
    fn errno(&self) -> Errno {
        self.state.errno(self.was_established())
    }

    /// The errno of an operation that found its queue pair failed or
    /// gone (`ENOTCONN` from its path, the shim or the provider), which the
    /// state may not say yet: the state's, but `EAGAIN` while a connection
    /// that reconnects is not closed for good (it is noticing its failure,
    /// and comes back).
    fn errno_gone(&self) -> Errno {
        let e = self.errno();
        let ending = matches!(
            self.state,
            State::Closed { .. } | State::Closing { retry: false, .. }
        );
        if e == ENOTCONN && self.reconnect.is_some() && !ending {
            EAGAIN
        } else {
            e
        }
    }

    /// Whether this connection reconnects and was established before (a
    /// state before `Connected` is then an attempt).
    fn was_established(&self) -> bool {
        self.reconnect
            .as_ref()
            .is_some_and(|r| r.budget.was_established())
    }
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
    /// Restores the imports after a reconnect (`reconnect.rs`).
    #[pin]
    restore_work: Work<Conn, 1>,
    /// Posts the open group's fence for an io_uring submission whose plug
    /// closed where nothing may sleep (`data/fence.rs`).
    #[pin]
    unplug_work: Work<Conn, 2>,
    /// Each path's data state under its own lock (`data/path.rs`): what posting
    /// (under `inner` too) and completions (alone) touch.
    path_data: KVec<Pin<KBox<data::PathLock>>>,
    /// What completions handled without `inner` leave for it
    /// (`data/followups.rs`).
    followups: data::Followups,
    /// Runs [`Self::followups`].
    #[pin]
    followup_work: Work<Conn, 3>,
    /// When a data operation last ended well (jiffies; 0: not since the
    /// last keepalive tick), for keepalive (`keepalive.rs`).
    heard: AtomicU64,
    /// Keepalive while established; backoff and attempt deadline while
    /// reconnecting.
    timer: crate::timer::Timer,
}

impl_has_work! {
    impl HasWork<Self> for Conn { self.teardown_work }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::teardown(&this, None);
        let tearing = &this.shared.reconnect.tearing;
        tearing.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Waits on `cv` (with `g` locked) until `done` holds: `ERESTARTSYS` on a
/// signal or pending task work (io_uring's completions raise
/// `TIF_NOTIFY_SIGNAL`: the ioctl then restarts after running it, where
/// `EINTR` would fail a call nothing interrupted), `ETIMEDOUT` after
/// `*left` jiffies (`None`: no timeout), which is updated so that
/// consecutive waits share one deadline.
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
                    return Err(ERESTARTSYS);
                }
            }
            Some(j) => match cv.wait_interruptible_timeout(g, *j) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
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

/// Our hello: the newest version we speak (connect request, with the
/// connection it replaces) or the one chosen (accept), offering or
/// granting `qps` queue pairs (the connection's own and its data lanes).
fn hello(version: u16, qps: u16, nonce: u64, replaces: Option<u64>) -> Hello {
    Hello {
        version,
        ctrl_credits: CTRL_RECV as u16,
        qps,
        nonce,
        replaces,
        lane: None,
    }
}

impl Conn {
    fn new(
        shared: Arc<Shared>,
        active: bool,
        state: State,
        timeout_ms: u32,
        keepalive: Option<Settings>,
        reconnect: Option<ShimAddr>,
    ) -> Result<Arc<Self>> {
        let mut paths = KVec::with_capacity(usize::from(wire::QPS_MAX), GFP_KERNEL)?;
        paths.push(data::Path::new(), GFP_KERNEL)?;
        let path_data = data::path_locks()?;
        let buffers = ctrl::Channel::buffers()?;
        let timer = crate::timer::Timer::new()?;
        Arc::pin_init(
            pin_init!(Self {
                shared,
                serial: SERIAL.fetch_add(1, Ordering::Relaxed),
                active,
                inner <- new_mutex!(Inner {
                    state,
                    version: 0,
                    nonce: 0,
                    timeout_ms,
                    id: None,
                    main_id: None,
                    lanes: 0,
                    res: None,
                    device: None,
                    peer: ShimAddr::default(),
                    listener: None,
                    ctrl: ctrl::Channel::new(buffers),
                    imports: imports::Table::new(),
                    paths,
                    keepalive: keepalive::State::new(keepalive),
                    reconnect: reconnect.map(reconnect::State::new),
                    connecting: false,
                    flushed_early: false,
                }, "Conn::inner"),
                cv <- new_condvar!("Conn::cv"),
                teardown_work <- new_work!("Conn::teardown_work"),
                restore_work <- new_work!("Conn::restore_work"),
                unplug_work <- new_work!("Conn::unplug_work"),
                path_data,
                followups: data::Followups::new(),
                followup_work <- new_work!("Conn::followup_work"),
                heard: AtomicU64::new(0),
                timer,
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    /// The state gate: feeds `ev` to the state machine, the only place a
    /// connection's state changes, and returns what to do. A failure is
    /// followed by a reconnect while the connection's budget allows.
    fn advance(g: &mut Inner, ev: Event) -> Action {
        let retry = g.reconnect.as_ref().is_some_and(|r| r.budget.may_retry());
        let (state, action) = step_gated(g.state, ev, retry, &mut g.flushed_early);
        g.state = state;
        action
    }

    /// The timer's run: keepalive while established, the end of the
    /// backoff while waiting, the deadline of a reconnect attempt.
    pub(crate) fn timer_tick(self: &Arc<Self>) {
        // Each re-checks the state under the lock: it may change meanwhile.
        let state = self.inner.lock().state;
        match state {
            State::Connected => self.keepalive_tick(),
            State::Waiting { .. } => self.reconnect_tick(),
            _ => self.attempt_timeout(),
        }
    }

    /// Counts a callback into this connection (see `work.rs`).
    pub(crate) fn count(&self, kind: crate::work::Kind) {
        self.shared.work.count(kind);
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

    /// An rdma_cm event (in the handler `h` of the connection's id).
    /// Returns non-zero when the CM must destroy the id (device removal).
    pub(crate) fn cm_event(
        self: &Arc<Self>,
        h: &InHandler,
        event: i32,
        status: i32,
        pdata: &[u8],
    ) -> c_int {
        if let Some(lane) = self.lane_of(h) {
            return self.lane_event(h, lane, event, status, pdata);
        }
        // The version the passive side chose and the lanes it granted,
        // from its accept.
        let mut chosen = None;
        let ev = match event {
            cm_event::ADDR_RESOLVED => Event::AddrResolved,
            cm_event::ADDR_ERROR => Event::AddrError(status),
            cm_event::ROUTE_RESOLVED => Event::RouteResolved,
            cm_event::ROUTE_ERROR => Event::RouteError(status),
            cm_event::ESTABLISHED if self.active => {
                // The accept must grant no more queue pairs than we
                // offered (`Inner::lanes` until now).
                let offered = self.inner.lock().lanes + 1;
                let checked = Hello::decode(pdata).and_then(|h| {
                    let lanes = wire::granted_lanes(&h, offered)?;
                    Ok((wire::chosen(h.version)?, lanes))
                });
                match checked {
                    Ok(v) => {
                        chosen = Some(v);
                        Event::Established
                    }
                    Err(e) => {
                        pr_warn!("peer's handshake reply is malformed: errno {}\n", e.get());
                        Event::ConnectError(e.to_errno())
                    }
                }
            }
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
        if let (Some((v, lanes)), Action::Ready) = (chosen, action) {
            g.version = v;
            g.lanes = lanes;
        }
        let mut ready_listener = None;
        match action {
            Action::ResolveRoute => {
                let r =
                    g.id.as_ref()
                        .map_or(Err(ENOTCONN), |id| id.resolve_route(g.timeout_ms));
                if let Err(e) = r {
                    action = Self::advance(&mut g, Event::RouteError(e.to_errno()));
                }
            }
            Action::Connect => {
                let taken = self
                    .setup_qp(&mut g)
                    .and_then(|()| g.id.take().ok_or(ENOTCONN));
                let r = match taken {
                    Ok(id) => {
                        g.connecting = true;
                        g.nonce = ffi::random_u64();
                        let replaces = g.reconnect.as_ref().and_then(|r| r.replaces);
                        let qps = ffi::queue_pairs();
                        g.lanes = qps - 1;
                        let hello = hello(wire::VERSION, qps, g.nonce, replaces).encode();
                        // Without the lock: operations and requests
                        // meanwhile see `Connecting` (EAGAIN, or a wait),
                        // not a blocked mutex.
                        drop(g);
                        let r = id.connect_locked(h, &hello);
                        g = self.inner.lock();
                        g.id = Some(id);
                        g.connecting = false;
                        self.cv.notify_all();
                        r
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = r {
                    action = Self::advance(&mut g, Event::ConnectError(e.to_errno()));
                }
            }
            Action::Ready => {
                ready_listener = g.listener.take();
                let nonce = g.nonce;
                if let Some(r) = g.reconnect.as_mut() {
                    // The connection the next attempt replaces.
                    r.replaces = Some(nonce);
                }
                self.keepalive_start(&mut g);
                self.reconnected(&mut g);
                if self.active {
                    self.open_lanes(&mut g);
                }
            }
            Action::Teardown | Action::None | Action::Backoff | Action::Reconnect => {}
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
            return Self::teardown(self, Some(h));
        }
        self.schedule_teardown();
        0
    }

    /// Queues the teardown on the module's work queue (from a handler or a
    /// completion, where it cannot run).
    fn schedule_teardown(self: &Arc<Self>) {
        let wq = ffi::wq();
        // Counted for the storm guard until the work has run.
        let tearing = &self.shared.reconnect.tearing;
        tearing.fetch_add(1, Ordering::Relaxed);
        // Asked for once per queue pair (the state machine says so), and
        // the next is asked for only after this one ran: the work cannot be
        // queued already. Were it, the run already queued counts for both.
        if wq.enqueue::<Arc<Conn>, 0>(self.clone()).is_err() {
            tearing.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Ends the connection because of `ev` (a failed completion, a broken
    /// protocol), from any context: the teardown runs on the work queue.
    fn fail(self: &Arc<Self>, ev: Event, why: &str, e: Errno) {
        self.fail_with(ev, || {
            pr_warn!(
                "connection {} closing: {} (errno {})\n",
                self.serial,
                why,
                e.get()
            )
        });
    }

    /// As [`Self::fail`], with the ratelimited log line `log` prints.
    /// Returns whether this ended the connection (it had not ended yet).
    fn fail_with(self: &Arc<Self>, ev: Event, log: impl FnOnce()) -> bool {
        self.end(ev, || {
            if crate::ffi::ratelimit() {
                log();
            }
        })
    }

    /// Ends the connection because of `ev` unless it has ended already:
    /// runs `before` (a log line), then schedules the teardown. Returns
    /// whether this ended it.
    fn end(self: &Arc<Self>, ev: Event, before: impl FnOnce()) -> bool {
        let action = Self::advance(&mut self.inner.lock(), ev);
        self.cv.notify_all();
        if action != Action::Teardown {
            return false;
        }
        before();
        self.schedule_teardown();
        true
    }

    /// A work request of kind `wr` failed with work completion status
    /// `wc_status`: the connection ends. A flush ends it only while it is
    /// still connected (see [`Self::flushed`]).
    pub(crate) fn wc_failed(self: &Arc<Self>, wc_status: c_int, wr: Wr) {
        let status = wc_status as u32;
        match ops::wc_errno(status) {
            Some(e) if e == ECANCELED => self.flushed(wr),
            Some(e) => {
                self.fail_with(Event::QpFatal, || {
                    pr_warn!(
                        "connection {} closing: {} failed: {} (errno {})\n",
                        self.serial,
                        wr.name(),
                        ops::wc_status_name(status),
                        e.get()
                    )
                });
            }
            None => {}
        }
    }

    /// A work request of kind `wr` completed flushed. While the connection
    /// is up, or accepted and not yet established, the provider moved its
    /// queue pair to the error state before a failed completion or a CM
    /// event said so (rxe reports a failure its requester finds only as
    /// flushes, and a responder's, such as a peer's Write with a bad key,
    /// only so; a peer's disconnect flushes before its CM event arrives):
    /// end it now, so that new operations get `EAGAIN` or the close errno
    /// instead of being posted and flushed in turn until keepalive
    /// notices. While connecting, it ends at establishment unless the CM
    /// reports why first (`abi::conn::step_gated`). In any other state it
    /// is the teardown's flush. A flushed receive is not logged: a peer
    /// that disconnects flushes the posted receives, and a disconnect is
    /// not an error.
    pub(crate) fn flushed(self: &Arc<Self>, wr: Wr) {
        if wr == Wr::Receive {
            // Not even a ratelimit token: a disconnect is not an error.
            self.end(Event::Flushed, || {});
            return;
        }
        self.fail_with(Event::Flushed, || {
            pr_warn!(
                "connection {} closing: {} was flushed: its queue pair is in the \
                 error state (errno {})\n",
                self.serial,
                wr.name(),
                ECONNRESET.get()
            )
        });
    }

    /// Ends the connection because of `ev` and returns once it is torn
    /// down (process context, no lock held). If a teardown is already under
    /// way (device removal, a concurrent close, the work queue), waits for
    /// it: callers rely on the connection's resources being gone. That wait
    /// is bounded by a drain and is not interruptible, like `flush_work()`.
    /// A connection that reconnects is torn down to `Waiting` by a failure
    /// (its queue pair and registrations are gone), and for good by a user
    /// close, which also ends the reconnect.
    pub(crate) fn destroy(this: &Arc<Self>, ev: Event) {
        ffi::assert_unlocked(b"connection destroyed\0");
        loop {
            let action = Self::advance(&mut this.inner.lock(), ev);
            if action == Action::Teardown {
                Self::teardown(this, None);
            }
            let mut g = this.inner.lock();
            loop {
                match g.state {
                    State::Closed { .. } => return,
                    // A reconnect's teardown ran: close again, for good.
                    State::Waiting { .. } if ev == Event::UserClose => break,
                    State::Waiting { .. } => return,
                    _ => this.cv.wait(&mut g),
                }
            }
        }
    }

    /// The teardown, asked for by the state machine (the state is
    /// `Closing`): disconnects, drains and destroys the queue pair (every
    /// operation in flight completes, with an error), frees registrations,
    /// leaves the device, destroys the id (or hands it to the CM when run
    /// in its handler `in_handler`: device removal, a refused request),
    /// leaves the file. Returns what the handler must return to the CM.
    fn teardown(this: &Arc<Self>, in_handler: Option<&InHandler>) -> c_int {
        ffi::assert_unlocked(b"connection torn down\0");
        // The connection's own id, then its lanes'.
        let mut ids: [Option<CmId<Conn>>; wire::QPS_MAX as usize] = core::array::from_fn(|_| None);
        let (res, listener, device) = {
            let mut g = this.inner.lock();
            // Not in a handler of the id (the handler mutex keeps those
            // apart): bounded by the provider's connect.
            while g.connecting {
                this.cv.wait(&mut g);
            }
            for (id, path) in ids.iter_mut().zip(g.paths.iter_mut()).skip(1) {
                *id = path.lane.take();
                if core::mem::take(&mut path.up) {
                    this.shared.work.lane_down();
                }
            }
            ids[0] = g.id.take();
            (g.res.take(), g.listener.take(), g.device.take())
        };
        // Waiters (imports, revokes, synchronous operations) see the end.
        this.cv.notify_all();
        // The state has left `Connected`, `Waiting` and the attempt: no run
        // arms the timer again.
        this.timer.cancel();
        drop(listener);
        for id in ids.iter_mut().flatten() {
            if in_handler.is_none() {
                id.disconnect();
            }
            // Drained and destroyed: no completion callback runs any more.
            id.destroy_qp();
        }
        this.flush_ops();
        // The paths' registrations, one path at a time outside the lock;
        // the lanes' paths go with them.
        this.drop_paths();
        if let Some(res) = res {
            let Resources { grants, pd, .. } = res;
            // Registrations before their domain.
            drop(grants);
            drop(pd);
        }
        if let Some(device) = device {
            device.remove_conn(this);
        }
        // The id whose handler runs this (device removal, a refused
        // request) goes back to the CM; the others are destroyed.
        let mut handed = 0;
        for id in ids.into_iter().flatten() {
            match in_handler {
                Some(h) if id.is_handled_by(h) => handed = id.into_cm(h),
                _ => drop(id),
            }
        }
        // Only the last teardown leaves the file (a close cannot turn a
        // reconnect's into the last: it waits for `Waiting` and closes
        // again).
        let retry = this.inner.lock().state.is_waiting();
        if !retry {
            this.shared.unregister(this);
        }
        let mut g = this.inner.lock();
        // Armed under the lock with the state change: a close that follows
        // cancels it.
        match Self::advance(&mut g, Event::TornDown) {
            Action::Backoff => this.backoff(&mut g),
            _ => this.gave_up(&g),
        }
        drop(g);
        this.cv.notify_all();
        handed
    }
}
