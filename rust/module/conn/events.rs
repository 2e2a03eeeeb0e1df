// SPDX-License-Identifier: GPL-2.0

//! The rdma_cm events of a connection's own id: each becomes an event of the
//! state machine (`Conn::advance`, the one gate), and the action it asks
//! for runs here (resolve the route, build the queue pair and connect, the
//! connection ready, the teardown). A lane's id has its own events
//! (`lanes.rs`).

use kernel::ffi::c_int;
use kernel::sync::Arc;

use super::{setup::hello, Conn};
use crate::abi::{
    conn::{Action, Event},
    errno::ENOTCONN,
    wire::{self, Hello},
};
use crate::cm_id::InHandler;
use crate::ffi::{self, cm_event};

impl Conn {
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
                // offered (`ConnInner::lanes` until now).
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
                        // A hostile peer can send these at will.
                        crate::ffi::warn_user!(
                            "peer's handshake reply is malformed: errno {}\n",
                            e.get()
                        );
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
        let mut action = self.advance(&mut g, ev);
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
                    action = self.advance(&mut g, Event::RouteError(e.to_errno()));
                }
            }
            Action::Connect => {
                // The offer, before the queue pair: its size depends on it.
                let qps = wire::qps_wanted(ffi::queue_pairs(), !self.shared.backs_disk());
                g.lanes = qps - 1;
                // An ask of a failed attempt's peer is not this one's.
                g.lanes_asked = false;
                let taken = self
                    .setup_qp(&mut g)
                    .and_then(|()| g.id.take().ok_or(ENOTCONN));
                let r = match taken {
                    Ok(id) => {
                        g.connecting = true;
                        g.nonce = ffi::random_u64();
                        let replaces = g.reconnect.as_ref().and_then(|r| r.replaces);
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
                    action = self.advance(&mut g, Event::ConnectError(e.to_errno()));
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
                // The first operation that could use a lane opens them
                // (`lanes.rs`): an idle connection holds one queue pair.
                g.lanes_deferred = self.ops_open_lanes(&g);
                g.lanes_timed_out = false;
                if core::mem::take(&mut g.lanes_asked) {
                    self.open_deferred_lanes(&mut g);
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
}
