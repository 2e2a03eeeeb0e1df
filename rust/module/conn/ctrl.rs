// SPDX-License-Identifier: GPL-2.0

//! The control channel of a connection: import requests, revokes and their
//! answers, as SEND/RECV messages (`abi::wire`).
//!
//! Flow control (see `abi::wire`): at most [`REQ_MAX`] import requests and
//! [`REVOKE_MAX`] revokes of ours are outstanding at once; the slots here
//! enforce it, and a caller waits for a free slot within its timeout. A
//! request whose caller gave up (timeout, signal) keeps its slot until the
//! answer arrives or the connection ends, so the bound holds even then.
//! Pings (`keepalive.rs`) are answered at once; every answer of the peer
//! counts as a sign of life.
//! An answer (or our ping) that finds every send buffer still held waits
//! in the channel's backlog (`abi::backlog`) and goes out when a send
//! completes: buffers are freed in completion order, which a data request
//! waiting out a retransmission holds up.
//! What the peer sends is checked against the same bounds: an answer to
//! nothing, or more revokes than allowed, is a protocol violation and ends
//! the connection with `EPROTO`.

use core::ffi::c_int;
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use super::{wait_until, Conn, ConnInner, State};
use crate::abi::Result;
use crate::abi::{
    backlog::{Backlog, Kind, BACKLOG_MAX},
    conn::Event,
    errno::{Errno, EAGAIN, ENOTCONN, EPROTO},
    wire::{Ctrl, Grant, CTRL_LEN, REQ_MAX, REVOKE_MAX},
};
use crate::calling::Task;
use crate::cm_id::CmId;
use crate::noio::NoIoGuard;

/// Where an import request of ours is.
// The answer is stored in place: the receive path (completion context) must
// not allocate, so `Answered` is not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
enum Req {
    /// Sent; its caller waits.
    Waiting,
    /// Sent; its caller gave up. The slot is freed by the answer.
    Abandoned,
    /// Answered; the caller takes the answer.
    Answered(Result<Grant, Errno>),
}

#[derive(Clone, Copy)]
struct ReqSlot {
    id: u64,
    req: Req,
}

#[derive(Clone, Copy)]
struct RevokeSlot {
    id: u64,
    acked: bool,
}

/// A revoke the peer sent, to acknowledge once nothing of the token is in
/// flight here.
#[derive(Clone, Copy)]
pub(super) struct DueAck {
    pub(super) id: u64,
    pub(super) token: u64,
}

/// What a [`Channel`] keeps on the heap, allocated before it is built.
pub(super) struct Buffers {
    reqs: KVec<Option<ReqSlot>>,
    bodies: KVec<u8>,
}

/// The control channel's state (under `Conn::inner`).
pub(super) struct Channel {
    next_id: u64,
    /// `REQ_MAX` slots, on the heap: each can hold a whole grant, and a
    /// connection's state is built on the stack.
    reqs: KVec<Option<ReqSlot>>,
    revokes: [Option<RevokeSlot>; REVOKE_MAX],
    acks: [Option<DueAck>; REVOKE_MAX],
    /// Answers (and our ping) waiting for a send buffer: their order and
    /// kinds here, their encoded bytes in `bodies` (`CTRL_LEN` a slot, on
    /// the heap: a connection's state is built on the stack).
    backlog: Backlog,
    bodies: KVec<u8>,
}

impl Channel {
    /// A channel on `buffers` (from [`Channel::buffers`]).
    pub(super) fn new(buffers: Buffers) -> Self {
        Self {
            next_id: 1,
            reqs: buffers.reqs,
            revokes: [None; REVOKE_MAX],
            acks: [None; REVOKE_MAX],
            backlog: Backlog::new(),
            bodies: buffers.bodies,
        }
    }

    /// The request slots and the backlog's message buffer, allocated before
    /// the channel is built in place (a fallible constructor would copy the
    /// channel around).
    pub(super) fn buffers() -> Result<Buffers> {
        let mut reqs = KVec::with_capacity(REQ_MAX, GFP_KERNEL)?;
        for _ in 0..REQ_MAX {
            reqs.push(None, GFP_KERNEL)?;
        }
        Ok(Buffers {
            reqs,
            bodies: KVec::from_elem(0, BACKLOG_MAX * CTRL_LEN, GFP_KERNEL)?,
        })
    }

    /// A reconnect's teardown: nothing of ours is outstanding on the new
    /// queue pair, and nothing of the peer's is owed. Ids go on (a caller
    /// that gave up finds its id gone, never another's).
    pub(super) fn reset(&mut self) {
        self.reqs.iter_mut().for_each(|s| *s = None);
        self.revokes = [None; REVOKE_MAX];
        self.acks = [None; REVOKE_MAX];
        self.backlog.clear();
    }

    fn alloc_id(&mut self) -> u64 {
        let id = self.next_id;
        // Never 0 (the wire reserves it), unique for the connection's life.
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
    }

    fn free_req(&self) -> Option<usize> {
        self.reqs.iter().position(|s| s.is_none())
    }

    fn free_revoke(&self) -> Option<usize> {
        self.revokes.iter().position(|s| s.is_none())
    }

    /// The peer answered request `id`.
    fn answer(&mut self, id: u64, result: Result<Grant, Errno>) -> Result<(), Errno> {
        let slot = self
            .reqs
            .iter_mut()
            .find(|s| s.is_some_and(|s| s.id == id && !matches!(s.req, Req::Answered(_))))
            .ok_or(EPROTO)?;
        match slot {
            Some(s) if matches!(s.req, Req::Waiting) => s.req = Req::Answered(result),
            _ => *slot = None,
        }
        Ok(())
    }

    /// The peer acknowledged revoke `id`.
    fn acked(&mut self, id: u64) -> Result<(), Errno> {
        let s = self
            .revokes
            .iter_mut()
            .flatten()
            .find(|s| s.id == id && !s.acked)
            .ok_or(EPROTO)?;
        s.acked = true;
        Ok(())
    }

    /// Remembers a revoke to acknowledge later; `EPROTO` if the peer has
    /// more revokes outstanding than the protocol allows.
    fn defer_ack(&mut self, ack: DueAck) -> Result<(), Errno> {
        let slot = self.acks.iter_mut().find(|a| a.is_none()).ok_or(EPROTO)?;
        *slot = Some(ack);
        Ok(())
    }
}

/// Sends `m` on the connection's queue pair (never blocks); `EAGAIN` if
/// no send buffer is free.
pub(super) fn send(g: &ConnInner, m: &Ctrl) -> Result<(), Errno> {
    post(&g.state, &g.id, &m.encode(g.version))
}

/// Sends an encoded message; [`send`] on the parts of `ConnInner` it needs
/// (the backlog's flush borrows the rest).
fn post(state: &State, id: &Option<CmId<Conn>>, msg: &[u8]) -> Result<(), Errno> {
    if !state.can_talk() {
        return Err(ENOTCONN);
    }
    id.as_ref()
        .and_then(|id| id.qp())
        .ok_or(ENOTCONN)?
        .ctrl_send(msg)
}

/// Slot `slot` of a backlog's bodies.
fn body(bodies: &[u8], slot: usize) -> &[u8] {
    &bodies[slot * CTRL_LEN..(slot + 1) * CTRL_LEN]
}

/// Sends answer `m` (or our ping or revoke), or queues it behind those
/// waiting for a send buffer; `EPROTO` if more would wait than the bounds
/// allow (for an answer, the peer broke the protocol). Counts each message
/// that waits.
pub(super) fn answer(g: &mut ConnInner, counts: &CtrlCounts, m: Ctrl) -> Result<(), Errno> {
    if g.ctrl.backlog.is_empty() {
        match send(g, &m) {
            Err(e) if e == EAGAIN => {}
            // Sent, or the connection is ending (which answers all).
            r => return r,
        }
    }
    let slot = g.ctrl.backlog.owe(Kind::of(&m).ok_or(EPROTO)?)?;
    let msg = m.encode(g.version);
    g.ctrl.bodies[slot * CTRL_LEN..(slot + 1) * CTRL_LEN].copy_from_slice(&msg);
    counts.backlogged.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Control channel counts of one file's connections, connections gone
/// included.
pub(crate) struct CtrlCounts {
    backlogged: AtomicU64,
}

impl CtrlCounts {
    pub(crate) const fn new() -> Self {
        Self {
            backlogged: AtomicU64::new(0),
        }
    }

    /// The fdinfo line: messages that waited for a send buffer.
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 1] {
        [(
            b"rrdma-ctrl-backlogged\0",
            self.backlogged.load(Ordering::Relaxed),
        )]
    }
}

/// Whether revoke `id` was acknowledged (its slot is left as is).
pub(super) fn revoke_answered(g: &ConnInner, id: u64) -> bool {
    g.ctrl
        .revokes
        .iter()
        .flatten()
        .any(|s| s.id == id && s.acked)
}

/// Sends the acknowledgements of revokes whose token has nothing in flight
/// any more (after an operation completed or a revoke arrived).
pub(super) fn send_due_acks(g: &mut ConnInner, counts: &CtrlCounts) {
    for i in 0..REVOKE_MAX {
        let Some(ack) = g.ctrl.acks[i] else { continue };
        if g.imports.inflight(ack.token) > 0 {
            continue;
        }
        g.ctrl.acks[i] = None;
        // The peer has room: this answers one of its bounded revokes, and
        // the backlog has room for it. A failure means the connection is
        // ending, which revokes anyway.
        let _ = answer(g, counts, Ctrl::RevokeAck { req_id: ack.id });
    }
}

impl Conn {
    /// Sends an import request for `token` from chunk `first` and waits for
    /// the answer, first for a free request slot if all are taken, within
    /// `left`.
    pub(super) fn request(
        self: &Arc<Self>,
        token: u64,
        first: u32,
        left: &mut Option<kernel::time::Jiffies>,
    ) -> Result<Grant, Errno> {
        let mut g = self.inner.lock();
        wait_until(&self.cv, g.guard(), left, |i| {
            !i.state.is_connected() || i.ctrl.free_req().is_some()
        })?;
        if !g.state.is_connected() {
            return Err(g.errno());
        }
        let (slot, id) = match g.ctrl.free_req() {
            Some(slot) => (slot, g.ctrl.alloc_id()),
            None => return Err(g.errno()),
        };
        g.ctrl.reqs[slot] = Some(ReqSlot {
            id,
            req: Req::Waiting,
        });
        let msg = Ctrl::ImportReq {
            req_id: id,
            token,
            first_chunk: first,
        };
        if let Err(e) = send(&g, &msg) {
            g.ctrl.reqs[slot] = None;
            return Err(e);
        }
        let waited = wait_until(&self.cv, g.guard(), left, |i| {
            !i.state.can_talk()
                || i.ctrl.reqs[slot]
                    .is_some_and(|s| s.id != id || matches!(s.req, Req::Answered(_)))
        });
        let talking = g.state.can_talk();
        // Still ours: a reconnect clears the slots (and reuses them).
        let answer = match g.ctrl.reqs[slot].filter(|s| s.id == id).map(|s| s.req) {
            Some(Req::Answered(a)) => {
                g.ctrl.reqs[slot] = None;
                Some(a)
            }
            // Gave up: the answer (if any) frees the slot, so that the peer
            // never has more requests of ours than allowed.
            Some(_) if talking => {
                if let Some(s) = g.ctrl.reqs[slot].as_mut() {
                    s.req = Req::Abandoned;
                }
                None
            }
            Some(_) => {
                g.ctrl.reqs[slot] = None;
                None
            }
            None => None,
        };
        let errno = g.errno();
        drop(g);
        self.cv.notify_all();
        match answer {
            Some(a) => a,
            None => Err(waited.err().unwrap_or(errno)),
        }
    }

    /// Takes a revoke slot and sends a revoke of `token` (`generation`);
    /// returns the revoke's id. Waits for a free slot within `left`.
    pub(super) fn send_revoke(
        self: &Arc<Self>,
        g: &mut NoIoGuard<'_, ConnInner>,
        token: u64,
        generation: u32,
        left: &mut Option<kernel::time::Jiffies>,
    ) -> Result<u64, Errno> {
        wait_until(&self.cv, g.guard(), left, |i| {
            !i.state.can_talk() || i.ctrl.free_revoke().is_some()
        })?;
        let slot = g.ctrl.free_revoke().ok_or(ENOTCONN)?;
        if !g.state.can_talk() {
            return Err(g.errno());
        }
        let id = g.ctrl.alloc_id();
        g.ctrl.revokes[slot] = Some(RevokeSlot { id, acked: false });
        let msg = Ctrl::Revoke {
            req_id: id,
            token,
            generation,
        };
        // Waits in the backlog if every send buffer is held: the importer
        // must hear of it, or the connection would have to end.
        if let Err(e) = answer(g, &self.shared.ctrl, msg) {
            g.ctrl.revokes[slot] = None;
            return Err(e);
        }
        Ok(id)
    }

    /// Whether revoke `id` was acknowledged; frees its slot once it was, or
    /// once `give_up` (its answer, if it comes, is then a violation: the
    /// caller ends the connection when it gives up).
    pub(super) fn revoke_acked(g: &mut ConnInner, id: u64, give_up: bool) -> bool {
        let Some(slot) = g
            .ctrl
            .revokes
            .iter()
            .position(|s| s.is_some_and(|s| s.id == id))
        else {
            return false;
        };
        let acked = g.ctrl.revokes[slot].is_some_and(|s| s.acked);
        if acked || give_up {
            g.ctrl.revokes[slot] = None;
        }
        acked
    }

    /// A control message from the peer (receive completion, process
    /// context; its buffer is already posted again).
    pub(crate) fn ctrl_recv(self: &Arc<Self>, msg: &[u8]) {
        let m = match Ctrl::decode(msg) {
            Ok(m) => m,
            Err(e) => return self.fail(Event::QpFatal, "malformed control message", e),
        };
        let broken = match m {
            Ctrl::ImportReq {
                req_id,
                token,
                first_chunk,
            } => {
                // Registers outside the lock; the answer goes out under it.
                let result = self.grant(token, first_chunk);
                let mut g = self.inner.lock();
                match answer(
                    &mut g,
                    &self.shared.ctrl,
                    Ctrl::ImportResp { req_id, result },
                ) {
                    // Our answers are bounded by the peer's requests: no
                    // room in the backlog means the peer broke the bound.
                    Err(e) if g.state.can_talk() => Some(("import request beyond the limit", e)),
                    _ => None,
                }
            }
            Ctrl::ImportResp { req_id, result } => {
                let mut g = self.inner.lock();
                let r = g.ctrl.answer(req_id, result);
                g.keepalive.answered();
                drop(g);
                self.cv.notify_all();
                r.err().map(|e| ("answer to no import request", e))
            }
            Ctrl::Revoke {
                req_id,
                token,
                generation,
            } => {
                let mut g = self.inner.lock();
                g.imports.revoke(token, generation);
                crate::ffi::trace::import_revoked(self.serial, token);
                let r = g.ctrl.defer_ack(DueAck { id: req_id, token });
                send_due_acks(&mut g, &self.shared.ctrl);
                r.err().map(|e| ("revoke beyond the limit", e))
            }
            Ctrl::RevokeAck { req_id } => {
                let mut g = self.inner.lock();
                let r = g.ctrl.acked(req_id);
                g.keepalive.answered();
                drop(g);
                self.cv.notify_all();
                r.err().map(|e| ("acknowledgement of no revoke", e))
            }
            Ctrl::Ping { seq } => {
                let mut g = self.inner.lock();
                match answer(&mut g, &self.shared.ctrl, Ctrl::Pong { seq }) {
                    // As for import requests: bounded by the peer's pings.
                    Err(e) if g.state.can_talk() => Some(("ping beyond the limit", e)),
                    _ => None,
                }
            }
            Ctrl::Pong { seq } => self
                .inner
                .lock()
                .keepalive
                .pong(seq)
                .err()
                .map(|e| ("answer to no ping", e)),
        };
        if let Some((why, e)) = broken {
            self.fail(Event::QpFatal, why, e);
        }
    }

    /// A control message's send completed: its buffer is free again, for
    /// the oldest message waiting in the backlog.
    pub(crate) fn ctrl_sent(self: &Arc<Self>, t: &Task, wc_status: c_int) {
        if wc_status != 0 {
            return self.wc_failed(t, wc_status, super::FailedWr::ControlSend);
        }
        let mut g = self.inner.lock();
        if g.ctrl.backlog.is_empty() {
            return;
        }
        let ConnInner {
            ctrl, state, id, ..
        } = &mut *g;
        let Channel {
            backlog, bodies, ..
        } = ctrl;
        if backlog
            .flush(|slot| post(state, id, body(bodies, slot)))
            .is_err()
        {
            // The connection is ending: nothing is owed any more.
            backlog.clear();
        }
    }
}
