// SPDX-License-Identifier: GPL-2.0

//! Connections: an RC queue pair over rdma_cm between two rrdma kernels,
//! with data lanes (more queue pairs for operations) beside it.
//!
//! One concern per file:
//! - this file: the connection's state and the state gate
//!   ([`Conn::advance`], the only place the state changes, through the
//!   pure machine `abi::conn`);
//! - `events.rs`: the rdma_cm events of the connection's own id;
//! - `teardown.rs`: how a connection ends (failures, close, the teardown);
//! - `setup.rs`: connect, a listener's connect request, the resources;
//! - `ctrl/`: the control channel (request slots, sending, dispatch; its
//!   state in `ctrl/channel.rs`);
//! - `grants.rs`: the exporter side (registrations granted to the peer,
//!   revocation);
//! - `imports.rs`: the importer side (imports, revocations received), and
//!   `uses.rs`, what an import shares with its operations without the lock;
//! - `data/`: block operations (posting, operation slots, fences,
//!   completions), one data path per queue pair, one concern a file;
//! - `lanes.rs`: data lanes (their handshake, events and failures);
//! - `lanes_open.rs`: when they open (either side's first operation);
//! - `keepalive.rs`: pings, and the end of a connection whose peer went
//!   silent;
//! - `reconnect.rs`: backoff, attempts and restored imports of a connection
//!   that reconnects;
//! - `status.rs`: what `RRDMA_IOCTL_STATUS` shows of it.
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

use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar};
use kernel::workqueue::{new_work, Work};

use crate::abi::Result;
use crate::abi::{
    conn::{step_gated, Action, Event, State},
    errno::{Errno, EAGAIN, ENOTCONN},
    keepalive::Settings,
    wire,
};
use crate::cm_id::CmId;
use crate::device::DeviceCtx;
use crate::ffi::ShimAddr;
use crate::listener::Listener;
use crate::noio::NoIoMutex;
use crate::shared::Shared;
use crate::verbs::Pd;

mod ctrl;
mod data;
mod events;
mod grants;
mod imports;
mod keepalive;
mod lanes;
mod lanes_open;
mod reconnect;
mod setup;
mod status;
mod teardown;
mod uses;
mod waits;

pub(crate) use ctrl::CtrlCounts;
pub(crate) use data::{OnPath, OpWork, Posted, ReportTo, RunFence, Waiter};
pub(crate) use imports::Import;
pub(crate) use keepalive::KeepaliveCounts;
pub(crate) use reconnect::{ReconnectCounts, Retry};
pub(crate) use teardown::FailedWr;
use waits::{deadline, wait_until};

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
    /// Work requests an import's operation may take (`limits::import_ops`)
    /// whatever the queue pairs, so a reconnect keeps it: a lane's or more.
    import_budget: u32,
    /// Work requests an operation may take on the own queue pair: fewer on
    /// a small one, where a larger one waits for a lane (`Conn::wait_lane`).
    own_budget: u32,
    /// The own queue pair is small (`limits::queue_sizes_laned`).
    own_small: bool,
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
struct ConnInner {
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
    keepalive: keepalive::Keepalive,
    /// Set on a CONNECT with `RRDMA_CONNECT_RECONNECT`.
    reconnect: Option<reconnect::Reconnect>,
    /// The handler is in `rdma_connect_locked()` with `id` taken out and
    /// this lock released (siw's blocks in a TCP connect, for up to the
    /// SYN retries while the peer is unreachable): the teardown waits for
    /// it before it takes the id.
    connecting: bool,
    /// A work request was flushed while connecting (`abi::conn::step_gated`).
    flushed_early: bool,
    /// Established with lanes granted but not opened yet (on the passive
    /// side, with a peer that takes `Ctrl::LanesWanted`): the first
    /// operation that could take one asks for them (`lanes.rs`).
    lanes_deferred: bool,
    /// The passive side asked for the lanes (`Ctrl::LanesWanted`) before
    /// this side's establishment was handled: they open at it.
    lanes_asked: bool,
    /// An operation's wait for a lane timed out since the establishment:
    /// the next too large for the own queue pair fails at once
    /// (`Conn::wait_lane`).
    lanes_timed_out: bool,
    /// The queue pairs stopped ([`ConnInner::stop_qps`]) since `id`'s was
    /// set up: a lane that connects after that stops too.
    stopped: bool,
}

impl ConnInner {
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

/// Held while a connection's callback or work item runs
/// ([`Conn::scoped`]): the scopes end when it is dropped, the last entered
/// first (fields drop in order).
struct ConnScope {
    _reserves: Option<crate::ffi::AllocScope>,
    _noio: crate::ffi::AllocScope,
}

/// A connection.
#[pin_data]
pub(crate) struct Conn {
    shared: Arc<Shared>,
    /// Identity for export restrictions: unique, never reused (an address
    /// could be a freed connection's).
    serial: u64,
    active: bool,
    /// Guards the connection's state, ids, resources, control channel,
    /// imports and paths. Order: after rdma_cm's handler mutex and
    /// `Listener::inner`; before `Shared::exports`, `Context::devices`,
    /// `DeviceCtx::conns` and a path's lock. Never held across a wait for a
    /// handler, a completion or a work item (checked on a lockdep kernel:
    /// `ffi::assert_unlocked`), nor a user copy. Its holder allocates
    /// without I/O: a disk's `queue_rq` takes it (`noio.rs`).
    #[pin]
    inner: NoIoMutex<ConnInner>,
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
    /// Opens the data lanes once an operation wants one (`lanes.rs`).
    #[pin]
    lanes_work: Work<Conn, 4>,
    /// When a data operation last ended well (jiffies; 0: not since the
    /// last keepalive tick), for keepalive (`keepalive.rs`).
    heard: AtomicU64,
    /// Operations that ended with an error (`status.rs`).
    failed: AtomicU64,
    /// The moving mean of its synchronous operations' completion times, in
    /// ns (0: none yet), which sets how long they poll (`data/wait.rs`).
    sync_mean_ns: AtomicU64,
    /// What the own queue pair takes of one operation, set with its
    /// resources (`Conn::own_takes`; 0: none yet).
    own_fits: AtomicU64,
    /// Keepalive while established; backoff and attempt deadline while
    /// reconnecting.
    timer: crate::timer::Timer,
}

impl Conn {
    fn new(
        shared: Arc<Shared>,
        active: bool,
        state: State,
        timeout_ms: u32,
        keepalive: Option<Settings>,
        reconnect: Option<reconnect::Reconnect>,
    ) -> Result<Arc<Self>> {
        let mut paths = KVec::with_capacity(usize::from(wire::QPS_MAX), GFP_KERNEL)?;
        paths.push(data::Path::new(), GFP_KERNEL)?;
        let path_data = data::path_locks()?;
        let timer = crate::timer::Timer::new()?;
        let this = Arc::pin_init(
            pin_init!(Self {
                shared,
                serial: SERIAL.fetch_add(1, Ordering::Relaxed),
                active,
                inner <- NoIoMutex::new(new_mutex!(ConnInner {
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
                    ctrl: ctrl::Channel::new(),
                    imports: imports::Table::new(),
                    paths,
                    keepalive: keepalive::Keepalive::new(keepalive),
                    reconnect,
                    connecting: false,
                    flushed_early: false,
                    lanes_deferred: false,
                    lanes_asked: false,
                    lanes_timed_out: false,
                    stopped: false,
                }, "Conn::inner")),
                cv <- new_condvar!("Conn::cv"),
                teardown_work <- new_work!("Conn::teardown_work"),
                restore_work <- new_work!("Conn::restore_work"),
                unplug_work <- new_work!("Conn::unplug_work"),
                path_data,
                followups: data::Followups::new(),
                followup_work <- new_work!("Conn::followup_work"),
                lanes_work <- new_work!("Conn::lanes_work"),
                heard: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                sync_mean_ns: AtomicU64::new(0),
                own_fits: AtomicU64::new(0),
                timer,
            }),
            GFP_KERNEL,
        )?;
        if this.shared.backs_disk() {
            this.keep_ctrl_buffers()?;
        }
        Ok(this)
    }

    /// The state gate: feeds `ev` to the state machine, the only place a
    /// connection's state changes, and returns what to do. A failure is
    /// followed by a reconnect while the connection's budget allows.
    fn advance(&self, g: &mut ConnInner, ev: Event) -> Action {
        let retry = g.reconnect.as_ref().is_some_and(|r| r.budget.may_retry());
        let (state, action) = step_gated(g.state, ev, retry, &mut g.flushed_early);
        crate::ffi::trace::conn_state(self.serial, ev, &g.state, &state, action);
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
    pub(crate) fn count(&self, kind: crate::work::Callback) {
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

    /// The address this side connected to (`None`: a connection a
    /// listener accepted, whose peer's port is no listener's).
    pub(crate) fn dialed(&self) -> Option<ShimAddr> {
        self.active.then(|| self.peer())
    }

    /// Reconnects of the connections of its file (or of its disk) that
    /// succeeded.
    pub(crate) fn reconnects(&self) -> u64 {
        self.shared.reconnect.reconnects()
    }

    /// Runs `f`, a callback or work item of the connection, in its
    /// allocation scope: no allocation starts I/O (reclaim's I/O may be a
    /// disk's, waiting for this connection), and a disk's own connection
    /// allocates from the memory reserves without reclaiming: swap may
    /// wait for it to come back with memory exhausted, where reclaim
    /// without I/O frees nothing (a reconnect under that pressure stalled
    /// for minutes). `this`, which may be the last reference, is dropped
    /// inside the scope: what the connection frees is in it too.
    pub(crate) fn scoped<R>(this: Arc<Self>, f: impl FnOnce(&Arc<Self>) -> R) -> R {
        let noio = crate::ffi::AllocScope::noio();
        let scope = ConnScope {
            _reserves: this
                .shared
                .backs_disk()
                .then(crate::ffi::AllocScope::reserves),
            _noio: noio,
        };
        let r = f(&this);
        drop(this);
        drop(scope);
        r
    }

    /// How the connection looks to an operator.
    pub(crate) fn link(&self) -> crate::abi::conn::Link {
        let g = self.inner.lock();
        g.state.link(g.was_established())
    }

    /// Whether the connection has ended (closing or closed).
    pub(crate) fn is_finished(&self) -> bool {
        self.inner.lock().state.is_finished()
    }
}
