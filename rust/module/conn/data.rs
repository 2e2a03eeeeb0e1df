// SPDX-License-Identifier: GPL-2.0

//! Block operations on a connection: posting, operation slots, completions.
//!
//! An operation is cut into work requests that never cross a registration
//! chunk on either side (`abi::ops::segments`), preceded by registrations
//! of the local chunks it is the first to touch. On iWARP, each READ gets
//! a sink of its own, registered with remote write access (the rule RNICs
//! enforce) for exactly its bytes and invalidated by the READ itself, and
//! a write ends with a one-byte READ fence into such a sink
//! (`abi::ops::op_wrs`), or, within one `SUBMIT` batch, one fence after
//! the batch's last write (`BatchFence`); outside a batch, a write posted
//! while a fence is in flight joins the queue pair's open group, whose
//! one fence the next fence completion posts (`OpenGroup`, group commit:
//! at depth, about one fence per round trip), and so do the writes of an
//! io_uring submission of several commands, whose plug's end posts the
//! fence when none is in flight (`Conn::plugged`, `Conn::unplugged`: one
//! fence per submission). Only the last work request is
//! signaled, and it carries the operation's slot; a write of a batch is
//! not signaled at all (its fence's completion completes it, one
//! completion for the batch) but carries its slot for an error's. The
//! context of an operation lives in its slot and its work requests are
//! built in a scratch array, both of its queue pair's path (`PathData`:
//! the connection's own queue pair or a data lane, each with its own
//! slots, sinks and registrations, under a lock of its own), allocated
//! with the path. An operation goes on the submitting CPU's path
//! (`Inner::pick_path`) and is planned and posted under one acquisition
//! of the connection's lock and one of its path's, and so is each run of a
//! `SUBMIT`'s operations on one connection (one path), its fence's
//! reservation and post included (`Conn::post_ops`); only one that is the
//! first to touch a chunk has its registration allocated outside the
//! locks first (`Prep`), which are released around it.
//! Posting is all or nothing: everything an operation needs (its slot,
//! its work requests, its send-queue room, new registrations) is found or
//! allocated first, and a registration enters its path's cache only
//! once its work request is posted, so a refused operation (`EAGAIN`,
//! `E2BIG`, `ENOMEM`) leaves nothing behind.
//!
//! Completions come in batches, one per poll of a queue pair's send CQ
//! (`Conn::slots_done`): the operations of a batch end under one
//! acquisition of their path's lock (a softirq-safe spinlock), not the
//! connection's, so a completion needs nothing that sleeps and no lock a
//! submitter holds long. What does need the connection's lock (a failed
//! write fence's failure, pruning a destroyed region's registrations,
//! acknowledging a revoke once its import is idle, waking a task that
//! waits for send-queue room) is left to the connection's follow-up work
//! (`Followups`). A failed operation ends the connection before it is
//! reported, outside the path's lock: failed completions come only in
//! process context. The file's readers are woken once per batch.
//!
//! Exactly once: a completion takes its slot's operation; a second
//! completion of the same slot (siw's flush path can complete a READ
//! twice) finds nothing. What the provider never completes, the teardown
//! completes, once, after the queue pair is destroyed.

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::{new_condvar, Arc, CondVar};
use kernel::workqueue::{impl_has_work, WorkItem};

use super::imports::Uses;
use super::{ctrl, wait_until, Conn, Import};
use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, E2BIG, ECONNRESET, ENOMEM, ENOTCONN},
    limits,
    ops::{self, Checked, Dir},
    uapi::Completion,
    wire,
};
use crate::cm_id::CmId;
use crate::compat::{new_bh_lock, BhGuard, BhLock};
use crate::ffi::{self, ShimWr};
use crate::foreign;
use crate::mr::{Chunks, Mr};
use crate::region::Region;
use crate::verbs::QpRef;
use crate::work::Work;

/// Most operation slots of a connection (its queue pair may have fewer:
/// `abi::limits::queue_sizes`).
const SLOTS_MAX: u32 = limits::OPS_MAX;

/// Most work requests one operation takes: its plan fits in the send
/// queue's operation entries (`Slots::op_budget`).
pub(super) const WRS_MAX: usize = SLOTS_MAX as usize;

/// Most READ sinks of a queue pair (iWARP): each is an MR of a chunk's
/// pages (~7 KiB on siw), and a peer's ORD bounds the READs in flight
/// anyway (siw's is at most 128).
pub(super) const SINKS_MAX: u32 = 32;

/// Most local chunks one operation can touch (each needs a work request).
const CHUNKS_MAX: usize = SLOTS_MAX as usize;

/// An operation in flight.
struct OpCtx {
    /// Its region's key in its path's registration cache (0: none, a
    /// fence): the cache entry keeps the region and its registrations
    /// while the operation is in flight, so that ending one never frees
    /// them (which cannot be done in softirq).
    reg: usize,
    /// The in-flight count of its import (a fence's: its last write's,
    /// once posted).
    uses: Option<Arc<Uses>>,
    user_data: u64,
    opcode: u32,
    wrs: u32,
    bytes: u64,
    sync: Option<Arc<SyncWait>>,
    /// The io_uring command it completes, if it came from one.
    uring: Option<ffi::UringCmd>,
    /// The first of the READ and fence sinks it holds (iWARP), chained
    /// through [`Slots::sink_next`]; [`NO_SINK`] if none. Free again once
    /// it completes.
    sinks: u32,
    /// A write posted unsignaled without its own fence: the id of its
    /// batch's fence, whose completion completes it (a completion of its
    /// own comes only with an error).
    batch: Option<u64>,
    /// Whether its completion is a write fence's (a write with its own
    /// fence, or a posted batch fence): one fewer in flight.
    fenced: bool,
    /// What the operation is.
    kind: Kind,
}

/// The end of a chain of sinks.
const NO_SINK: u32 = u32::MAX;

impl OpCtx {
    /// The record of its end with `status`, for the file's ring.
    fn completion(&self, status: i32) -> Completion {
        Completion {
            user_data: self.user_data,
            status,
            opcode: self.opcode,
            bytes: if status == 0 { self.bytes } else { 0 },
        }
    }

    /// Reports its end with `status` to its synchronous caller or its
    /// io_uring command (counted in `work` if its IOPOLL poller took it);
    /// otherwise returns the record for the file's ring.
    fn finish(&mut self, status: i32, work: &Work) -> Option<Completion> {
        if let Some(s) = self.sync.take() {
            s.set(status);
        } else if let Some(u) = self.uring.take() {
            if u.complete(self.uring_res(status)) {
                work.uring_polled();
            }
        } else {
            return Some(self.completion(status));
        }
        None
    }

    /// The `res` of its io_uring CQE with `status`: the bytes moved, or
    /// the negative errno.
    fn uring_res(&self, status: i32) -> i32 {
        if status == 0 {
            i32::try_from(self.bytes).unwrap_or(i32::MAX)
        } else {
            status
        }
    }
}

/// Kinds of [`OpCtx`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An operation of userspace.
    User,
    /// A batch's write fence (see [`BatchFence`]), not reported itself.
    /// `id` tells it from any later occupant of its slot; `posted` whether
    /// its work requests went out.
    Fence { id: u64, posted: bool },
}

/// The write fence of one `SUBMIT` batch on an iWARP connection: the
/// batch's writes go without a fence of their own, and one fence after the
/// last of them completes them all (`Conn::post_ops`). Its slot, send-queue
/// entries and fence sink are reserved up front, so that the fence can
/// always follow the writes.
struct BatchFence {
    slot: u32,
    id: u64,
    /// The last write posted without a fence: its import's count, the
    /// remote address of its last byte and that byte's key.
    last: Option<(Arc<Uses>, u64, u32)>,
}

/// The open group of a queue pair (iWARP): while a write fence is in
/// flight, writes posted outside a `SUBMIT` batch (io_uring commands,
/// single operations) go unsignaled and share the group's fence, which the
/// next fence completion posts after them (group commit). The writes of an
/// io_uring submission of several commands join it too, fence in flight or
/// not: the end of the submission (its plug) posts the fence if none is in
/// flight. A write with no fence in flight and no plug has its own, so a
/// lone write waits for one round trip.
struct OpenGroup {
    /// The group fence's slot, reserved with its send entries and sink.
    slot: u32,
    id: u64,
    /// The last write of the group: its import's count, the remote
    /// address of its last byte and that byte's key.
    last: Option<(Arc<Uses>, u64, u32)>,
}

impl_has_work! {
    impl HasWork<Self, 2> for Conn { self.unplug_work }
}

/// An io_uring submission's plug closed where nothing may sleep
/// ([`Conn::unplugged`]): its group's fence is posted here.
impl WorkItem<2> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        this.post_deferred();
    }
}

/// Ids of batch fences.
static FENCE_IDS: AtomicU64 = AtomicU64::new(1);

/// Operation slots (one completion context each in the shim) and the send
/// queue's room, for the queue pair's `depth` operation entries.
/// Preallocated for [`SLOTS_MAX`] with the operations' contexts in place:
/// posting and completing an operation never allocate.
pub(super) struct Slots {
    ops: KVec<Option<OpCtx>>,
    free: KVec<u32>,
    /// Operation entries of the current queue pair (0 without one); the
    /// slots below it are the ones the shim has completion contexts for.
    depth: u32,
    sq_free: u32,
    /// The queue pair's READ sinks no operation holds (iWARP).
    sinks_free: KVec<u32>,
    /// The queue pair's READ sinks (indices below it; the fence sinks'
    /// follow).
    sinks: u32,
    /// The queue pair's fence sinks no operation holds (iWARP).
    fences_free: KVec<u32>,
    /// The queue pair's fence sinks (indices from `sinks`).
    fences: u32,
    /// Whether the free lists hold the queue pair's sinks: they are
    /// allocated at its first operation ([`Conn::ready_sinks`]), so until
    /// then an iWARP queue pair's lists are empty. True without sinks.
    sinks_ready: bool,
    /// Per sink, the next sink its operation holds ([`NO_SINK`]: none).
    sink_next: KVec<u32>,
    /// Write fences posted and not yet completed (iWARP).
    fences_posted: u32,
    /// Writes waiting for the next fence completion to post their fence.
    open: Option<OpenGroup>,
}

impl Slots {
    pub(super) fn new() -> Result<Self> {
        let mut ops = KVec::with_capacity(SLOTS_MAX as usize, GFP_KERNEL)?;
        for _ in 0..SLOTS_MAX {
            ops.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            ops,
            free: KVec::with_capacity(SLOTS_MAX as usize, GFP_KERNEL)?,
            depth: 0,
            sq_free: 0,
            sinks_free: KVec::with_capacity(SINKS_MAX as usize, GFP_KERNEL)?,
            sinks: 0,
            fences_free: KVec::with_capacity(SLOTS_MAX as usize / 2, GFP_KERNEL)?,
            fences: 0,
            sinks_ready: true,
            sink_next: {
                let n = (SINKS_MAX + SLOTS_MAX / 2) as usize;
                let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
                for _ in 0..n {
                    v.push(NO_SINK, GFP_KERNEL)?;
                }
                v
            },
            fences_posted: 0,
            open: None,
        })
    }

    /// A new queue pair with `depth` operation entries (at most
    /// [`SLOTS_MAX`]), `sinks` READ sinks (at most [`SINKS_MAX`]) and
    /// `fences` fence sinks (at most half of [`SLOTS_MAX`]), or none (0),
    /// not allocated yet ([`Self::fill_sinks`] once they are). Every slot
    /// is empty: nothing was posted yet, or the teardown flushed it.
    pub(super) fn reset(&mut self, depth: u32, sinks: u32, fences: u32) {
        let depth = depth.min(SLOTS_MAX);
        while crate::compat::vec_pop(&mut self.free).is_some() {}
        for i in (0..depth).rev() {
            // Within capacity: cannot fail.
            let _ = self.free.push(i, GFP_KERNEL);
        }
        while crate::compat::vec_pop(&mut self.sinks_free).is_some() {}
        while crate::compat::vec_pop(&mut self.fences_free).is_some() {}
        self.sinks = sinks.min(SINKS_MAX);
        self.fences = fences.min(SLOTS_MAX / 2);
        self.sinks_ready = self.sinks == 0 && self.fences == 0;
        self.depth = depth;
        self.sq_free = depth;
        self.fences_posted = 0;
        self.open = None;
    }

    /// The queue pair's sinks are allocated: every one is free.
    fn fill_sinks(&mut self) {
        if self.sinks_ready {
            return;
        }
        for i in (0..self.sinks).rev() {
            // Within capacity: cannot fail.
            let _ = self.sinks_free.push(i, GFP_KERNEL);
        }
        for i in (0..self.fences).rev() {
            // Within capacity: cannot fail.
            let _ = self.fences_free.push(self.sinks + i, GFP_KERNEL);
        }
        self.sinks_ready = true;
    }

    /// The work requests one operation may take (`abi::ops::max_wrs`'s
    /// budget): the operation entries, and on iWARP no more than two per
    /// READ sink (a READ segment takes two and a sink).
    pub(super) fn op_budget(&self) -> u32 {
        if self.sinks > 0 {
            self.depth.min(2 * self.sinks)
        } else {
            self.depth
        }
    }

    /// Takes the operation in `slot` (once) and frees the slot and its
    /// sinks.
    fn take(&mut self, slot: u32) -> Option<OpCtx> {
        let op = self.ops.get_mut(slot as usize)?.take()?;
        // Within capacity: every slot fits.
        let _ = self.free.push(slot, GFP_KERNEL);
        self.sq_free += op.wrs;
        self.put_sinks(op.sinks);
        if op.fenced {
            self.fences_posted = self.fences_posted.saturating_sub(1);
        }
        if let Kind::Fence { id, .. } = op.kind {
            if self.open.as_ref().is_some_and(|o| o.id == id) {
                // Flushed before it was posted.
                self.open = None;
            }
        }
        Some(op)
    }

    /// Reserves a slot, its two send entries and a fence sink for write
    /// fence `id` (`None`: no room).
    fn reserve_fence(&mut self, id: u64) -> Option<u32> {
        if self.sq_free < 2 || self.fences_free.is_empty() {
            return None;
        }
        let slot = crate::compat::vec_pop(&mut self.free)?;
        let sinks = self.hold_sink(true, NO_SINK);
        self.sq_free -= 2;
        self.ops[slot as usize] = Some(OpCtx {
            reg: 0,
            uses: None,
            user_data: 0,
            opcode: 0,
            wrs: 2,
            bytes: 0,
            sync: None,
            uring: None,
            sinks,
            batch: None,
            fenced: false,
            kind: Kind::Fence { id, posted: false },
        });
        Some(slot)
    }

    /// Takes one free sink (a fence sink if `fence`, else a READ sink) and
    /// chains it before `head`; returns the new head (`head` if none is
    /// free: the plan checked there were enough).
    fn hold_sink(&mut self, fence: bool, head: u32) -> u32 {
        let list = if fence {
            &mut self.fences_free
        } else {
            &mut self.sinks_free
        };
        let Some(k) = crate::compat::vec_pop(list) else {
            return head;
        };
        if let Some(n) = self.sink_next.get_mut(k as usize) {
            *n = head;
        }
        k
    }

    /// Takes every write of batch fence `id` still in flight and hands it
    /// to `f` (one pass over the slots: a write that failed on its own was
    /// taken then, and its slot may hold another operation now).
    fn take_members(&mut self, id: u64, mut f: impl FnMut(OpCtx)) {
        for s in 0..self.depth {
            if matches!(self.ops.get(s as usize), Some(Some(op)) if op.batch == Some(id)) {
                if let Some(op) = self.take(s) {
                    f(op);
                }
            }
        }
    }

    /// Whether `slot` holds batch fence `id`, not yet posted.
    fn holds_fence(&self, slot: u32, id: u64) -> bool {
        matches!(
            self.ops.get(slot as usize),
            Some(Some(op)) if op.kind == Kind::Fence { id, posted: false }
        )
    }

    /// Frees the READ and fence sinks of the chain from `head`.
    fn put_sinks(&mut self, mut head: u32) {
        while let Some(&next) = self.sink_next.get(head as usize) {
            // Within capacity: every sink fits.
            let _ = if head < self.sinks {
                self.sinks_free.push(head, GFP_KERNEL)
            } else {
                self.fences_free.push(head, GFP_KERNEL)
            };
            head = next;
        }
    }
}

/// A local region's registrations on this connection.
/// Field order is drop order: the registrations go before the region
/// reference, which may be the last one keeping the pages.
struct LocalReg {
    chunks: Chunks,
    region: Arc<Region>,
    /// Operations in flight that use it.
    inflight: u32,
}

/// The local registrations of a connection, by region address (stable and
/// unique while the entry holds the region).
pub(super) struct LocalRegs {
    tree: RBTree<usize, LocalReg>,
}

impl LocalRegs {
    pub(super) fn new() -> Self {
        Self {
            tree: RBTree::new(),
        }
    }
}

/// A path of a connection: path 0 is the connection's own queue pair,
/// the others are its data lanes (`lanes.rs`), under the connection's
/// lock. Its data state is under a lock of its own ([`PathData`]).
pub(super) struct Path {
    /// A lane's id with its queue pair (`None` for path 0, whose are the
    /// connection's, and for a lane being torn down).
    pub(super) lane: Option<CmId<Conn>>,
    /// A lane's connection is established: operations may use it (path
    /// 0 goes with its connection's state).
    pub(super) up: bool,
    /// A lane's failure is its connection's: accepted (passive side) or
    /// established (active side).
    pub(super) joined: bool,
}

impl Path {
    /// A path without a queue pair yet.
    pub(super) fn new() -> Self {
        Self {
            lane: None,
            up: false,
            joined: false,
        }
    }
}

/// The data state of one path: its operation slots, work-request scratch
/// and local registrations. A registration's work request orders only the
/// requests of its own queue pair after it, so a registration made on one
/// path is not used on another. Under the path's lock ([`PathLock`]),
/// which posting takes under the connection's and a completion alone.
pub(super) struct PathData {
    slots: Slots,
    /// Where an operation's work requests are built, under the path's
    /// lock (room for [`WRS_MAX`]: posting allocates nothing).
    wr_scratch: ffi::WrScratch,
    local: LocalRegs,
}

impl PathData {
    fn new() -> Result<KBox<Self>> {
        Ok(KBox::new(
            Self {
                slots: Slots::new()?,
                wr_scratch: ffi::WrScratch::new(WRS_MAX)?,
                local: LocalRegs::new(),
            },
            GFP_KERNEL,
        )?)
    }
}

/// The lock of a path's data state (softirq-safe: completions take it where
/// the send CQ is polled); `None` until the path's first queue pair and
/// after the teardown dropped a lane's.
pub(super) type PathLock = BhLock<Option<KBox<PathData>>>;

/// The locks of a connection's paths, one for each queue pair it may have
/// ([`wire::QPS_MAX`]), path 0's with its data state.
pub(super) fn path_locks() -> Result<KVec<Pin<KBox<PathLock>>>> {
    let n = usize::from(wire::QPS_MAX);
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    for p in 0..n {
        let d = if p == 0 { Some(PathData::new()?) } else { None };
        v.push(
            KBox::pin_init(new_bh_lock!(d, "Conn::paths"), GFP_KERNEL)?,
            GFP_KERNEL,
        )?;
    }
    Ok(v)
}

impl super::Inner {
    /// The path an operation submitted now takes: the submitting CPU's,
    /// if that lane is up, else the connection's own queue pair.
    pub(super) fn pick_path(&self) -> usize {
        let n = self.paths.len();
        if n <= 1 {
            return 0;
        }
        let p = ffi::this_cpu() as usize % n;
        if self.paths.get(p).is_some_and(|x| x.up) {
            p
        } else {
            0
        }
    }
}

/// Path `p`'s queue pair: the connection's own (`conn_id`'s) for path 0,
/// else its lane's (`lane`).
fn path_qp<'a>(
    p: usize,
    conn_id: &'a Option<CmId<Conn>>,
    lane: &'a Option<CmId<Conn>>,
) -> Option<&'a crate::verbs::Qp> {
    let id = if p == 0 { conn_id } else { lane };
    id.as_ref().and_then(|id| id.qp())
}

fn key(region: &Arc<Region>) -> usize {
    foreign::addr_of(region) as usize
}

/// An operation on the region of key `k` ended: whether that was the last
/// use of a destroyed region's registrations (to prune in process
/// context, outside the path's lock).
fn local_done(local: &mut LocalRegs, k: usize) -> bool {
    match local.tree.get_mut(&k) {
        Some(r) => {
            r.inflight = r.inflight.saturating_sub(1);
            r.inflight == 0 && r.region.is_destroyed()
        }
        None => false,
    }
}

/// Where an operation's end is reported: the file's completion ring
/// (`user_data`, `opcode`), a synchronous caller (`sync`) or an io_uring
/// command (`uring`). The posted operation takes `sync` and `uring`.
pub(crate) struct ReportTo {
    pub(crate) user_data: u64,
    pub(crate) opcode: u32,
    pub(crate) sync: Option<Arc<SyncWait>>,
    pub(crate) uring: Option<ffi::UringCmd>,
}

/// Where a synchronous operation's status lands.
#[pin_data]
pub(crate) struct SyncWait {
    /// Set where the operation completes (softirq-safe).
    #[pin]
    status: BhLock<Option<i32>>,
    #[pin]
    cv: CondVar,
}

impl SyncWait {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                status <- new_bh_lock!(None, "SyncWait::status"),
                cv <- new_condvar!("SyncWait::cv"),
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    fn set(&self, status: i32) {
        *self.status.lock() = Some(status);
        self.cv.notify_all();
    }
}

/// What an operation needs, as seen under the lock before allocating.
struct Plan {
    lshift: u32,
    /// First local chunk the operation touches.
    first: u64,
    /// Local chunks touched.
    nchunks: usize,
    /// Bit `i`: chunk `first + i` has no registration yet.
    missing: [u64; CHUNKS_MAX / 64],
    nmissing: u64,
    have_reg: bool,
    /// Work requests the operation needs.
    wrs: u32,
    /// READ sinks it needs (iWARP).
    sinks: u32,
    /// Whether it ends with a fence (a write on iWARP), which needs a
    /// fence sink.
    fence: bool,
    /// A write on iWARP that leaves its fence to its batch's.
    unfenced: bool,
    iwarp: bool,
}

impl Plan {
    fn is_missing(&self, i: usize) -> bool {
        self.missing[i / 64] & (1 << (i % 64)) != 0
    }
}

/// How posting went.
pub(crate) enum Posted {
    /// Posted; its completion will come.
    Yes,
    /// No room now (send queue or slots); nothing was done.
    Full,
}

impl Plan {
    /// Checks an operation against the connection (under its lock) and
    /// its path's data state `path` (under the path's), and plans what it
    /// needs.
    fn new(
        g: &super::Inner,
        path: &PathData,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        batched: bool,
    ) -> Result<Plan, Errno> {
        if !g.state.is_connected() {
            return Err(g.errno());
        }
        g.imports.check(import.entry())?;
        let res = g.res.as_ref().ok_or(ENOTCONN)?;
        let lshift = res.chunk_shift;
        let first = c.local_off >> lshift;
        let last = (c.local_off + c.len - 1) >> lshift;
        let nchunks = (last - first + 1) as usize;
        if nchunks > CHUNKS_MAX {
            return Err(E2BIG);
        }
        let reg = path.local.tree.get(&key(region));
        let mut missing = [0u64; CHUNKS_MAX / 64];
        let mut nmissing = 0;
        for i in 0..nchunks {
            let c = (first + i as u64) as usize;
            if reg.map_or(true, |r| r.chunks.get(c).is_none()) {
                missing[i / 64] |= 1 << (i % 64);
                nmissing += 1;
            }
        }
        let nseg = ops::segments(c, lshift, import.chunk_shift).count() as u64;
        // A write of a batch leaves its fence to the batch's (2 requests).
        let unfenced = batched && c.dir == Dir::Write && res.iwarp;
        let wrs = ops::op_wrs(c.dir, nseg, nmissing, res.iwarp) - if unfenced { 2 } else { 0 };
        let sinks = ops::op_sinks(c.dir, nseg, res.iwarp);
        if wrs > u64::from(path.slots.op_budget()) || sinks > u64::from(path.slots.sinks) {
            // `check_op` refuses operations above the import's limit.
            return Err(E2BIG);
        }
        Ok(Plan {
            lshift,
            first,
            nchunks,
            missing,
            nmissing,
            have_reg: reg.is_some(),
            wrs: wrs as u32,
            sinks: sinks as u32,
            fence: c.dir == Dir::Write && res.iwarp && !unfenced,
            unfenced,
            iwarp: res.iwarp,
        })
    }

    /// Whether it can be posted with what `prep` allocated.
    fn covered_by(&self, prep: &Prep, pd: &Arc<crate::verbs::Pd>) -> bool {
        if self.nmissing == 0 && self.have_reg {
            return true;
        }
        prep.pd.as_ref().is_some_and(|p| Arc::ptr_eq(p, pd))
            && (self.have_reg || prep.node.is_some())
            && (0..self.nchunks).filter(|&i| self.is_missing(i)).all(|i| {
                prep.mrs
                    .iter()
                    .any(|m| m.0 == (self.first + i as u64) as usize)
            })
    }
}

/// What an operation that is the first to touch a chunk needs allocated
/// outside the connection's lock: the missing registrations (with the
/// index of their work request once built) and the region's cache entry.
/// Registrations that end up unused are freed after the lock (`spare`).
#[derive(Default)]
struct Prep {
    pd: Option<Arc<crate::verbs::Pd>>,
    mrs: KVec<(usize, Mr, u32)>,
    node: Option<(RBTreeNodeReservation<usize, LocalReg>, Chunks)>,
    spare: KVec<Mr>,
}

impl Prep {
    fn new(plan: &Plan, pd: Arc<crate::verbs::Pd>, region: &Arc<Region>) -> Result<Self, Errno> {
        let mut mrs = KVec::new();
        for i in (0..plan.nchunks).filter(|&i| plan.is_missing(i)) {
            let chunk = plan.first + i as u64;
            let mr = Mr::new(&pd, region, chunk, plan.lshift).map_err(|_| ENOMEM)?;
            mrs.push((chunk as usize, mr, u32::MAX), GFP_KERNEL)
                .map_err(|_| ENOMEM)?;
        }
        let node = if plan.have_reg {
            None
        } else {
            Some((
                RBTreeNodeReservation::new(GFP_KERNEL).map_err(|_| ENOMEM)?,
                Chunks::new(region.geometry().bytes(), plan.lshift).map_err(|_| ENOMEM)?,
            ))
        };
        let spare = KVec::with_capacity(mrs.len(), GFP_KERNEL).map_err(|_| ENOMEM)?;
        Ok(Self {
            pd: Some(pd),
            mrs,
            node,
            spare,
        })
    }
}

/// How one attempt to post went.
enum Attempt {
    Done(Posted),
    /// It needs registrations allocated outside the lock first.
    Prepare(Plan, Arc<crate::verbs::Pd>),
    /// It needs the queue pair's sinks allocated outside the lock first
    /// ([`Conn::ready_sinks`]).
    Sinks,
    /// The connection's cache changed under it: try again.
    Again,
    /// The queue pair refused the work requests: the connection fails
    /// (outside the lock), and the operation, never posted whole, is
    /// dropped after it.
    Failed(Errno, Option<OpCtx>),
}

/// How [`Conn::end_slot`] left an operation's end.
enum Ended {
    /// Done under the path's lock: the record for the file's ring, if the
    /// operation has one, and whether writes its fence completed went to
    /// the ring already (a second completion of a slot: nothing).
    Done(Option<Completion>, bool),
    /// It failed: the connection ends, and then the operation is reported
    /// (outside the path's lock; process context), with its errno and
    /// work completion status, and whether writes its fence completed went
    /// to the ring already.
    Failed(OpCtx, Errno, u32, bool),
}

/// What completions handled without the connection's lock leave for the
/// connection's follow-up work ([`Conn::run_followups`]): flags in `due`.
pub(super) struct Followups {
    due: AtomicU32,
    /// The errno of the first write fence a completion could not post.
    fence_errno: AtomicI32,
    /// Tasks in [`Conn::wait_room`].
    room_waiters: AtomicU32,
}

impl Followups {
    /// A destroyed region's cached registrations lost their last operation.
    const PRUNE: u32 = 1 << 0;
    /// An import's count reached zero while a revoke's acknowledgement or
    /// the removal of its entry waited for that (`imports::Uses`).
    const SETTLE: u32 = 1 << 1;
    /// A write fence could not be posted: the connection fails.
    const FENCE_FAILED: u32 = 1 << 2;
    /// Send-queue room came while a task waits for it.
    const ROOM: u32 = 1 << 3;

    pub(super) const fn new() -> Self {
        Self {
            due: AtomicU32::new(0),
            fence_errno: AtomicI32::new(0),
            room_waiters: AtomicU32::new(0),
        }
    }
}

/// What one batch of completions leaves for the follow-up work.
#[derive(Default)]
struct Due {
    flags: u32,
    fence_err: Option<Errno>,
}

impl_has_work! {
    impl HasWork<Self, 3> for Conn { self.followup_work }
}

/// The follow-up work of completions handled without the connection's lock
/// ([`Followups`]).
impl WorkItem<3> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        this.run_followups();
    }
}

/// The connection's lock, held across the operations of a batch; `None`
/// while released (around an allocation, or for good).
type InnerGuard<'a> =
    Option<kernel::sync::lock::Guard<'a, super::Inner, kernel::sync::lock::mutex::MutexBackend>>;

/// A path's lock, held.
type PathGuard<'a> = BhGuard<'a, Option<KBox<PathData>>>;

impl Conn {
    /// Path `p`'s lock (`None` past [`wire::QPS_MAX`]).
    fn path(&self, p: usize) -> Option<&PathLock> {
        self.path_data.get(p).map(|l| &**l)
    }

    /// Gives path `p` a new queue pair's `depth` operation entries,
    /// `sinks` READ sinks and `fences` fence sinks (none: 0), allocating
    /// its data state at its first queue pair (under the connection's
    /// lock, which keeps paths from being set up twice at once); a path
    /// without one that loses its queue pair (`depth` 0) gets none.
    pub(super) fn reset_path(
        &self,
        p: usize,
        depth: u32,
        sinks: u32,
        fences: u32,
    ) -> Result<(), Errno> {
        let lock = self.path(p).ok_or(ENOTCONN)?;
        if depth > 0 && lock.lock().is_none() {
            let d = PathData::new().map_err(|_| ENOMEM)?;
            let spare = lock.lock().replace(d);
            drop(spare);
        }
        if let Some(d) = lock.lock().as_deref_mut() {
            d.slots.reset(depth, sinks, fences);
        }
        Ok(())
    }

    /// The work requests one operation may take on path `p` (0 without a
    /// queue pair).
    pub(super) fn op_budget(&self, p: usize) -> u32 {
        self.path(p)
            .and_then(|l| l.lock().as_ref().map(|d| d.slots.op_budget()))
            .unwrap_or(0)
    }

    /// Free and total send-queue operation entries over the first `n`
    /// paths (a wait for room).
    fn sq_room(&self, n: usize) -> (u64, u64) {
        self.path_data
            .iter()
            .take(n)
            .fold((0, 0), |(free, all), l| match l.lock().as_ref() {
                Some(d) => (
                    free + u64::from(d.slots.sq_free),
                    all + u64::from(d.slots.depth),
                ),
                None => (free, all),
            })
    }

    /// Posts one checked operation on `import` from or to `region`, which
    /// reports to `to`, on the submitting CPU's path; returns the outcome
    /// and that path. One acquisition of the connection's lock, and one of
    /// the path's, when the operation's registrations are cached;
    /// otherwise they are allocated outside the locks, which are taken
    /// again.
    pub(crate) fn post_op(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        to: &mut ReportTo,
    ) -> Result<(Posted, usize), Errno> {
        let mut g = Some(self.inner.lock());
        let p = g.as_ref().map_or(0, |i| i.pick_path());
        let posted = self.post_locked(&mut g, p, import, region, c, to, None)?;
        Ok((posted, p))
    }

    /// Posts the operations `ops` gives, all on this connection, under one
    /// acquisition of its lock (released only around the allocations of
    /// an operation that is the first to touch a chunk); on iWARP, with
    /// `fence` (the region of a batch of two writes or more), its writes
    /// share one fence (`BatchFence`). Stops at the first operation that
    /// finds no room or is refused; returns how many were posted, and the
    /// refusal's errno.
    pub(crate) fn post_ops<'a>(
        self: &Arc<Self>,
        ops: impl Iterator<Item = (&'a Import, &'a Arc<Region>, &'a Checked, ReportTo)>,
        fence: Option<&Arc<Region>>,
    ) -> (usize, Option<Errno>) {
        let mut g = Some(self.inner.lock());
        // The whole run goes on one queue pair: its writes share a fence.
        let p = g.as_ref().map_or(0, |i| i.pick_path());
        // The fence's sink is reserved before the first write.
        if fence.is_some() {
            if let Err(e) = self.ready_sinks(&mut g, p) {
                return (0, Some(self.refused(&mut g, e)));
            }
        }
        let mut batch = match (fence, g.as_ref()) {
            (Some(_), Some(inner)) => self.batch_begin(inner, p),
            _ => None,
        };
        let mut posted = 0;
        let mut err = None;
        for (import, region, c, mut to) in ops {
            match self.post_locked(&mut g, p, import, region, c, &mut to, batch.as_mut()) {
                Ok(Posted::Yes) => posted += 1,
                Ok(Posted::Full) => break,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if let Some(b) = batch {
            let inner = g.get_or_insert_with(|| self.inner.lock());
            let r = self.batch_end(inner, p, b);
            drop(g);
            match r {
                Ok(op) => drop(op),
                // The queue pair failed: its teardown completes the fence,
                // and its writes, with the flush status.
                Err(e) => self.fail(Event::QpFatal, "cannot post a write fence", e),
            }
        }
        (posted, err)
    }

    /// `e`, the errno an operation was refused with, as the caller sees
    /// it: for `ENOTCONN` (its queue pair gone or failed under it), the
    /// errno the connection's state refuses operations with now (`EAGAIN`
    /// while it reconnects).
    fn refused<'g>(&'g self, g: &mut InnerGuard<'g>, e: Errno) -> Errno {
        if e != ENOTCONN {
            return e;
        }
        g.get_or_insert_with(|| self.inner.lock()).errno_gone()
    }

    /// Posts one operation with the lock held in `g` (taken if released),
    /// releasing it to allocate what a first-touched chunk needs and to
    /// free what is left of that allocation.
    #[allow(clippy::too_many_arguments)]
    fn post_locked<'g>(
        self: &'g Arc<Self>,
        g: &mut InnerGuard<'g>,
        p: usize,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        to: &mut ReportTo,
        mut batch: Option<&mut BatchFence>,
    ) -> Result<Posted, Errno> {
        let mut prep = Prep::default();
        // The cache can change between the allocation and the post (a
        // destroyed region's registrations are pruned): plan again then.
        for _ in 0..4 {
            let inner = g.get_or_insert_with(|| self.inner.lock());
            let r = self.try_post(
                inner,
                p,
                import,
                region,
                c,
                to,
                batch.as_deref_mut(),
                &mut prep,
            );
            if prep.pd.is_some() || matches!(r, Ok(Attempt::Prepare(..) | Attempt::Failed(..))) {
                // Registrations are allocated and freed, and a connection
                // fails, outside the lock.
                *g = None;
            }
            match r.map_err(|e| self.refused(g, e))? {
                Attempt::Done(posted) => return Ok(posted),
                Attempt::Prepare(plan, pd) => {
                    drop(core::mem::take(&mut prep));
                    prep = Prep::new(&plan, pd, region)?;
                }
                Attempt::Again => prep = Prep::default(),
                Attempt::Sinks => self.ready_sinks(g, p).map_err(|e| self.refused(g, e))?,
                Attempt::Failed(e, op) => {
                    drop(op);
                    self.fail(Event::QpFatal, "cannot post an operation", e);
                    // The errno of the connection it failed, not the
                    // provider's (siw's ENOTCONN for a closing queue pair).
                    return Err(self.inner.lock().errno_gone());
                }
            }
        }
        Ok(Posted::Full)
    }

    /// Allocates path `p`'s READ and fence sinks (iWARP) unless they are,
    /// at its queue pair's first operation: outside the lock (`g` is
    /// released and taken again), under a poll reference that the queue
    /// pair's teardown waits for. `ENOMEM` when the device's registrations
    /// are all taken. A queue pair that replaced this one meanwhile (a
    /// reconnect) gets its own at its first operation.
    fn ready_sinks<'g>(&'g self, g: &mut InnerGuard<'g>, p: usize) -> Result<(), Errno> {
        let lock = self.path(p).ok_or(ENOTCONN)?;
        let alloc = {
            let inner = g.get_or_insert_with(|| self.inner.lock());
            if lock.lock().as_ref().ok_or(ENOTCONN)?.slots.sinks_ready {
                return Ok(());
            }
            let Some(x) = inner.paths.get(p) else {
                return Err(ENOTCONN);
            };
            let Some(qp) = path_qp(p, &inner.id, &x.lane) else {
                return Err(ENOTCONN);
            };
            qp.sink_alloc()
        };
        *g = None;
        // The poll reference goes before the lock is taken again.
        alloc.run()?;
        let inner = g.get_or_insert_with(|| self.inner.lock());
        let ready = inner
            .paths
            .get(p)
            .and_then(|x| path_qp(p, &inner.id, &x.lane))
            .is_some_and(|q| q.has_sinks());
        if ready {
            if let Some(d) = lock.lock().as_deref_mut() {
                // Two first operations of a path may both get here; the
                // one that finds the lists not yet ready fills and counts
                // them.
                if !d.slots.sinks_ready {
                    d.slots.fill_sinks();
                    self.shared.work.sink_alloc();
                }
            }
        }
        Ok(())
    }

    /// Plans and posts under the connection's lock (`inner`) and path
    /// `p`'s with what `prep` allocated; what is left of `prep` is for the
    /// caller to free once the locks are released.
    #[allow(clippy::too_many_arguments)]
    fn try_post(
        self: &Arc<Self>,
        inner: &mut super::Inner,
        p: usize,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        to: &mut ReportTo,
        batch: Option<&mut BatchFence>,
        prep: &mut Prep,
    ) -> Result<Attempt, Errno> {
        let mut pg = self.path(p).ok_or(ENOTCONN)?.lock();
        let d = pg.as_deref_mut().ok_or(ENOTCONN)?;
        // A write outside a batch joins the open group while a fence is in
        // flight (`OpenGroup`), and so does an iWARP write of an io_uring
        // submission under a plug, whose end posts the group's fence.
        // Decided under the path's lock: a fence completion that posts the
        // open group takes it too.
        let join = batch.is_none()
            && (d.slots.fences_posted > 0
                || (to.uring.is_some()
                    && c.dir == Dir::Write
                    && inner.res.as_ref().is_some_and(|r| r.iwarp)
                    && self.plugged()));
        let plan = Plan::new(inner, d, import, region, c, batch.is_some() || join)?;
        let super::Inner {
            paths,
            id,
            imports,
            res,
            ..
        } = inner;
        let Some(Path { lane, .. }) = paths.get(p) else {
            return Err(ENOTCONN);
        };
        let PathData {
            slots: o,
            wr_scratch,
            local,
        } = d;
        // The group's fence is reserved by its first write.
        let new_group = plan.unfenced && batch.is_none() && o.open.is_none();
        let Some(qp) = path_qp(p, id, lane) else {
            return Err(ENOTCONN);
        };
        let Some(res) = res.as_mut() else {
            return Err(ENOTCONN);
        };
        if !o.sinks_ready {
            return Ok(Attempt::Sinks);
        }
        if plan.wrs + if new_group { 2 } else { 0 } > o.sq_free
            || o.free.len() < 1 + usize::from(new_group)
            || (plan.sinks as usize) > o.sinks_free.len()
            || ((plan.fence || new_group) && o.fences_free.is_empty())
        {
            return Ok(Attempt::Done(Posted::Full));
        }
        if !plan.covered_by(prep, &res.pd) {
            return Ok(Attempt::Prepare(plan, res.pd.clone()));
        }
        let uses = imports.uses(import.entry()).ok_or(ENOTCONN)?;
        let (mrs, spare) = (&mut prep.mrs, &mut prep.spare);
        let wrs = wr_scratch.start();
        if plan.wrs as usize > wrs.capacity() {
            // A plan fits in the send queue's operation entries, at most
            // `SLOTS_MAX`.
            ffi::internal_error!(
                "an operation's plan of {} work requests exceeds the scratch list ({})\n",
                plan.wrs,
                wrs.capacity()
            );
            return Err(E2BIG);
        }
        let rk = key(region);
        if let Some((reservation, chunks)) = prep.node.take() {
            if local.tree.get(&rk).is_none() {
                local.tree.insert(reservation.into_node(
                    rk,
                    LocalReg {
                        chunks,
                        region: region.clone(),
                        inflight: 0,
                    },
                ));
            }
        }
        let Some(reg) = local.tree.get_mut(&rk) else {
            return Ok(Attempt::Again);
        };
        // Every chunk is registered, or has a registration ready to post.
        for i in 0..plan.nchunks {
            let chunk = (plan.first + i as u64) as usize;
            if reg.chunks.get(chunk).is_none() && !mrs.iter().any(|m| m.0 == chunk) {
                return Ok(Attempt::Again);
            }
        }
        // Build: each chunk's registration right before its first segment.
        // The sinks are the last `plan.sinks` free ones, taken once built.
        let nfree = o.sinks_free.len();
        let sink_of = |j: usize| {
            nfree
                .checked_sub(j + 1)
                .and_then(|i| o.sinks_free.get(i).copied())
        };
        let mut nsinks = 0;
        let mut last_chunk = usize::MAX;
        for s in ops::segments(c, plan.lshift, import.chunk_shift) {
            let lc = ops::chunk_of(s.local_off, plan.lshift) as usize;
            let pending = mrs
                .iter_mut()
                .find(|m| m.0 == lc && reg.chunks.get(lc).is_none());
            let (lkey, chunk_mr) = match (reg.chunks.get(lc), pending) {
                (Some(m), _) => (m.lkey(), m.as_ptr()),
                (None, Some(m)) => {
                    if lc != last_chunk {
                        m.2 = wrs.len() as u32;
                        // Within capacity (the plan counted it).
                        let _ = wrs.push(
                            ShimWr::reg(m.1.as_ptr(), ffi::ACCESS_LOCAL_WRITE, false),
                            GFP_KERNEL,
                        );
                    }
                    (m.1.lkey(), m.1.as_ptr())
                }
                (None, None) => return Ok(Attempt::Again),
            };
            last_chunk = lc;
            let rc = ops::chunk_of(s.remote_off, import.chunk_shift) as usize;
            let rkey = imports.rkey(import.entry(), rc).ok_or(ENOTCONN)?;
            // Within capacity (the plan counted every request).
            match (c.dir, plan.iwarp) {
                (Dir::Read, true) => {
                    let Some(k) = sink_of(nsinks) else {
                        // The plan checked there were enough.
                        return Ok(Attempt::Again);
                    };
                    nsinks += 1;
                    let _ = wrs.push(
                        ShimWr::sink_reg(chunk_mr, k, s.local_off, s.len),
                        GFP_KERNEL,
                    );
                    let _ = wrs.push(ShimWr::sink_read(k, s.len, s.remote_off, rkey), GFP_KERNEL);
                }
                (Dir::Read, false) => {
                    let _ = wrs.push(
                        ShimWr::rdma(ffi::WR_READ, s.local_off, lkey, s.len, s.remote_off, rkey),
                        GFP_KERNEL,
                    );
                }
                (Dir::Write, _) => {
                    let _ = wrs.push(
                        ShimWr::rdma(ffi::WR_WRITE, s.local_off, lkey, s.len, s.remote_off, rkey),
                        GFP_KERNEL,
                    );
                }
            }
        }
        let mut fence = None;
        if plan.fence {
            // The fence: a READ of the last byte written, into a fence sink
            // over the queue pair's scratch buffer.
            if let (Some(last), Some(&k)) = (wrs.last(), o.fences_free.last()) {
                let (addr, rkey) = (last.remote_addr + u64::from(last.len) - 1, last.rkey);
                let _ = wrs.push(ShimWr::sink_reg(core::ptr::null_mut(), k, 0, 1), GFP_KERNEL);
                let _ = wrs.push(ShimWr::sink_read(k, 1, addr, rkey), GFP_KERNEL);
                fence = Some(k);
            }
        }
        if nsinks != plan.sinks as usize
            || fence.is_some() != plan.fence
            || wrs.len() > plan.wrs as usize
        {
            // The plan no longer holds (it counted what this builds; a
            // chunk registered meanwhile only takes a request less).
            return Ok(Attempt::Again);
        }
        // A write that leaves its fence to its batch's or its group's: the
        // batch's fence must still be waiting in its slot (a reconnect
        // flushed it); the fence will read the last byte this write places.
        let mut op = OpCtx {
            reg: rk,
            uses: Some(uses),
            user_data: to.user_data,
            opcode: to.opcode,
            wrs: 0,
            bytes: c.len,
            sync: None,
            uring: None,
            sinks: NO_SINK,
            batch: None,
            fenced: plan.fence,
            kind: Kind::User,
        };
        let mut unfenced_last = None;
        if plan.unfenced {
            let id = match (batch.as_ref(), o.open.as_ref()) {
                (Some(b), _) if o.holds_fence(b.slot, b.id) => b.id,
                (Some(_), _) => return Err(ECONNRESET),
                (None, Some(o)) => o.id,
                (None, None) => {
                    // Room checked above (`new_group`).
                    let id = FENCE_IDS.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = o.reserve_fence(id) else {
                        return Ok(Attempt::Done(Posted::Full));
                    };
                    o.open = Some(OpenGroup {
                        slot,
                        id,
                        last: None,
                    });
                    id
                }
            };
            op.batch = Some(id);
            unfenced_last = match (wrs.last(), op.uses.as_ref()) {
                (Some(w), Some(u)) => {
                    Some((u.clone(), w.remote_addr + u64::from(w.len) - 1, w.rkey))
                }
                _ => None,
            };
        }
        let n = wrs.len() as u32;
        let Some(slot) = crate::compat::vec_pop(&mut o.free) else {
            return Ok(Attempt::Done(Posted::Full));
        };
        // Where it reports: taken from `to` only now, past every refusal.
        op.sync = to.sync.take();
        op.uring = to.uring.take();
        if let Some(u) = op.uring.as_ref() {
            u.poll_on(qp);
        }
        // What it gives back to the send queue when it completes: what
        // was built (a chunk registered since the plan takes one less).
        op.wrs = n;
        // The sinks the requests name (the plan checked there were enough).
        for _ in 0..nsinks {
            op.sinks = o.hold_sink(false, op.sinks);
        }
        if fence.is_some() {
            op.sinks = o.hold_sink(true, op.sinks);
        }
        // The last request carries the slot: its completion completes the
        // operation. A write of a batch goes unsignaled (its batch's fence
        // completes it), and completes on its own only with an error.
        if let Some(last) = wrs.last_mut() {
            last.signaled = u32::from(op.batch.is_none());
            last.slot = slot;
        }
        // Counted before the post: its completion (under this path's lock,
        // which is held) counts it down.
        if let Some(u) = op.uses.as_ref() {
            u.started();
        }
        o.ops[slot as usize] = Some(op);
        // SAFETY: every registration the requests name is in the cache (or
        // installed below once posted) and stays there while an operation
        // uses it; the remote keys belong to the peer's registrations.
        let (posted, r) = unsafe { qp.post(&wrs[..]) };
        // Install what was posted; free the rest after the locks.
        while let Some((chunk, mr, at)) = crate::compat::vec_pop(mrs) {
            let kept = if at < posted {
                reg.chunks.set(chunk, mr)
            } else {
                Err(mr)
            };
            if let Err(mr) = kept {
                // Within capacity: cannot fail.
                let _ = spare.push(mr, GFP_KERNEL);
            }
        }
        if posted < n {
            // The signaled request was not posted: no completion will come
            // for the slot. What was posted fails with the queue pair.
            // Its sinks go back to the pool; the queue pair, failed, takes
            // them down with it.
            let op = o.ops[slot as usize].take();
            let _ = o.free.push(slot, GFP_KERNEL);
            if let Some(op) = op.as_ref() {
                o.put_sinks(op.sinks);
                if let Some(u) = op.uses.as_ref() {
                    u.done();
                }
            }
            o.sq_free -= posted;
            let e = r.err().unwrap_or(crate::abi::errno::EIO);
            return Ok(Attempt::Failed(e, op));
        }
        o.sq_free -= n;
        reg.inflight += 1;
        if p != 0 {
            self.shared.work.lane_op();
        }
        if plan.fence {
            o.fences_posted += 1;
            self.shared.work.fence();
        }
        if unfenced_last.is_some() {
            match (batch, o.open.as_mut()) {
                (Some(b), _) => b.last = unfenced_last,
                (None, Some(o)) => o.last = unfenced_last,
                (None, None) => {}
            }
        }
        Ok(Attempt::Done(Posted::Yes))
    }

    /// The completions of path `p`'s operation slots in `done`, each
    /// `(slot, work completion status)`: one poll of its send CQ `qp`
    /// (softirq, a task that polls, or the CQ's work item), or the
    /// teardown's flush of what the provider never completed (`qp` gone).
    /// They end under one acquisition of the path's lock, not the
    /// connection's: their records
    /// reach the file's ring under one acquisition of its lock per
    /// [`ffi::POLL_BATCH`], and the file's readers are woken once for them
    /// all. What needs the connection's lock is left to its follow-up work
    /// ([`Followups`]), except a failed operation's end, which comes only
    /// in process context (the shim hands failed completions to its work
    /// item): the connection ends first (outside the path's lock), then
    /// the operation is reported.
    pub(crate) fn slots_done(
        self: &Arc<Self>,
        p: usize,
        qp: Option<QpRef<'_>>,
        done: impl Iterator<Item = (u32, u32)> + Clone,
    ) {
        let Some(lock) = self.path(p) else {
            return;
        };
        if ffi::in_softirq() {
            self.shared.work.softirq();
        }
        // The status of a flushed operation says why the connection ended.
        let flush = if done.clone().any(|(_, s)| s != ops::wc::SUCCESS) {
            self.inner.lock().state.flush_errno()
        } else {
            ECONNRESET
        };
        let mut recs = [Completion::zeroed(); ffi::POLL_BATCH];
        let (mut n, mut queued) = (0, false);
        let mut due = Due::default();
        let mut g: Option<PathGuard<'_>> = None;
        for (slot, status) in done {
            let pg = g.get_or_insert_with(|| lock.lock());
            let Some(d) = pg.as_deref_mut() else {
                break;
            };
            let (rec, members) = match self.end_slot(d, slot, status, flush, qp, &mut due) {
                Ended::Done(rec, members) => (rec, members),
                Ended::Failed(mut op, errno, wc_status, members) => {
                    g = None;
                    self.wc_failed(wc_status as c_int, super::Wr::Operation);
                    let rec = op
                        .finish(errno.to_errno(), &self.shared.work)
                        .filter(|_| op.kind == Kind::User);
                    (rec, members)
                }
            };
            queued |= members;
            if let Some(c) = rec {
                if n == recs.len() {
                    self.shared.complete(recs.iter().copied());
                    n = 0;
                }
                recs[n] = c;
                n += 1;
            }
        }
        drop(g);
        if n > 0 {
            self.shared.complete(recs[..n].iter().copied());
        } else if queued {
            self.shared.wake_readers();
        }
        if self.followups.room_waiters.load(Ordering::SeqCst) > 0 {
            due.flags |= Followups::ROOM;
        }
        self.ask_followups(due);
    }

    /// Ends the operation in slot `slot` of path data `d` (one of a batch,
    /// [`Self::slots_done`], which wakes whom it concerns) under the
    /// path's lock: `wc_status` is its work completion's, `flush` the
    /// errno of a flushed one, `qp` its queue pair (`None`: gone). One that
    /// ended well is reported here (to its synchronous caller or io_uring
    /// command, or with the record it returns for the file's ring); what
    /// needs the connection's lock goes into `due`.
    fn end_slot(
        &self,
        d: &mut PathData,
        slot: u32,
        wc_status: u32,
        flush: Errno,
        qp: Option<QpRef<'_>>,
        due: &mut Due,
    ) -> Ended {
        let mut members = 0usize;
        let Some(mut op) = d.slots.take(slot) else {
            pr_debug!(
                "second completion of slot {} (status {}) ignored\n",
                slot,
                wc_status
            );
            return Ended::Done(None, false);
        };
        let errno = match ops::wc_errno(wc_status) {
            // Flushed: the connection ended under it.
            Some(crate::abi::errno::ECANCELED) => Some(flush),
            e => e,
        };
        let status = errno.map_or(0, Errno::to_errno);
        if op.kind == Kind::User && local_done(&mut d.local, op.reg) {
            due.flags |= Followups::PRUNE;
        }
        if op.uses.take().is_some_and(|u| u.done()) {
            due.flags |= Followups::SETTLE;
        }
        if let Kind::Fence { id, .. } = op.kind {
            // The writes this fence follows are placed (or failed with
            // it): they complete with its status, in one trip through
            // the file's ring. Their regions stay referenced by their
            // cache entries, which a destroyed region's last use leaves
            // to the follow-up work to prune.
            let (slots, local) = (&mut d.slots, &mut d.local);
            let mut ring = self.shared.ring.lock();
            slots.take_members(id, |mut w| {
                if local_done(local, w.reg) {
                    due.flags |= Followups::PRUNE;
                }
                if w.uses.take().is_some_and(|u| u.done()) {
                    due.flags |= Followups::SETTLE;
                }
                if let Some(c) = w.finish(status, &self.shared.work) {
                    ring.push(c);
                    members += 1;
                }
            });
        }
        let members = members > 0;
        if let Some(e) = errno {
            return Ended::Failed(op, e, wc_status, members);
        }
        // The peer's transport answered: a sign of life (our control
        // messages may wait behind the data).
        self.heard();
        if op.fenced {
            // The writes that waited for this fence get theirs.
            if let Some(qp) = qp {
                if let Err(e) = self.post_open_group(d, qp) {
                    due.fence_err.get_or_insert(e);
                }
            }
        }
        // Its report takes only leaf locks (a synchronous caller's
        // status; io_uring's task work, or the CQE an IOPOLL poller posts
        // in place under the ring's lock, which it holds already), and
        // nothing it drops frees what must be freed in process context.
        let rec = op
            .finish(0, &self.shared.work)
            .filter(|_| op.kind == Kind::User);
        Ended::Done(rec, members)
    }

    /// Hands what `due` holds to the follow-up work (any context).
    fn ask_followups(self: &Arc<Self>, due: Due) {
        let mut flags = due.flags;
        if let Some(e) = due.fence_err {
            let _ = self.followups.fence_errno.compare_exchange(
                0,
                e.to_errno(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            flags |= Followups::FENCE_FAILED;
        }
        if flags == 0 {
            return;
        }
        self.followups.due.fetch_or(flags, Ordering::AcqRel);
        // Queued already: that run sees the flags (it takes them first).
        // The clone is not the last reference: the caller's covers it.
        let _ = ffi::wq().enqueue::<Arc<Conn>, 3>(self.clone());
    }

    /// The follow-up work: what completions handled without the
    /// connection's lock left for it (process context).
    fn run_followups(self: &Arc<Self>) {
        let due = self.followups.due.swap(0, Ordering::AcqRel);
        if due & Followups::FENCE_FAILED != 0 {
            let e = self.followups.fence_errno.swap(0, Ordering::AcqRel);
            let e = Errno::from_status(e).unwrap_or(crate::abi::errno::EIO);
            self.fail(Event::QpFatal, "cannot post a write fence", e);
        }
        if due & Followups::PRUNE != 0 {
            self.prune_destroyed();
        }
        if due & (Followups::SETTLE | Followups::ROOM) != 0 {
            let mut g = self.inner.lock();
            if due & Followups::SETTLE != 0 {
                g.imports.settle();
                ctrl::send_due_acks(&mut g, &self.shared.ctrl);
            }
            // A task that waits for room checked it under this lock: it is
            // waiting on the condition variable by now.
            drop(g);
            self.cv.notify_all();
        }
    }

    /// Drops the cached registrations of destroyed regions that no
    /// operation uses any more, one at a time, each outside the path's
    /// lock.
    fn prune_destroyed(&self) {
        for lock in self.path_data.iter() {
            loop {
                let gone = {
                    let mut pg = lock.lock();
                    let Some(d) = pg.as_deref_mut() else {
                        break;
                    };
                    let found = d
                        .local
                        .tree
                        .iter()
                        .find(|(_, r)| r.inflight == 0 && r.region.is_destroyed())
                        .map(|(k, _)| *k);
                    match found {
                        Some(k) => d.local.tree.remove(&k),
                        None => break,
                    }
                };
                drop(gone);
            }
        }
    }

    /// Logs (rate-limited) why `what` could post nothing on this connection
    /// with nothing of its caller in flight, with `e` the errno it returns.
    pub(crate) fn warn_no_room(&self, what: &str, e: Errno) {
        let Some(lock) = self.path(0) else {
            return;
        };
        let pg = lock.lock();
        let Some(o) = pg.as_ref().map(|d| &d.slots) else {
            return;
        };
        let (sq_free, depth, free, sinks, fences) = (
            o.sq_free,
            o.depth,
            o.free.len(),
            o.sinks_free.len(),
            o.fences_free.len(),
        );
        drop(pg);
        crate::ffi::warn_user!(
            "{}: nothing posted (errno {}): {} of {} send entries, {} slots, {} READ sinks, {} fence sinks free\n",
            what,
            e.get(),
            sq_free,
            depth,
            free,
            sinks,
            fences
        );
    }

    /// Begins a batch of writes on path `p` of this connection that share
    /// one fence: on iWARP, with room for the fence now and no fence in
    /// flight; `None` otherwise (the writes then join the open group, or
    /// fence themselves). Every [`BatchFence`] goes to `batch_end`.
    fn batch_begin(&self, inner: &super::Inner, p: usize) -> Option<BatchFence> {
        if !inner.state.is_connected() || !inner.res.as_ref().is_some_and(|r| r.iwarp) {
            return None;
        }
        let mut pg = self.path(p)?.lock();
        let slots = &mut pg.as_deref_mut()?.slots;
        // With a fence in flight, the batch's writes join the open group
        // (`OpenGroup`): one fence for them and the group's.
        if slots.fences_posted > 0 {
            return None;
        }
        let id = FENCE_IDS.fetch_add(1, Ordering::Relaxed);
        let slot = slots.reserve_fence(id)?;
        Some(BatchFence {
            slot,
            id,
            last: None,
        })
    }

    /// Ends a batch (under the connection's lock, `inner`): posts its
    /// fence after its last write, or takes its reservation back (to drop
    /// outside the locks) if every write fenced itself or none was posted.
    /// An error: the fence could not be posted (the connection is to
    /// fail).
    fn batch_end(
        &self,
        inner: &super::Inner,
        p: usize,
        b: BatchFence,
    ) -> Result<Option<OpCtx>, Errno> {
        let Some(lock) = self.path(p) else {
            return Ok(None);
        };
        let mut pg = lock.lock();
        let Some(d) = pg.as_deref_mut() else {
            return Ok(None);
        };
        if !d.slots.holds_fence(b.slot, b.id) {
            // A teardown flushed it, and its writes with it.
            return Ok(None);
        }
        match b.last {
            Some(last) => {
                let qp = inner
                    .paths
                    .get(p)
                    .and_then(|x| path_qp(p, &inner.id, &x.lane));
                match qp {
                    Some(qp) => self
                        .post_fence(d, qp.as_ref(), b.slot, b.id, last)
                        .map(|()| None),
                    // Going: the teardown completes the fence and its
                    // writes.
                    None => Ok(None),
                }
            }
            None => Ok(d.slots.take(b.slot)),
        }
    }

    /// Posts the open group's fence after its writes (a fence completed,
    /// or a plug closed) on `qp`, the path's queue pair. A group whose
    /// first write was refused stays reserved, empty, for the next write
    /// or the teardown.
    fn post_open_group(&self, d: &mut PathData, qp: QpRef<'_>) -> Result<(), Errno> {
        match d.slots.open.take() {
            Some(OpenGroup {
                slot,
                id,
                last: Some(last),
            }) => self.post_fence(d, qp, slot, id, last),
            // Empty (or none): it stays.
            open => {
                d.slots.open = open;
                Ok(())
            }
        }
    }

    /// Whether the current task submits under a plug (io_uring's, around a
    /// submission of several commands) that calls this connection back
    /// when it closes ([`Conn::unplugged`]); registers the callback.
    fn plugged(self: &Arc<Self>) -> bool {
        // SAFETY: C keeps the address only in the plug's callback, which
        // holds the reference handed to it below when it is new.
        match unsafe { ffi::rrdma_shim_plug(foreign::addr_of(self)) } {
            2 => {
                // INVARIANT: the new callback owns one reference, taken
                // back in `rrdma_rust_conn_unplug`.
                let _ = foreign::into_c(self.clone());
                true
            }
            1 => true,
            _ => false,
        }
    }

    /// The plug of an io_uring submission closed (`from_schedule`: its task
    /// is on its way to sleep with it open, and nothing may sleep here):
    /// the submission's writes get their group's fence.
    pub(crate) fn unplugged(this: Arc<Self>, from_schedule: bool) {
        if from_schedule {
            // Queued already: that run posts it.
            let _ = ffi::wq().enqueue::<Arc<Conn>, 2>(this);
        } else {
            this.post_deferred();
        }
    }

    /// Posts each path's open group's fence unless a fence in flight on
    /// that path will (its completion posts it, group commit).
    fn post_deferred(self: &Arc<Self>) {
        let r = {
            let g = self.inner.lock();
            let mut r = Ok(());
            for (p, x) in g.paths.iter().enumerate() {
                let (Some(lock), Some(qp)) = (self.path(p), path_qp(p, &g.id, &x.lane)) else {
                    continue;
                };
                let mut pg = lock.lock();
                if let Some(d) = pg.as_deref_mut().filter(|d| d.slots.fences_posted == 0) {
                    r = r.and(self.post_open_group(d, qp.as_ref()));
                }
            }
            r
        };
        if let Err(e) = r {
            self.fail(Event::QpFatal, "cannot post a write fence", e);
        }
    }

    /// Posts the write fence reserved in `slot` of `d` (batch or group
    /// `id`) on `qp`: a one-byte READ of `last` (the import's count, the
    /// remote address and key of the last byte its writes placed) into the
    /// fence's sink. Its completion completes its writes.
    fn post_fence(
        &self,
        d: &mut PathData,
        qp: QpRef<'_>,
        slot: u32,
        id: u64,
        last: (Arc<Uses>, u64, u32),
    ) -> Result<(), Errno> {
        let (uses, addr, rkey) = last;
        let slots = &mut d.slots;
        let Some(Some(fence)) = slots.ops.get_mut(slot as usize) else {
            return Ok(());
        };
        let k = fence.sinks;
        if k == NO_SINK {
            return Ok(());
        }
        let mut wrs = [
            ShimWr::sink_reg(core::ptr::null_mut(), k, 0, 1),
            ShimWr::sink_read(k, 1, addr, rkey),
        ];
        wrs[1].signaled = 1;
        wrs[1].slot = slot;
        // Counted before the post, as an operation is.
        uses.started();
        // SAFETY: the sink maps the queue pair's scratch buffer; the remote
        // key belongs to the peer's registration the last write used.
        let (posted, r) = unsafe { qp.post(&wrs) };
        if posted < 2 {
            uses.done();
            return Err(r.err().unwrap_or(crate::abi::errno::EIO));
        }
        fence.kind = Kind::Fence { id, posted: true };
        fence.uses = Some(uses);
        fence.fenced = true;
        slots.fences_posted += 1;
        self.shared.work.fence();
        Ok(())
    }

    /// Completes, with the flush status, every operation the provider did
    /// not complete (the teardown, once the queue pair is destroyed).
    pub(super) fn flush_ops(self: &Arc<Self>) {
        let paths = self.inner.lock().paths.len();
        for p in 0..paths {
            self.slots_done(
                p,
                None,
                (0..SLOTS_MAX).map(|slot| (slot, ops::wc::WR_FLUSH_ERR)),
            );
        }
    }

    /// Drops every path's registrations, and the lanes' paths, one path at
    /// a time outside the locks (the teardown, once every queue pair is
    /// destroyed and every operation completed).
    pub(super) fn drop_paths(&self) {
        loop {
            let (local, lane, data) = {
                let mut g = self.inner.lock();
                let n = g.paths.len();
                if n > 1 {
                    let data = self.path(n - 1).and_then(|l| l.lock().take());
                    (None, crate::compat::vec_pop(&mut g.paths), data)
                } else {
                    let local = self.path(0).and_then(|l| {
                        l.lock()
                            .as_deref_mut()
                            .map(|d| core::mem::replace(&mut d.local, LocalRegs::new()))
                    });
                    (local, None, None)
                }
            };
            let done = local.is_some() || lane.is_none();
            drop(data);
            drop(lane);
            drop(local);
            if done {
                return;
            }
        }
    }

    /// Drops cached registrations of `region` that no operation uses
    /// (region destroyed); those in use go when their last operation does.
    pub(crate) fn forget_region(&self, region: &Arc<Region>) {
        let k = key(region);
        // One path at a time, each entry dropped outside its lock.
        for lock in self.path_data.iter() {
            let gone = {
                let mut pg = lock.lock();
                match pg.as_deref_mut() {
                    Some(d) if d.local.tree.get(&k).is_some_and(|r| r.inflight == 0) => {
                        d.local.tree.remove(&k)
                    }
                    _ => None,
                }
            };
            drop(gone);
        }
    }

    /// Waits (interruptibly) until a completion frees room on the send
    /// queue, nothing is in flight any more, or the connection ends.
    pub(crate) fn wait_room(&self) -> Result<(), Errno> {
        let waiters = &self.followups.room_waiters;
        // Before the first look at the room: a completion that frees some
        // after it asks the follow-up work to wake us (`Followups::ROOM`).
        waiters.fetch_add(1, Ordering::SeqCst);
        let r = {
            let mut g = self.inner.lock();
            let (before, _) = self.sq_room(g.paths.len());
            let mut left = None;
            wait_until(&self.cv, &mut g, &mut left, |i| {
                let (free, all) = self.sq_room(i.paths.len());
                free > before || free == all || !i.state.is_connected()
            })
        };
        waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Runs a synchronous operation: posts it (waiting for room) and waits
    /// for its status.
    pub(crate) fn run_sync(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        opcode: u32,
    ) -> Result<i32, Errno> {
        let w = SyncWait::new().map_err(|_| ENOMEM)?;
        let mut to = ReportTo {
            user_data: 0,
            opcode,
            sync: Some(w.clone()),
            uring: None,
        };
        let p = loop {
            match self.post_op(import, region, c, &mut to)? {
                (Posted::Yes, p) => break p,
                (Posted::Full, _) => self.wait_room()?,
            }
        };
        self.busy_poll(p, &w);
        let mut s = w.status.lock();
        let mut left = None;
        wait_until(&w.cv, &mut s, &mut left, |s| s.is_some())?;
        Ok(s.unwrap_or(0))
    }

    /// Busy polling (module parameter `sync_poll_us`, 0 by default): polls
    /// path `p`'s send CQ here until `w` has its status or the time is up,
    /// so that a short synchronous operation's end wakes nobody (neither
    /// the CQ's softirq nor this task). Completions of others that it
    /// finds are handled here too. The queue pair's teardown waits for the
    /// poll reference, which goes before this returns.
    fn busy_poll(&self, p: usize, w: &SyncWait) {
        let ns = ffi::sync_poll_ns();
        if ns == 0 {
            return;
        }
        let r = {
            let g = self.inner.lock();
            g.paths
                .get(p)
                .and_then(|x| path_qp(p, &g.id, &x.lane))
                .map(crate::verbs::Qp::poll_ref)
        };
        let Some(r) = r else {
            return;
        };
        let until = ffi::now_ns().saturating_add(ns);
        let mut polled = 0;
        while w.status.lock().is_none() && ffi::now_ns() < until {
            polled += r.poll();
        }
        self.shared.work.sync_polled(polled);
    }
}
