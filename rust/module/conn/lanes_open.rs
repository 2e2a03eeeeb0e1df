// SPDX-License-Identifier: GPL-2.0

//! When a connection's data lanes open (`lanes.rs` connects them): at the
//! first operation that could take one, on the active side; at the passive
//! side's first (wire version 6), which asks the active side for them
//! (`Ctrl::LanesWanted`) through the lanes work; or at the active side's
//! establishment, when that ask came first. An operation larger than the
//! connection's small own queue pair takes waits for the first lane
//! ([`Conn::wait_lane`]).

use core::sync::atomic::Ordering;

use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, WorkItem};

use super::{ctrl::answer, deadline, imports::Import, wait_until, Conn, ConnInner};
use crate::abi::errno::{Errno, EAGAIN, ENOSPC, ETIMEDOUT};
use crate::abi::{
    ops,
    wire::{self, Ctrl},
};
use crate::ffi::{self, warn_user};
use crate::noio::NoIoGuard;

/// How long an operation waits for a lane at most (`Conn::wait_lane`): the
/// passive side cannot tell that the active side's lanes failed.
const LANE_WAIT_MS: u32 = 10_000;

impl_has_work! {
    impl HasWork<Self, 4> for Conn { self.lanes_work }
}

/// Opens the lanes an operation asked for ([`Conn::path_for_ops`]).
impl WorkItem<4> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::scoped(this, |this| {
            let mut g = this.inner.lock();
            // Still established, and not opened since (a reconnect in
            // between asks again with its own first operation).
            if !(g.state.is_connected() && g.paths.len() == 1 && g.lanes > 0) {
                return;
            }
            if this.active {
                this.open_lanes(&mut g);
            } else if let Err(e) = answer(&mut g, &this.shared.ctrl, Ctrl::LanesWanted) {
                // The next operation asks again; this one stays on the
                // connection's own queue pair, or waits for a lane
                // (`Conn::wait_lane`) until it times out.
                g.lanes_deferred = true;
                crate::ffi::warn_user!("cannot ask the peer for data lanes: errno {}\n", e.get());
            }
        });
    }
}

impl Conn {
    /// Whether this connection's first operation has its lanes opened:
    /// any granted on the active side; on the passive side, those a peer
    /// that takes [`Ctrl::LanesWanted`] granted (`g.version` is the
    /// negotiated one from the connect request on).
    pub(super) fn ops_open_lanes(&self, g: &ConnInner) -> bool {
        g.lanes > 0 && (self.active || g.version >= wire::LANES_WANTED_VERSION)
    }

    /// The passive side asks for the lanes ([`Ctrl::LanesWanted`]): the
    /// active side opens them as for its own first operation, once, or at
    /// its establishment if the ask came first (on iWARP the passive side
    /// is established first, and a receive can be handled before the
    /// active side's event); `false` if this side is the passive one (the
    /// peer broke the protocol).
    pub(super) fn lanes_wanted(self: &Arc<Self>) -> bool {
        if !self.active {
            return false;
        }
        if self.shared.backs_disk() {
            // A disk opens the lanes its requests use itself (none on
            // iWARP): the peer cannot tell it is one.
            return true;
        }
        let mut g = self.inner.lock();
        match g.state.is_connected() {
            true => self.open_deferred_lanes(&mut g),
            false => g.lanes_asked = true,
        }
        true
    }

    /// Has the lanes work open the lanes if they wait for a first
    /// operation (once per establishment).
    pub(super) fn open_deferred_lanes(self: &Arc<Self>, g: &mut ConnInner) {
        if g.lanes_deferred {
            g.lanes_deferred = false;
            // Queued already: that run opens them.
            let _ = ffi::wq().enqueue::<Arc<Conn>, 4>(self.clone());
        }
    }

    /// The path an operation submitted now on `cpu` takes (or a disk's
    /// request with tag `cpu`, `OnPath::Disk`; `ConnInner::pick_path`);
    /// the first after an establishment with lanes granted asks for them.
    pub(super) fn path_for_ops(self: &Arc<Self>, g: &mut ConnInner, cpu: u32) -> usize {
        self.open_deferred_lanes(g);
        g.pick_path(cpu)
    }
}

impl Conn {
    /// Records what the own queue pair just set up takes of one operation:
    /// `budget` work requests, with local chunks of 2^`chunk_shift` bytes
    /// (on iWARP if `iwarp`), for [`Conn::own_takes`].
    pub(super) fn set_own_fits(&self, budget: u32, chunk_shift: u32, iwarp: bool) {
        let v = u64::from(budget) | u64::from(chunk_shift) << 32 | u64::from(iwarp) << 40;
        self.own_fits.store(v, Ordering::Relaxed);
    }

    /// Whether the own queue pair takes an operation of `len` bytes whose
    /// remote chunks are 2^`remote_shift` bytes (no lock: a reconnect that
    /// changed it meanwhile makes the post say `EAGAIN`); yes before it
    /// exists (the post reports that).
    pub(super) fn own_takes(&self, len: u64, remote_shift: u32) -> bool {
        let v = self.own_fits.load(Ordering::Relaxed);
        v == 0
            || ops::max_wrs(len, (v >> 32) as u8 as u32, remote_shift, v >> 40 != 0)
                <= u64::from(v as u32)
    }
}

impl ConnInner {
    /// An operation of `len` bytes on an import whose exporter's chunks
    /// are 2^`remote_shift` bytes has no queue pair to go on: it may take
    /// more work requests than the own queue pair's operation entries
    /// (`Resources::own_budget`), and no lane is up.
    fn lacks_lane(&self, len: u64, remote_shift: u32) -> bool {
        self.res.as_ref().is_some_and(|r| {
            ops::max_wrs(len, r.chunk_shift, remote_shift, r.iwarp) > u64::from(r.own_budget)
        }) && self.lane_up().is_none()
    }

    /// No lane will come: the peer granted none, or each failed to set up
    /// (on the active side; the passive side cannot tell, and stops
    /// waiting for this establishment's after one wait timed out).
    fn lanes_lost(&self, active: bool) -> bool {
        self.lanes == 0
            || self.lanes_timed_out
            || (active
                && self.paths.len() > usize::from(self.lanes)
                && self.paths.iter().skip(1).all(|p| p.failed))
    }
}

impl Conn {
    /// A `SUBMIT` found the connection's small own queue pair full before
    /// any lane was up: waits (interruptibly, at most [`LANE_WAIT_MS`]) for
    /// the first lane, asking for them. `true` if one is up now, perhaps
    /// since the post (the rest of the `SUBMIT` goes there); `false` where
    /// the own queue pair is not a small one, or no lane came.
    pub(crate) fn wait_lane_for_room(self: &Arc<Self>) -> bool {
        let mut g = self.inner.lock();
        let small = g.res.as_ref().is_some_and(|r| r.own_small);
        if !small || !g.state.is_connected() {
            return false;
        }
        if g.lane_up().is_some() {
            return true;
        }
        // Interrupted: what was posted is the call's answer.
        let _ = self.await_lane(&mut g);
        g.state.is_connected() && g.lane_up().is_some()
    }

    /// Asks for the lanes and waits (interruptibly, at most
    /// [`LANE_WAIT_MS`]) until one is up, none will come or the connection
    /// ends; `ERESTARTSYS` on a signal. A wait that times out is not
    /// waited again until the next establishment (`lanes_timed_out`).
    fn await_lane(self: &Arc<Self>, g: &mut NoIoGuard<'_, ConnInner>) -> Result<(), Errno> {
        self.open_deferred_lanes(g);
        let mut left = deadline(LANE_WAIT_MS);
        match wait_until(&self.cv, g.guard(), &mut left, |i| {
            !i.state.is_connected() || i.lane_up().is_some() || i.lanes_lost(self.active)
        }) {
            Err(e) if e == ETIMEDOUT => {
                g.lanes_timed_out = true;
                Ok(())
            }
            r => r,
        }
    }

    /// Waits (interruptibly, at most [`LANE_WAIT_MS`]) until an operation
    /// of `len` bytes on `import`, larger than its connection's own queue
    /// pair takes, has a lane to go on, asking for the lanes first;
    /// `EAGAIN` instead of a wait unless `block`. `ENOSPC` (logged) when
    /// no lane will come or none came in time. A connection that ends
    /// meanwhile is left to the post to report.
    pub(crate) fn wait_lane(
        self: &Arc<Self>,
        import: &Import,
        len: u64,
        block: bool,
    ) -> Result<(), Errno> {
        let shift = import.chunk_shift;
        let mut g = self.inner.lock();
        if !g.lacks_lane(len, shift) {
            return Ok(());
        }
        if !g.lanes_lost(self.active) && !block {
            self.open_deferred_lanes(&mut g);
            return Err(EAGAIN);
        }
        let r = self.await_lane(&mut g);
        if !g.state.is_connected() || !g.lacks_lane(len, shift) {
            return Ok(());
        }
        r?;
        let (lanes, tried, budget) = (
            g.lanes,
            g.paths.len() - 1,
            g.res.as_ref().map_or(0, |r| r.own_budget),
        );
        drop(g);
        warn_user!(
            "connection {}: an operation of {} bytes needs a data lane (its own queue pair takes {} work requests), and none is up: {} granted, {} tried (errno {})\n",
            self.serial,
            len,
            budget,
            lanes,
            tried,
            ENOSPC.get()
        );
        Err(ENOSPC)
    }
}
