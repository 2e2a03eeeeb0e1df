// SPDX-License-Identifier: GPL-2.0

//! Data lanes: queue pairs a connection adds to its own for operations.
//!
//! The connect request offers queue pairs (`wire::qps_wanted`: one per
//! online CPU by default, and the own one) and the accept grants at most
//! that many (`wire::grant_qps`). Lanes are opened when first wanted, not
//! at establishment: an idle connection (a pool's client that has not
//! moved a block yet) holds its own queue pair only, on both sides, and a
//! small one (`limits::queue_sizes_laned`) where lanes will carry the
//! operations. The active side's first operation that may go on a lane (on
//! a disk's connection, a request moved from or to its own pages on RoCE:
//! `OnPath::Disk`) asks the lanes work to open them; the passive side's
//! first (wire version 6) has the lanes work ask the active side for them
//! (`Ctrl::LanesWanted`). Either goes on the connection's own queue pair
//! meanwhile. The active side connects each granted lane with an rdma_cm
//! id of its own, whose hello names the connection (its nonce) and the
//! lane's index. The passive side finds the connection by that nonce and
//! the peer's address (`Conn::join_lane`: a peer can join only its own
//! connections) and builds the lane's queue pair in the connection's
//! domain, so the connection's registrations serve it.
//!
//! A lane carries operations only: no receive is posted on it (a Send
//! there breaks the protocol and fails the queue pair), and control
//! messages, grants and keepalive stay on the connection's own queue pair.
//! An operation goes to the submitting CPU's lane (a disk's request: its
//! tag's) once that lane is established, else to the first lane that is,
//! else to the connection's own queue pair (`ConnInner::pick_path`), so
//! only an operation too large for a small own queue pair waits for lanes
//! (`Conn::wait_lane`): a lane that cannot be set up is logged and left
//! unused. Once established, a
//! lane's failure is its connection's: the connection ends, and its
//! teardown destroys every lane before the domain.
//!
//! A lane's id has its connection as context, like the connection's own
//! id: `Conn::cm_event` tells them apart (`ConnInner::main_id`). Lock order is
//! the connection's: a lane has no lock of its own.

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::{data::Path, setup::hello, Conn, ConnInner};
use crate::abi::{
    conn::{Action, Event},
    errno::{Errno, ECONNRESET, EINVAL, ENOENT, ENOMEM, ENOTCONN, EPROTO},
    wire::{self, Hello},
};
use crate::calling::Task;
use crate::cm_id::{CmId, InHandler};
use crate::ffi::{self, cm_event, ShimAddr};
use crate::noio::NoIoGuard;
use crate::shared::Shared;

/// The index of a lane's path that is not (or no longer) the connection's:
/// an event of an id the teardown has taken.
const GONE: usize = usize::MAX;

impl Conn {
    /// Which lane `h`'s id is, if it is not the connection's own id
    /// ([`GONE`] for a lane being torn down).
    pub(super) fn lane_of(&self, h: &InHandler) -> Option<usize> {
        let g = self.inner.lock();
        if g.main_id.map_or(true, |m| m == h.id_addr()) {
            return None;
        }
        let p = g
            .paths
            .iter()
            .position(|p| p.lane.as_ref().is_some_and(|id| id.is_handled_by(h)));
        Some(p.unwrap_or(GONE))
    }

    /// Connects the lanes the peer granted (the active side, its
    /// connection just established). A lane that cannot start is left
    /// unused (marked failed, for `Conn::wait_lane`).
    pub(super) fn open_lanes(self: &Arc<Self>, g: &mut ConnInner) {
        for lane in 1..=usize::from(g.lanes) {
            if g.paths.push(Path::new(), GFP_KERNEL).is_err() {
                // A lane's path is its index: none after it either.
                self.lane_failed(g, lane, ENOMEM);
                return;
            }
            let id = match CmId::create(self, false) {
                Ok(id) => id,
                Err(e) => {
                    self.lane_failed(g, lane, e);
                    continue;
                }
            };
            // Under the lock: the id's first event waits until it is
            // published. rdma_resolve_addr() takes no handler mutex.
            let r = id.resolve_addr(&g.peer, g.timeout_ms);
            if let Some(p) = g.paths.get_mut(lane) {
                p.lane = Some(id);
            }
            if let Err(e) = r {
                self.lane_failed(g, lane, e);
            }
        }
    }

    /// An rdma_cm event of lane `lane`'s id, in its handler `h`. Returns
    /// non-zero when the CM must destroy the id (device removal).
    pub(super) fn lane_event(
        self: &Arc<Self>,
        h: &InHandler,
        lane: usize,
        event: i32,
        status: i32,
        pdata: &[u8],
    ) -> c_int {
        let mut g = self.inner.lock();
        let Some(path) = g.paths.get(lane).filter(|p| p.lane.is_some()) else {
            // Torn down meanwhile: the teardown destroys the id (and a
            // device removal of it is that teardown's, not a new one).
            return 0;
        };
        if event == cm_event::DEVICE_REMOVAL {
            // As for the connection's own id: everything goes now, and the
            // CM destroys the id handed back.
            let action = self.advance(&mut g, Event::DeviceRemoval);
            drop(g);
            self.cv.notify_all();
            return if action == Action::Teardown {
                Self::teardown(self, Some(h))
            } else {
                0
            };
        }
        let joined = path.joined;
        let r = match event {
            cm_event::ADDR_RESOLVED => {
                let t = g.timeout_ms;
                match g.paths.get(lane).and_then(|p| p.lane.as_ref()) {
                    Some(id) => id.resolve_route(t),
                    None => Err(ENOTCONN),
                }
            }
            cm_event::ROUTE_RESOLVED => return self.connect_lane(h, g, lane),
            cm_event::ESTABLISHED => {
                let ok = !self.active
                    || Hello::decode(pdata)
                        .is_ok_and(|a| a.lane == Some(lane as u16) && a.version == g.version);
                if !ok {
                    Err(EPROTO)
                } else if let Some(p) = g.paths.get_mut(lane) {
                    p.up = true;
                    p.joined = true;
                    self.shared.work.lane_up();
                    // An operation too large for the own queue pair may
                    // wait for it (`Conn::wait_lane`).
                    self.cv.notify_all();
                    Ok(())
                } else {
                    Err(ENOTCONN)
                }
            }
            cm_event::DISCONNECTED if joined => {
                // The peer closes: as on the connection's own id.
                drop(g);
                self.end(Event::Disconnected, || {});
                return 0;
            }
            cm_event::ADDR_ERROR
            | cm_event::ROUTE_ERROR
            | cm_event::UNREACHABLE
            | cm_event::CONNECT_ERROR
            | cm_event::DISCONNECTED => Err(Errno::new(-status).unwrap_or(ECONNRESET)),
            cm_event::REJECTED => Err(wire::decode_reject(pdata).unwrap_or(ECONNRESET)),
            _ => Ok(()),
        };
        if let Err(e) = r {
            self.lane_failed(&mut g, lane, e);
        }
        0
    }

    /// The lane's route is resolved: builds its queue pair and connects
    /// with a hello that names the connection.
    fn connect_lane(
        self: &Arc<Self>,
        h: &InHandler,
        mut g: NoIoGuard<'_, ConnInner>,
        lane: usize,
    ) -> c_int {
        if !g.state.is_connected() || g.stopped {
            // Ending: the teardown destroys the lane.
            return 0;
        }
        let taken = self.lane_qp(&mut g, lane).and_then(|()| {
            g.paths
                .get_mut(lane)
                .and_then(|p| p.lane.take())
                .ok_or(ENOTCONN)
        });
        let id = match taken {
            Ok(id) => id,
            Err(e) => {
                self.lane_failed(&mut g, lane, e);
                return 0;
            }
        };
        let hello = Hello {
            lane: Some(lane as u16),
            ..hello(g.version, g.lanes + 1, g.nonce, None)
        }
        .encode();
        // Without the lock, as the connection's own connect: the teardown
        // waits for `connecting`.
        g.connecting = true;
        drop(g);
        let r = id.connect_locked(h, &hello);
        let mut g = self.inner.lock();
        g.connecting = false;
        match g.paths.get_mut(lane) {
            Some(p) => p.lane = Some(id),
            // The teardown waited for `connecting`.
            None => {
                drop(g);
                ffi::internal_error!(
                    "lane {} of connection {} vanished while it connected\n",
                    lane,
                    self.serial
                );
                drop(id);
                self.cv.notify_all();
                return 0;
            }
        }
        if let Err(e) = r {
            self.lane_failed(&mut g, lane, e);
        } else if !g.state.is_connected() || g.stopped {
            // The connection failed while this lane connected (its id was
            // out of the path): it stops as the others did.
            g.stop_qps(self.serial);
        }
        drop(g);
        self.cv.notify_all();
        0
    }

    /// A receive of queue pair `lane` failed with `wc_status` (a flush: the
    /// queue pair is in the error state). A lane that joined its
    /// connection fails it, as the connection's own queue pair does; one
    /// the active side has not seen established is the CM's to end (a
    /// reject moves its queue pair to the error state first).
    pub(crate) fn recv_failed(self: &Arc<Self>, t: &Task, lane: usize, wc_status: c_int) {
        if lane != 0 && !self.inner.lock().paths.get(lane).is_some_and(|p| p.joined) {
            return;
        }
        self.wc_failed(t, wc_status, super::FailedWr::Receive);
    }

    /// A Send arrived on lane `lane`: the peer broke the protocol.
    pub(crate) fn lane_recv(self: &Arc<Self>, lane: usize) {
        self.fail_with(Event::QpFatal, || {
            pr_warn!(
                "connection {} closing: a Send arrived on its data lane {} (errno {})\n",
                self.serial,
                lane,
                EPROTO.get()
            )
        });
    }

    /// Builds lane `lane`'s queue pair on its id, in the connection's
    /// domain.
    fn lane_qp(self: &Arc<Self>, g: &mut ConnInner, lane: usize) -> Result<(), Errno> {
        let res = g.res.as_ref().ok_or(ENOTCONN)?;
        let sizes = crate::verbs::QpSizes {
            lane: lane as u32,
            ..res.lane_sizes
        };
        let pd = res.pd.clone();
        let path = g.paths.get_mut(lane).ok_or(ENOTCONN)?;
        let id = path.lane.as_mut().ok_or(ENOTCONN)?;
        id.create_qp(&pd, &sizes)?;
        self.reset_path(lane, sizes.ops, sizes.sinks, sizes.fence_sinks)
    }

    /// Lane `lane` failed with `e`: one that joined its connection ends it;
    /// one the active side has not seen established is left unused (its id
    /// stays until the teardown).
    fn lane_failed(self: &Arc<Self>, g: &mut ConnInner, lane: usize, e: Errno) {
        if g.paths.get(lane).is_some_and(|p| p.joined) {
            let action = self.advance(g, Event::QpFatal);
            if action == Action::Teardown {
                if ffi::ratelimit() {
                    pr_warn!(
                        "connection {} closing: lane {} failed (errno {})\n",
                        self.serial,
                        lane,
                        e.get()
                    );
                }
                self.schedule_teardown();
            }
            return;
        }
        if let Some(p) = g.paths.get_mut(lane) {
            p.failed = true;
        }
        // An operation waiting for a lane may have none left to wait for.
        self.cv.notify_all();
        if g.state.is_connected() && ffi::ratelimit() {
            pr_warn!(
                "connection {}: lane {} not set up (errno {}); its operations use the other queue pairs\n",
                self.serial,
                lane,
                e.get()
            );
        }
    }

    /// A lane's connect request (the listener's handler `h`, whose new id
    /// it is): joins the connection of `peer` named by `hello`'s nonce.
    /// Returns the context the new id must carry; on error the caller
    /// rejects with the errno and the CM destroys the id. `ENOENT`: no such
    /// connection of this peer, a lane beyond the grant, or one already
    /// there.
    pub(crate) fn join_lane(
        shared: &Arc<Shared>,
        h: &InHandler,
        hello: &Hello,
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<*mut kernel::ffi::c_void, Errno> {
        let lane = hello.lane.ok_or(EINVAL)?;
        let version = wire::negotiate(hello.version)?;
        let peer = h.peer();
        let conns = shared.conns().map_err(|_| ENOMEM)?;
        for c in conns.iter() {
            if let Some(r) = c.accept_lane(
                h,
                &peer,
                hello.nonce,
                version,
                lane,
                peer_initiator,
                peer_responder,
            ) {
                return r;
            }
        }
        Err(ENOENT)
    }

    /// [`Self::join_lane`] on this connection: `None` if it is not the one
    /// named.
    #[allow(clippy::too_many_arguments)]
    fn accept_lane(
        self: &Arc<Self>,
        h: &InHandler,
        peer: &ShimAddr,
        nonce: u64,
        version: u16,
        lane: u16,
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Option<Result<*mut kernel::ffi::c_void, Errno>> {
        if self.active {
            return None;
        }
        let mut g = self.inner.lock();
        if g.nonce != nonce || !g.peer.same_host(peer) || g.state.is_finished() {
            return None;
        }
        let r = self.accept_lane_locked(&mut g, h, version, lane, peer_initiator, peer_responder);
        drop(g);
        Some(r.map_err(|(e, id)| {
            // Handed back once the lock is released: handing it back
            // drains the lane's queue pair, and the flush of its tripwire
            // receive takes the lock (`recv_failed`).
            if let Some(id) = id {
                let _ = id.into_cm(h);
            }
            e
        }))
    }

    /// [`Self::accept_lane`] under the connection's lock. On error, the
    /// lane's id if one was adopted, for the caller to hand back to the
    /// CM once the lock is released.
    #[allow(clippy::type_complexity)]
    fn accept_lane_locked(
        self: &Arc<Self>,
        g: &mut ConnInner,
        h: &InHandler,
        version: u16,
        lane: u16,
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<*mut kernel::ffi::c_void, (Errno, Option<CmId<Conn>>)> {
        if version != g.version {
            return Err((EPROTO, None));
        }
        let l = usize::from(lane);
        if lane > g.lanes || g.paths.get(l).is_some_and(|p| p.lane.is_some()) {
            return Err((ENOENT, None));
        }
        while g.paths.len() <= l {
            g.paths
                .push(Path::new(), GFP_KERNEL)
                .map_err(|_| (ENOMEM, None))?;
        }
        let Some(p) = g.paths.get_mut(l) else {
            return Err((ENOENT, None));
        };
        let id = CmId::adopt(h, self);
        let ctx = id.context();
        p.lane = Some(id);
        // Its failure is the connection's from its accept on: the peer may
        // use it before the CM reports it established.
        p.joined = true;
        let hello = Hello {
            lane: Some(lane),
            ..hello(version, g.lanes + 1, g.nonce, None)
        }
        .encode();
        let accepted = self
            .lane_qp(g, l)
            .and_then(|()| ffi::fail_at(ffi::FailAt::LaneAccept))
            .and_then(|()| match g.paths.get(l).and_then(|p| p.lane.as_ref()) {
                Some(id) => id.accept(h, &hello, peer_initiator, peer_responder),
                None => Err(ENOTCONN),
            });
        if let Err(e) = accepted {
            // Not joined any more: a flush of its queue pair from now on
            // is not the connection's failure. The caller hands the id
            // back (the CM destroys it when we reject).
            let id = g.paths.get_mut(l).and_then(|p| {
                p.joined = false;
                p.lane.take()
            });
            let _ = self.reset_path(l, 0, 0, 0);
            return Err((e, id));
        }
        Ok(ctx)
    }
}
