// SPDX-License-Identifier: GPL-2.0

//! Block operations on a connection: posting, operation slots, completions.
//!
//! An operation is cut into work requests that never cross a registration
//! chunk on either side (`abi::ops::segments`), preceded by registrations
//! of the local chunks it is the first to touch and, on iWARP, followed by
//! a one-byte READ fence; only the last work request is signaled, and it
//! carries the operation's slot. Posting is all or nothing: everything an
//! operation needs (its slot, its work requests, its send-queue room, new
//! registrations) is found or allocated first, and a registration enters
//! the connection's cache only once its work request is posted, so a
//! refused operation (`EAGAIN`, `E2BIG`, `ENOMEM`) leaves nothing behind.
//!
//! Exactly once: a completion takes its slot's operation; a second
//! completion of the same slot (siw's flush path can complete a READ
//! twice) finds nothing. What the provider never completes, the teardown
//! completes, once, after the queue pair is destroyed.

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};

use super::{ctrl, wait_until, Conn, Import};
use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, E2BIG, ENOMEM, ENOTCONN},
    limits,
    ops::{self, Checked, Dir},
    uapi::Completion,
};
use crate::ffi::{self, ShimWr};
use crate::foreign;
use crate::mr::{Chunks, Mr};
use crate::region::Region;

/// Most operation slots of a connection (its queue pair may have fewer:
/// `abi::limits::queue_sizes`).
const SLOTS_MAX: u32 = limits::OPS_MAX;

/// Most local chunks one operation can touch (each needs a work request).
const CHUNKS_MAX: usize = SLOTS_MAX as usize;

/// An operation in flight.
struct OpCtx {
    region: Arc<Region>,
    /// The import's entry in the connection's table.
    entry: u64,
    user_data: u64,
    opcode: u32,
    wrs: u32,
    bytes: u64,
    sync: Option<Arc<SyncWait>>,
}

/// Operation slots (one completion context each in the shim) and the send
/// queue's room, for the queue pair's `depth` operation entries.
/// Preallocated for [`SLOTS_MAX`]: completing an operation never allocates.
pub(super) struct Slots {
    ops: KVec<Option<KBox<OpCtx>>>,
    free: KVec<u32>,
    /// Operation entries of the current queue pair (0 without one); the
    /// slots below it are the ones the shim has completion contexts for.
    depth: u32,
    sq_free: u32,
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
        })
    }

    /// A new queue pair with `depth` operation entries (at most
    /// [`SLOTS_MAX`]), or none (0). Every slot is empty: nothing was
    /// posted yet, or the teardown flushed it.
    pub(super) fn reset(&mut self, depth: u32) {
        let depth = depth.min(SLOTS_MAX);
        while crate::compat::vec_pop(&mut self.free).is_some() {}
        for i in (0..depth).rev() {
            // Within capacity: cannot fail.
            let _ = self.free.push(i, GFP_KERNEL);
        }
        self.depth = depth;
        self.sq_free = depth;
    }

    /// Operation entries of the current queue pair.
    pub(super) fn depth(&self) -> u32 {
        self.depth
    }

    /// Takes the operation in `slot` (once) and frees the slot.
    fn take(&mut self, slot: u32) -> Option<KBox<OpCtx>> {
        let op = self.ops.get_mut(slot as usize)?.take()?;
        // Within capacity: every slot fits.
        let _ = self.free.push(slot, GFP_KERNEL);
        self.sq_free += op.wrs;
        Some(op)
    }
}

/// A local region's registrations on this connection.
/// Field order is drop order: the registrations go before the region
/// reference, which may be the last one keeping the pages.
struct LocalReg {
    chunks: Chunks,
    _region: Arc<Region>,
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

fn key(region: &Arc<Region>) -> usize {
    foreign::addr_of(region) as usize
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
                status <- new_mutex!(None, "SyncWait::status"),
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
    pd: Arc<crate::verbs::Pd>,
    lshift: u32,
    /// First local chunk the operation touches.
    first: u64,
    /// Local chunks touched.
    nchunks: usize,
    /// Bit `i`: chunk `first + i` has no registration yet.
    missing: [u64; CHUNKS_MAX / 64],
    have_reg: bool,
    /// Work requests the operation needs.
    wrs: u32,
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

impl Conn {
    /// Checks an operation against the connection under the lock and plans
    /// what it needs.
    fn plan(&self, import: &Import, region: &Arc<Region>, c: &Checked) -> Result<Plan, Errno> {
        let g = self.inner.lock();
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
        let reg = res.local.tree.get(&key(region));
        let mut missing = [0u64; CHUNKS_MAX / 64];
        let mut nmissing = 0;
        for i in 0..nchunks {
            let c = (first + i as u64) as usize;
            if reg.map_or(true, |r| r.chunks.get(c).is_none()) {
                missing[i / 64] |= 1 << (i % 64);
                nmissing += 1;
            }
        }
        let nseg = ops::segments(c, lshift, import.chunk_shift).count() as u32;
        let fence = u32::from(c.dir == Dir::Write && res.write_fence);
        let wrs = nseg + nmissing + fence;
        if wrs > g.ops.depth {
            // `check_op` refuses operations above the import's limit.
            return Err(E2BIG);
        }
        Ok(Plan {
            pd: res.pd.clone(),
            lshift,
            first,
            nchunks,
            missing,
            have_reg: reg.is_some(),
            wrs,
        })
    }

    /// Posts one checked operation on `import` from or to `region`.
    pub(crate) fn post_op(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        user_data: u64,
        opcode: u32,
        sync: Option<Arc<SyncWait>>,
    ) -> Result<Posted, Errno> {
        // The cache can change between the plan and the post (a destroyed
        // region's registrations are pruned): plan again then.
        for _ in 0..4 {
            let plan = self.plan(import, region, c)?;
            let op = OpCtx {
                region: region.clone(),
                entry: import.entry(),
                user_data,
                opcode,
                wrs: plan.wrs,
                bytes: c.len,
                sync: sync.clone(),
            };
            if let Some(posted) = self.try_post(import, region, c, &plan, op)? {
                return Ok(posted);
            }
        }
        Ok(Posted::Full)
    }

    /// Posts per `plan`; `None` if the plan no longer holds.
    fn try_post(
        self: &Arc<Self>,
        import: &Import,
        region: &Arc<Region>,
        c: &Checked,
        plan: &Plan,
        op: OpCtx,
    ) -> Result<Option<Posted>, Errno> {
        // Allocated before the lock: the context, the work requests, the
        // missing registrations (with the index of their work request) and
        // the region's cache entry.
        let ctx = KBox::new(op, GFP_KERNEL).map_err(|_| ENOMEM)?;
        let mut wrs: KVec<ShimWr> =
            KVec::with_capacity(plan.wrs as usize, GFP_KERNEL).map_err(|_| ENOMEM)?;
        let mut mrs: KVec<(usize, Mr, u32)> = KVec::new();
        for i in (0..plan.nchunks).filter(|&i| plan.is_missing(i)) {
            let chunk = plan.first + i as u64;
            let mr = Mr::new(&plan.pd, region, chunk, plan.lshift).map_err(|_| ENOMEM)?;
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
        // Registrations that end up unused are freed after the lock.
        let mut spare: KVec<Mr> = KVec::with_capacity(mrs.len(), GFP_KERNEL).map_err(|_| ENOMEM)?;

        let mut g = self.inner.lock();
        if !g.state.is_connected() {
            return Err(g.errno());
        }
        g.imports.check(import.entry())?;
        let inner = &mut *g;
        let Some(qp) = inner.id.as_ref().and_then(|id| id.qp()) else {
            return Err(ENOTCONN);
        };
        let Some(res) = inner.res.as_mut().filter(|r| Arc::ptr_eq(&r.pd, &plan.pd)) else {
            return Err(ENOTCONN);
        };
        if plan.wrs > inner.ops.sq_free || inner.ops.free.is_empty() {
            return Ok(Some(Posted::Full));
        }
        let rk = key(region);
        if let Some((reservation, chunks)) = node {
            if res.local.tree.get(&rk).is_none() {
                res.local.tree.insert(reservation.into_node(
                    rk,
                    LocalReg {
                        chunks,
                        _region: region.clone(),
                        inflight: 0,
                    },
                ));
            }
        }
        let Some(reg) = res.local.tree.get_mut(&rk) else {
            return Ok(None);
        };
        // Every chunk is registered, or has a registration ready to post.
        for i in 0..plan.nchunks {
            let chunk = (plan.first + i as u64) as usize;
            if reg.chunks.get(chunk).is_none() && !mrs.iter().any(|m| m.0 == chunk) {
                return Ok(None);
            }
        }
        // Build: each chunk's registration right before its first segment.
        let mut last_chunk = usize::MAX;
        for s in ops::segments(c, plan.lshift, import.chunk_shift) {
            let lc = ops::chunk_of(s.local_off, plan.lshift) as usize;
            let pending = mrs
                .iter_mut()
                .find(|m| m.0 == lc && reg.chunks.get(lc).is_none());
            let lkey = match (reg.chunks.get(lc), pending) {
                (Some(m), _) => m.lkey(),
                (None, Some(m)) => {
                    if lc != last_chunk {
                        m.2 = wrs.len() as u32;
                        // Within capacity (the plan counted it).
                        let _ = wrs.push(
                            ShimWr::reg(m.1.as_ptr(), ffi::ACCESS_LOCAL_WRITE, false),
                            GFP_KERNEL,
                        );
                    }
                    m.1.lkey()
                }
                (None, None) => return Ok(None),
            };
            last_chunk = lc;
            let rc = ops::chunk_of(s.remote_off, import.chunk_shift) as usize;
            let rkey = inner.imports.rkey(import.entry(), rc).ok_or(ENOTCONN)?;
            let opcode = match c.dir {
                Dir::Read => ffi::WR_READ,
                Dir::Write => ffi::WR_WRITE,
            };
            let _ = wrs.push(
                ShimWr::rdma(opcode, s.local_off, lkey, s.len, s.remote_off, rkey),
                GFP_KERNEL,
            );
        }
        if c.dir == Dir::Write && res.write_fence {
            if let Some(last) = wrs.last() {
                let fence = ShimWr::fence(last.remote_addr + u64::from(last.len) - 1, last.rkey);
                let _ = wrs.push(fence, GFP_KERNEL);
            }
        }
        let n = wrs.len() as u32;
        let Some(slot) = crate::compat::vec_pop(&mut inner.ops.free) else {
            return Ok(Some(Posted::Full));
        };
        if let Some(last) = wrs.last_mut() {
            last.signaled = 1;
            last.slot = slot;
        }
        inner.ops.ops[slot as usize] = Some(ctx);
        // SAFETY: every registration the requests name is in the cache (or
        // installed below once posted) and stays there while an operation
        // uses it; the remote keys belong to the peer's registrations.
        let (posted, r) = unsafe { qp.post(&wrs) };
        // Install what was posted; free the rest after the lock.
        for (chunk, mr, at) in mrs {
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
            let op = inner.ops.ops[slot as usize].take();
            let _ = inner.ops.free.push(slot, GFP_KERNEL);
            inner.ops.sq_free -= posted;
            drop(g);
            drop(op);
            drop(spare);
            let e = r.err().unwrap_or(crate::abi::errno::EIO);
            self.fail(Event::QpFatal, "cannot post an operation", e);
            return Err(e);
        }
        inner.ops.sq_free -= n;
        reg.inflight += 1;
        inner.imports.op_started(import.entry());
        drop(g);
        drop(spare);
        Ok(Some(Posted::Yes))
    }

    /// The completion of operation slot `slot` (completion context, or the
    /// teardown for what the provider never completed).
    pub(crate) fn slot_done(self: &Arc<Self>, slot: u32, wc_status: u32) {
        let (op, errno, prune) = {
            let mut g = self.inner.lock();
            let inner = &mut *g;
            let Some(op) = inner.ops.take(slot) else {
                drop(g);
                pr_debug!(
                    "second completion of slot {} (status {}) ignored\n",
                    slot,
                    wc_status
                );
                return;
            };
            let mut prune = None;
            if let Some(res) = inner.res.as_mut() {
                let k = key(&op.region);
                if let Some(r) = res.local.tree.get_mut(&k) {
                    r.inflight = r.inflight.saturating_sub(1);
                    if r.inflight == 0 && op.region.is_destroyed() {
                        prune = res.local.tree.remove(&k);
                    }
                }
            }
            inner.imports.op_done(op.entry);
            let errno = match ops::wc_errno(wc_status) {
                // Flushed: the connection ended under it.
                Some(crate::abi::errno::ECANCELED) => Some(inner.state.flush_errno()),
                e => e,
            };
            if errno.is_none() {
                // The peer's transport answered: a sign of life (our
                // control messages may wait behind the data).
                inner.keepalive.answered();
            }
            ctrl::send_due_acks(inner, &self.shared.ctrl);
            (op, errno, prune)
        };
        drop(prune);
        self.cv.notify_all();
        if errno.is_some() {
            self.wc_failed(wc_status as c_int, super::Wr::Operation);
        }
        let status = errno.map_or(0, Errno::to_errno);
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

    /// Completes, with the flush status, every operation the provider did
    /// not complete (the teardown, once the queue pair is destroyed).
    pub(super) fn flush_ops(self: &Arc<Self>) {
        for slot in 0..SLOTS_MAX {
            self.slot_done(slot, ops::wc::WR_FLUSH_ERR);
        }
    }

    /// Drops cached registrations of `region` that no operation uses
    /// (region destroyed); those in use go when their last operation does.
    pub(crate) fn forget_region(&self, region: &Arc<Region>) {
        let gone = {
            let mut g = self.inner.lock();
            let k = key(region);
            match g.res.as_mut() {
                Some(res) if res.local.tree.get(&k).is_some_and(|r| r.inflight == 0) => {
                    res.local.tree.remove(&k)
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
    ) -> Result<i32, Errno> {
        let w = SyncWait::new().map_err(|_| ENOMEM)?;
        loop {
            if let Posted::Yes = self.post_op(import, region, c, 0, opcode, Some(w.clone()))? {
                break;
            }
            // Wait for room: any completion frees some.
            let mut g = self.inner.lock();
            let before = g.ops.sq_free;
            let mut left = None;
            wait_until(&self.cv, &mut g, &mut left, |i| {
                i.ops.sq_free > before || !i.state.is_connected()
            })?;
        }
        let mut s = w.status.lock();
        let mut left = None;
        wait_until(&w.cv, &mut s, &mut left, |s| s.is_some())?;
        Ok(s.unwrap_or(0))
    }
}
