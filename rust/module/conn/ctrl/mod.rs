// SPDX-License-Identifier: GPL-2.0

//! The control channel of a connection: import requests, revokes and their
//! answers, as SEND/RECV messages (`abi::wire`).
//!
//! Flow control (see `abi::wire`): at most `REQ_MAX` import requests and
//! `REVOKE_MAX` revokes of ours are outstanding at once; the slots here
//! enforce it, and a caller waits for a free slot within its timeout. A
//! request whose caller gave up (timeout, signal) keeps its slot until the
//! answer arrives or the connection ends, so the bound holds even then.
//! Pings (`keepalive.rs`) are answered at once; every answer of the peer
//! counts as a sign of life. A queue pair posts the receive buffers for
//! the answers to our requests and revokes before the first of them goes
//! out ([`grow`]), and at the peer's first import request: an idle
//! connection holds only those for what the peer may send unprompted and
//! for our ping's answer, and half the send buffers (a message that finds
//! none free waits in the backlog, which the next send completion flushes
//! into every free buffer).
//! A message of ours (an answer, a request, a revoke, our ping) that finds
//! every send buffer still held waits in the channel's backlog
//! (`abi::backlog`) and goes out when a send completes: buffers are freed
//! in completion order, which a data request waiting out a retransmission
//! holds up. An answer, acknowledgement or ping that cannot get the
//! buffer it would wait in ends the connection with `ENOMEM` (the peer
//! would wait for it in vain); an import request fails with `ENOMEM` and
//! the connection stays.
//! The passive side's first operation asks the active side for the data
//! lanes (`Ctrl::LanesWanted`, `lanes.rs`), once: it waits in the backlog
//! like our other messages.
//! What the peer sends is checked against the same bounds: an answer to
//! nothing, or more revokes than allowed, is a protocol violation and ends
//! the connection with `EPROTO`, and so is an ask for lanes sent to the
//! active side's peer.

mod channel;

use core::ffi::c_int;

use kernel::sync::Arc;

use super::{wait_until, Conn, ConnInner};
use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, ENOMEM, ENOTCONN, EPROTO},
    wire::{Ctrl, Grant},
};
use crate::calling::Task;
use crate::noio::NoIoGuard;
use channel::{DueAck, Req, ReqSlot, RevokeSlot};

pub(crate) use channel::CtrlCounts;
pub(super) use channel::{answer, revoke_answered, send_due_acks, Channel};

impl Conn {
    /// A disk's connection: its control channel's request slots and
    /// message buffers, allocated now and kept, so that its receive path,
    /// which swap may wait for, allocates nothing. Apart from
    /// [`Conn::new`], whose stack holds the connection's state.
    #[inline(never)]
    pub(super) fn keep_ctrl_buffers(&self) -> Result<(), Errno> {
        let kept = Channel::kept()?;
        self.inner.lock().ctrl.keep(kept);
        Ok(())
    }

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
        if g.ctrl.reqs.is_empty() {
            // The connection's first request: its slots, outside the lock.
            drop(g);
            let slots = Channel::req_slots()?;
            g = self.inner.lock();
            g.ctrl.give_reqs(slots);
        }
        wait_until(&self.cv, g.guard(), left, |i| {
            !i.state.is_connected() || i.ctrl.free_req().is_some()
        })?;
        if !g.state.is_connected() {
            return Err(g.errno());
        }
        grow(&g, &self.shared.ctrl)?;
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
        // Waits in the backlog if every send buffer is held.
        if let Err(e) = answer(&mut g, &self.shared.ctrl, msg) {
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
        grow(g, &self.shared.ctrl)?;
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
                // An exporter's connection too: its answers, and later
                // its revokes, use the rest of the send buffers. Without
                // them the answer waits for a free one (a failed post
                // ends the connection, see `Qp::ctrl_grow`).
                let _ = grow(&g, &self.shared.ctrl);
                match answer(
                    &mut g,
                    &self.shared.ctrl,
                    Ctrl::ImportResp { req_id, result },
                ) {
                    // Our answers are bounded by the peer's requests: no
                    // room in the backlog means the peer broke the bound.
                    Err(e) if g.state.can_talk() => {
                        Some((unsent(e, "import request beyond the limit"), e))
                    }
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
                match send_due_acks(&mut g, &self.shared.ctrl) {
                    Some(e) => Some((unsent(e, ""), e)),
                    None => r.err().map(|e| ("revoke beyond the limit", e)),
                }
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
                    Err(e) if g.state.can_talk() => Some((unsent(e, "ping beyond the limit"), e)),
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
            Ctrl::LanesWanted => match self.lanes_wanted() {
                true => None,
                false => Some(("lanes asked of the passive side", EPROTO)),
            },
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
        if let Err(e) = channel::flush(&mut g) {
            if g.state.can_talk() {
                drop(g);
                self.fail(Event::QpFatal, "cannot send a waiting control message", e);
            }
        }
    }
}

/// Posts the rest of the queue pair's receive buffers, and adds the rest
/// of its send buffers, unless it has them (`Qp::ctrl_grow`): the answer
/// to a request or revoke of ours needs a receive buffer of its own, and
/// an idle connection keeps only what the peer may send unprompted
/// (`limits::CTRL_RECV_IDLE`). Under the lock, which the message is then
/// sent under: a reconnect cannot come between.
fn grow(g: &ConnInner, counts: &CtrlCounts) -> Result<(), Errno> {
    let grew =
        g.id.as_ref()
            .and_then(|id| id.qp())
            .ok_or(ENOTCONN)?
            .ctrl_grow()?;
    if grew {
        counts.grew();
    }
    Ok(())
}

/// Why a message of ours could not be sent or queued, for the log: `why`
/// (the peer broke a bound), unless no buffer was left for it to wait in.
fn unsent(e: Errno, why: &'static str) -> &'static str {
    if e == ENOMEM {
        "no memory for a control message to wait in"
    } else {
        why
    }
}
