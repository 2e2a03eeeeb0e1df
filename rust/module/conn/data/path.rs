// SPDX-License-Identifier: GPL-2.0

//! A connection's paths: path 0 is its own queue pair, the others its data
//! lanes. Each has its data state ([`PathData`]: slots, work-request
//! scratch, registration cache) under a softirq-safe lock of its own; the
//! path an operation takes; a path's reset for a new queue pair, its data
//! state's (path 0) and its sinks' allocation at its first operation, and
//! its teardown.

use super::*;

/// A path of a connection: path 0 is the connection's own queue pair,
/// the others are its data lanes (`lanes.rs`), under the connection's
/// lock. Its data state is under a lock of its own ([`PathData`]).
pub(in crate::conn) struct Path {
    /// A lane's id with its queue pair (`None` for path 0, whose are the
    /// connection's, and for a lane being torn down).
    pub(in crate::conn) lane: Option<CmId<Conn>>,
    /// A lane's connection is established: operations may use it (path
    /// 0 goes with its connection's state).
    pub(in crate::conn) up: bool,
    /// A lane's failure is its connection's: accepted (passive side) or
    /// established (active side).
    pub(in crate::conn) joined: bool,
    /// A lane that could not be set up (active side): left unused.
    pub(in crate::conn) failed: bool,
    /// Path 0's sizes while its data state waits for the path's first
    /// operation ([`Conn::ready_path`]): an idle connection holds none of
    /// it (about 50 KiB of slots and work-request scratch).
    pending: Option<PathSizes>,
}

/// What a path's data state is sized for: its queue pair's operation
/// entries, READ sinks and fence sinks ([`Slots::reset`]).
#[derive(Clone, Copy)]
struct PathSizes {
    depth: u32,
    sinks: u32,
    fences: u32,
}

impl Path {
    /// A path without a queue pair yet.
    pub(in crate::conn) fn new() -> Self {
        Self {
            lane: None,
            up: false,
            joined: false,
            failed: false,
            pending: None,
        }
    }
}

/// The data state of one path: its operation slots, work-request scratch
/// and local registrations. A registration's work request orders only the
/// requests of its own queue pair after it, so a registration made on one
/// path is not used on another. Under the path's lock ([`PathLock`]),
/// which posting takes under the connection's and a completion alone.
pub(in crate::conn) struct PathData {
    pub(super) slots: Slots,
    /// Where an operation's work requests are built, under the path's
    /// lock (room for [`WRS_MAX`]: posting allocates nothing).
    pub(super) wr_scratch: ffi::WrScratch,
    pub(super) local: LocalRegs,
}

impl PathData {
    pub(super) fn new() -> Result<KBox<Self>> {
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
/// after the teardown dropped a lane's. Order: after `Conn::inner`
/// (posting) or the shim's `poll_lock` (a poll's completions), or alone;
/// before `Shared::ring`, `SyncWait::status` and the shim queue pair's
/// spinlock; never two paths' at once. Nothing sleeps under it.
pub(in crate::conn) type PathLock = BhLock<Option<KBox<PathData>>>;

/// The locks of a connection's paths, one for each queue pair it may have
/// ([`wire::QPS_MAX`]), each without its data state yet.
pub(in crate::conn) fn path_locks() -> Result<KVec<Pin<KBox<PathLock>>>> {
    let n = usize::from(wire::QPS_MAX);
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    for _ in 0..n {
        v.push(
            KBox::pin_init(new_bh_lock!(None, "Conn::paths"), GFP_KERNEL)?,
            GFP_KERNEL,
        )?;
    }
    Ok(v)
}

/// Disconnects (`disconnect`: not in a CM handler of theirs) and moves
/// the queue pair of each of `ids` to the error state: from the return
/// nothing the peer sends there is placed in our memory. A queue pair
/// that cannot be stopped is logged (rate-limited): the teardown's drain
/// still stops it. Not inlined: `Conn::teardown`'s frame stays small
/// (1992 of 2048 bytes on 7.3). Sleeps.
#[inline(never)]
pub(in crate::conn) fn stop_each<'a>(
    serial: u64,
    ids: impl Iterator<Item = &'a CmId<Conn>>,
    disconnect: bool,
) {
    for id in ids {
        if disconnect {
            id.disconnect();
        }
        if let Some(Err(e)) = id.qp().map(crate::verbs::Qp::stop) {
            if ffi::ratelimit() {
                pr_warn!(
                    "connection {}: cannot stop a queue pair (errno {})\n",
                    serial,
                    e.get()
                );
            }
        }
    }
}

impl crate::conn::ConnInner {
    /// Moves every queue pair of the connection `serial` to the error
    /// state now (the drain comes with the teardown; [`stop_each`]), and
    /// keeps a lane that connects later from placing anything either
    /// (`stopped`). Sleeps.
    pub(in crate::conn) fn stop_qps(&mut self, serial: u64) {
        self.stopped = true;
        let lanes = self.paths.iter().filter_map(|p| p.lane.as_ref());
        stop_each(serial, Iterator::chain(self.id.iter(), lanes), false);
    }

    /// The path an operation submitted on `cpu` takes (a disk's request:
    /// `cpu` is its tag): lane `cpu` modulo the paths, if that lane is up,
    /// else the connection's own queue pair; where that one is small, the
    /// lanes alone share the CPUs, and a CPU whose lane is not up takes
    /// the first lane that is (the small queue pair has room for few
    /// operations, and none for a large one: `Conn::wait_lane`).
    pub(in crate::conn) fn pick_path(&self, cpu: u32) -> usize {
        let n = self.paths.len();
        if n <= 1 {
            return 0;
        }
        let small = self.res.as_ref().is_some_and(|r| r.own_small);
        let p = match small {
            true => 1 + cpu as usize % (n - 1),
            false => cpu as usize % n,
        };
        if self.paths.get(p).is_some_and(|x| x.up) {
            p
        } else if small {
            self.lane_up().unwrap_or(0)
        } else {
            0
        }
    }

    /// The first data lane that is up.
    pub(in crate::conn) fn lane_up(&self) -> Option<usize> {
        self.paths.iter().skip(1).position(|x| x.up).map(|i| i + 1)
    }
}

/// Path `p`'s queue pair: the connection's own (`conn_id`'s) for path 0,
/// else its lane's (`lane`).
pub(super) fn path_qp<'a>(
    p: usize,
    conn_id: &'a Option<CmId<Conn>>,
    lane: &'a Option<CmId<Conn>>,
) -> Option<&'a crate::verbs::Qp> {
    let id = if p == 0 { conn_id } else { lane };
    id.as_ref().and_then(|id| id.qp())
}

impl Conn {
    /// Path `p`'s lock (`None` past [`wire::QPS_MAX`]).
    pub(super) fn path(&self, p: usize) -> Option<&PathLock> {
        self.path_data.get(p).map(|l| &**l)
    }

    /// Gives path `p` a new queue pair's `depth` operation entries,
    /// `sinks` READ sinks and `fences` fence sinks (none: 0), allocating
    /// its data state at its first queue pair (under the connection's
    /// lock, which keeps paths from being set up twice at once); a path
    /// without one that loses its queue pair (`depth` 0) gets none.
    pub(in crate::conn) fn reset_path(
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

    /// Sizes path 0 for the connection's new queue pair (`depth` 0: it has
    /// none now). A path with its data state is reset now; one without
    /// gets it at its first operation ([`Self::ready_path`]), unless the
    /// connection backs a disk, whose requests allocate nothing.
    pub(in crate::conn) fn size_path0(
        &self,
        g: &mut crate::conn::ConnInner,
        depth: u32,
        sinks: u32,
        fences: u32,
    ) -> Result<(), Errno> {
        let have = self.path(0).is_some_and(|l| l.lock().is_some());
        let x = g.paths.get_mut(0).ok_or(ENOTCONN)?;
        x.pending = None;
        if have || depth == 0 || self.shared.backs_disk() {
            return self.reset_path(0, depth, sinks, fences);
        }
        x.pending = Some(PathSizes {
            depth,
            sinks,
            fences,
        });
        Ok(())
    }

    /// Gives path `p` its data state at its first operation, if it waits
    /// for one ([`Self::size_path0`]) and the connection takes operations
    /// (else the operation is refused with its state's errno, and nothing
    /// is allocated). `ENOMEM` refuses that operation and leaves the path
    /// waiting.
    pub(super) fn ready_path(&self, g: &mut crate::conn::ConnInner, p: usize) -> Result<(), Errno> {
        if !g.state.is_connected() {
            return Ok(());
        }
        let Some(s) = g.paths.get(p).and_then(|x| x.pending) else {
            return Ok(());
        };
        self.reset_path(p, s.depth, s.sinks, s.fences)?;
        if let Some(x) = g.paths.get_mut(p) {
            x.pending = None;
        }
        Ok(())
    }

    /// Allocates path `p`'s READ and fence sinks (iWARP) unless they are,
    /// at its queue pair's first operation: outside the lock (`g` is
    /// released and taken again), under a poll reference that the queue
    /// pair's teardown waits for. `ENOMEM` when the device's registrations
    /// are all taken. A queue pair that replaced this one meanwhile (a
    /// reconnect) gets its own at its first operation.
    pub(super) fn ready_sinks<'g>(&'g self, g: &mut InnerGuard<'g>, p: usize) -> Result<(), Errno> {
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

    /// Drops every path's registrations, and the lanes' paths, one path at
    /// a time outside the locks (the teardown, once every queue pair is
    /// destroyed and every operation completed).
    pub(in crate::conn) fn drop_paths(&self) {
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
}
