// SPDX-License-Identifier: GPL-2.0

//! Setting a connection up: the active side (CONNECT: resolve, route,
//! connect, with retries for a taken local port), the passive side (a
//! listener's connect request) and the resources both build once a device
//! is known (PD, queue pair, control buffers).

use kernel::sync::Arc;

use super::reconnect::{Reconnect, Retry};
use super::{
    data, deadline, grants, keepalive, wait_until, Conn, ConnInner, Resources, CONNECT_ATTEMPTS,
    CTRL_RECV, DEFAULT_TIMEOUT_MS,
};
use crate::abi::Result;
use crate::abi::{
    conn::{Action, Event, State},
    errno::{Errno, EADDRINUSE, EADDRNOTAVAIL, ENODEV, ENOENT, ENOMEM, ENOTCONN, ETIMEDOUT},
    keepalive::Settings,
    limits, ops,
    wire::{self, Hello, CTRL_LEN},
};
use crate::cm_id::{CmId, InHandler};
use crate::ffi::{self, warn_user, ShimAddr};
use crate::listener::Listener;
use crate::shared::Shared;
use crate::verbs::{Pd, QpSizes};

impl Conn {
    /// Connects to `addr`; waits until established or failed. A local port
    /// that the transport finds taken (siw binds a TCP socket to the port
    /// rdma_cm chose, which rdma_cm's own port space does not know) is
    /// retried with a new id; `EADDRNOTAVAIL` if no free port is found.
    pub(crate) fn connect(
        shared: &Arc<Shared>,
        addr: &ShimAddr,
        timeout_ms: u32,
        keepalive: Option<Settings>,
        reconnect: Retry,
    ) -> Result<Arc<Self>, Errno> {
        let mut last = EADDRNOTAVAIL;
        for _ in 0..CONNECT_ATTEMPTS {
            match Self::connect_once(shared, addr, timeout_ms, keepalive, reconnect) {
                Err(e) if e == EADDRINUSE || e == EADDRNOTAVAIL => last = e,
                r => return r,
            }
        }
        crate::ffi::warn_user!(
            "CONNECT: no usable local port after {} attempts (errno {})\n",
            CONNECT_ATTEMPTS,
            last.get()
        );
        Err(EADDRNOTAVAIL)
    }

    fn connect_once(
        shared: &Arc<Shared>,
        addr: &ShimAddr,
        timeout_ms: u32,
        keepalive: Option<Settings>,
        reconnect: Retry,
    ) -> Result<Arc<Self>, Errno> {
        let this = Self::new(
            shared.clone(),
            true,
            State::Resolving,
            timeout_ms,
            keepalive,
            Reconnect::new(*addr, reconnect),
        )
        .map_err(|_| ENOMEM)?;
        shared.register(&this, Some("CONNECT"))?;
        ffi::trace::conn_new(this.serial, addr, true, shared.backs_disk());
        let started = CmId::create(&this, false).and_then(|id| {
            let mut g = this.inner.lock();
            // Held across the call: the id's first event waits until the id
            // is published. rdma_resolve_addr() takes no handler mutex.
            let r = id.resolve_addr(addr, timeout_ms);
            g.install_id(id);
            r
        });
        if let Err(e) = started {
            Self::destroy(&this, Event::AddrError(e.to_errno()));
            return Err(e);
        }
        let mut left = deadline(timeout_ms);
        let waited = {
            let mut g = this.inner.lock();
            // Established once is enough (with reconnect it may have
            // failed and be attempting again by the time this wakes).
            wait_until(&this.cv, g.guard(), &mut left, |i| {
                i.state.is_connected() || i.state.is_finished() || i.was_established()
            })
            .map(|()| g.state.connect_result(g.was_established()))
        };
        match waited {
            Ok(Ok(())) => Ok(this),
            Ok(Err(e)) => {
                Self::destroy(&this, Event::UserClose);
                Err(e)
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

    /// Adopts the connect request whose new id `h` handles (the listener's
    /// handler): checks the handshake, builds the queue pair and accepts.
    /// Returns the connection and the context the new id must carry; on
    /// error the caller rejects with the errno and the CM destroys the id.
    pub(crate) fn accept_request(
        shared: &Arc<Shared>,
        listener: &Arc<Listener>,
        h: &InHandler,
        pdata: &[u8],
        peer_initiator: u8,
        peer_responder: u8,
    ) -> Result<(Arc<Self>, *mut kernel::ffi::c_void), Errno> {
        let peer_hello = Hello::decode(pdata)?;
        let version = wire::negotiate(peer_hello.version)?;
        if peer_hello.lane.is_some() {
            // The listener sends lanes to `join_lane`.
            return Err(ENOENT);
        }
        if let Some(nonce) = peer_hello.replaces {
            // The reconnect's fence: its previous connection ends first.
            shared.end_replaced(&h.peer(), nonce)?;
        }
        let this = Self::new(
            shared.clone(),
            false,
            State::Accepting,
            DEFAULT_TIMEOUT_MS,
            keepalive::accepted_settings(),
            None,
        )
        .map_err(|_| ENOMEM)?;
        // Registered before anything can tear it down, so that the
        // teardown always unregisters it.
        // The listener's line says why it refused.
        shared.register(&this, None)?;
        ffi::trace::conn_new(this.serial, &h.peer(), false, false);
        // Kept on success (the handler returns 0), handed back to the CM by
        // the teardown on failure.
        let id = CmId::adopt(h, &this);
        let mut g = this.inner.lock();
        g.install_id(id);
        g.listener = Some(listener.clone());
        g.version = version;
        g.nonce = peer_hello.nonce;
        let own_small = version >= wire::LANES_WANTED_VERSION && !shared.backs_disk();
        let qps = wire::grant_qps(peer_hello.qps, version, ffi::queue_pairs_granted(own_small));
        g.lanes = qps - 1;
        let hello = hello(version, qps, ffi::random_u64(), None).encode();
        let accepted = this
            .setup_qp(&mut g)
            .and_then(|()| ffi::fail_at(ffi::FailAt::Accept))
            .and_then(|()| match g.id.as_ref() {
                Some(id) => id.accept(h, &hello, peer_initiator, peer_responder),
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
                let action = this.advance(&mut g, Event::ConnectError(e.to_errno()));
                drop(g);
                if action == Action::Teardown {
                    // In the handler: the CM destroys the id we hand back.
                    Self::teardown(&this, Some(h));
                }
                Err(e)
            }
        }
    }

    /// Builds the queue pair on the id's device (route resolved, or a
    /// request being accepted).
    pub(super) fn setup_qp(self: &Arc<Self>, g: &mut ConnInner) -> Result<(), Errno> {
        let disk = self.shared.backs_disk();
        // Data lanes carry the operations of a file's connection once they
        // are up (either side's first operation has them opened), so its
        // own queue pair needs only a few slots for the ones before. A
        // disk's keeps its full queue: iWARP and staged requests stay on it.
        let laned = self.ops_open_lanes(g) && !disk;
        let dev = g.id.as_ref().ok_or(ENOTCONN)?.device();
        let device = self
            .shared
            .context
            .find_device(dev)
            .filter(|d| d.usable())
            .ok_or(ENODEV)?;
        // Registered for removal before the device is used.
        device.add_conn(self)?;
        g.device = Some(device.clone());
        let id = g.id.as_mut().ok_or(ENOTCONN)?;
        let pd = Pd::new(&device)?;
        let limits = *device.limits();
        let iwarp = device.attr().node_type == crate::abi::uapi::node_type::RNIC;
        let chunk_shift =
            ops::chunk_shift(limits.max_fast_reg_pages, ffi::page_size().trailing_zeros());
        let sized = match laned {
            true => limits::queue_sizes_laned(&limits),
            false => limits::queue_sizes(&limits),
        };
        let q = sized.map_err(|why| {
            warn_user!(
                "{}: queues too small for a connection ({:?}: max_qp_wr {}, max_cqe {}) (errno {})\n",
                device.attr().name_str(),
                why,
                limits.max_qp_wr,
                limits.max_cqe,
                why.errno().get()
            );
            why.errno()
        })?;
        // A READ takes two send-queue entries on iWARP (its sink's
        // registration and itself): never more in flight than half the
        // operation entries, and at most `SINKS_MAX`. A fence takes two
        // entries as well, and maps one page.
        let sinks = |ops: u32| match iwarp {
            true => ((ops / 2).min(data::SINKS_MAX), ops / 2),
            false => (0, 0),
        };
        let (data_sinks, fence_sinks) = sinks(q.ops);
        // The rest at our first request or revoke (`Qp::ctrl_grow`); a
        // disk's from the start: its reconnect, which swap may wait for,
        // allocates nothing it can do without.
        let (recv_idle, ctrl_send_idle) = match disk {
            true => (q.recv, q.ctrl_send),
            false => (
                limits::CTRL_RECV_IDLE.min(q.recv),
                limits::CTRL_SEND_IDLE.min(q.ctrl_send),
            ),
        };
        let sizes = QpSizes {
            lane: 0,
            send: q.ops + q.grant_regs,
            ops: q.ops,
            recv: q.recv,
            recv_idle,
            ctrl_send: q.ctrl_send,
            ctrl_send_idle,
            msg_len: CTRL_LEN as u32,
            sinks: data_sinks,
            fence_sinks,
            sink_pages: 1 << (chunk_shift - ffi::page_size().trailing_zeros()),
            // A disk request's pages go in as few work requests as the
            // device's SGEs (as clamped) allow: on iWARP each WRITE of a
            // write that completes once sent is signaled (siw copies its
            // bytes), and elsewhere each is a request of the provider's
            // (rxe: a 4 KiB page per READ or WRITE otherwise). On RoCE not
            // for a file's connections, whose operations name registered
            // chunks: rxe's send queue entries grow with the SGEs (siw's
            // do not). An iWARP READ goes into a sink, never into the
            // segments.
            dma_sge: if iwarp || disk {
                limits.max_send_sge
            } else {
                1
            },
            dma_sge_rd: if disk && !iwarp { limits.max_sge_rd } else { 1 },
        };
        let (lane_sinks, lane_fence_sinks) = sinks(q.lane_ops);
        let import_ops = limits::import_ops(&limits).map_or(q.ops, |o| o.min(q.lane_ops));
        let import_budget = data::Slots::budget(import_ops, sinks(import_ops).0);
        id.create_qp(&pd, &sizes)
            .inspect_err(|e| warn_user!("cannot create a queue pair: errno {}\n", e.get()))?;
        g.stopped = false;
        g.peer = id.peer();
        self.size_path0(g, q.ops, sizes.sinks, sizes.fence_sinks)?;
        let own_budget = data::Slots::budget(q.ops, data_sinks);
        self.set_own_fits(own_budget, chunk_shift, iwarp);
        g.res = Some(Resources {
            grants: grants::Grants::new(),
            pd,
            chunk_shift,
            grant_regs: q.grant_regs,
            import_budget,
            own_budget,
            own_small: laned,
            // A lane carries operations only: no export registrations and
            // no control messages. Its one receive is a tripwire: the
            // provider flushes it when the queue pair fails (a peer's bad
            // key), which nothing else would tell (`lanes.rs`).
            lane_sizes: QpSizes {
                send: q.lane_ops,
                ops: q.lane_ops,
                recv: 1,
                recv_idle: 1,
                ctrl_send: 0,
                ctrl_send_idle: 0,
                sinks: lane_sinks,
                fence_sinks: lane_fence_sinks,
                ..sizes
            },
            iwarp,
        });
        Ok(())
    }
}

/// Our hello: the newest version we speak (connect request, with the
/// connection it replaces) or the one chosen (accept), offering or
/// granting `qps` queue pairs (the connection's own and its data lanes).
pub(super) fn hello(version: u16, qps: u16, nonce: u64, replaces: Option<u64>) -> Hello {
    Hello {
        version,
        ctrl_credits: CTRL_RECV as u16,
        qps,
        nonce,
        replaces,
        lane: None,
    }
}
