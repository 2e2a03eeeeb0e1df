// SPDX-License-Identifier: GPL-2.0

//! The control channel's state (under `Conn::inner`): our import requests
//! and revokes in flight, the peer's revokes to acknowledge, and the
//! messages waiting for a send buffer (`abi::backlog`).
//!
//! What only some connections need is allocated when first used, so that
//! an idle connection holds none of it: the request slots (each can hold a
//! whole grant, 4 KiB in all) at the first import request, in process
//! context before the lock; a waiting message's buffer when it starts to
//! wait, freed once it is sent. A disk's connection has both from the
//! start and keeps them: its receive path, which swap may wait for,
//! allocates nothing.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;

use super::super::{ConnInner, State};
use crate::abi::Result;
use crate::abi::{
    backlog::{Backlog, Kind, BACKLOG_MAX},
    errno::{Errno, EAGAIN, ENOMEM, ENOTCONN, EPROTO},
    wire::{Ctrl, Grant, CTRL_LEN, REQ_MAX, REVOKE_MAX},
};
use crate::cm_id::CmId;
use crate::conn::Conn;

/// Where an import request of ours is.
// The answer is stored in place: the receive path allocates only for a
// message that must wait (never on a disk's connection), so `Answered` is
// not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
pub(super) enum Req {
    /// Sent; its caller waits.
    Waiting,
    /// Sent; its caller gave up. The slot is freed by the answer.
    Abandoned,
    /// Answered; the caller takes the answer.
    Answered(Result<Grant, Errno>),
}

#[derive(Clone, Copy)]
pub(super) struct ReqSlot {
    pub(super) id: u64,
    pub(super) req: Req,
}

#[derive(Clone, Copy)]
pub(super) struct RevokeSlot {
    pub(super) id: u64,
    pub(super) acked: bool,
}

/// A revoke the peer sent, to acknowledge once nothing of the token is in
/// flight here.
#[derive(Clone, Copy)]
pub(super) struct DueAck {
    pub(super) id: u64,
    pub(super) token: u64,
}

/// The request slots of a channel, from [`Channel::req_slots`].
pub(super) type ReqSlots = KVec<Option<ReqSlot>>;

/// A channel's request slots and a buffer for every message that may wait,
/// allocated at once ([`Channel::kept`]).
pub(super) struct Kept {
    reqs: ReqSlots,
    bodies: [Option<KBox<[u8; CTRL_LEN]>>; BACKLOG_MAX],
}

/// The control channel's state (under `Conn::inner`).
pub(in crate::conn) struct Channel {
    next_id: u64,
    /// [`REQ_MAX`] slots once the first import request allocated them
    /// (empty before), on the heap: each can hold a whole grant.
    pub(super) reqs: ReqSlots,
    pub(super) revokes: [Option<RevokeSlot>; REVOKE_MAX],
    pub(super) acks: [Option<DueAck>; REVOKE_MAX],
    /// Messages waiting for a send buffer: their order and kinds here,
    /// their encoded bytes in `bodies` (one buffer per waiting message,
    /// allocated when it starts to wait and freed once it is sent, unless
    /// `keep`).
    backlog: Backlog,
    bodies: [Option<KBox<[u8; CTRL_LEN]>>; BACKLOG_MAX],
    /// Every body and the request slots are allocated from the start and
    /// kept (a disk's connection).
    keep: bool,
}

impl Channel {
    /// A channel with nothing in flight; it allocates nothing until used
    /// (built in place: a connection's state is built on the stack).
    pub(in crate::conn) fn new() -> Self {
        Self {
            next_id: 1,
            reqs: KVec::new(),
            revokes: [None; REVOKE_MAX],
            acks: [None; REVOKE_MAX],
            backlog: Backlog::new(),
            bodies: core::array::from_fn(|_| None),
            keep: false,
        }
    }

    /// All a channel may need, for [`Channel::keep`].
    pub(super) fn kept() -> Result<Kept, Errno> {
        let mut bodies: [Option<KBox<[u8; CTRL_LEN]>>; BACKLOG_MAX] =
            core::array::from_fn(|_| None);
        for b in &mut bodies {
            *b = Some(body()?);
        }
        Ok(Kept {
            reqs: Self::req_slots()?,
            bodies,
        })
    }

    /// Takes `k` and keeps it for the channel's life (nothing is in
    /// flight yet).
    pub(super) fn keep(&mut self, k: Kept) {
        self.reqs = k.reqs;
        self.bodies = k.bodies;
        self.keep = true;
    }

    /// [`REQ_MAX`] free request slots, for [`Channel::give_reqs`]
    /// (allocated in process context, before the lock is taken).
    pub(super) fn req_slots() -> Result<ReqSlots, Errno> {
        let mut reqs = KVec::with_capacity(REQ_MAX, GFP_KERNEL).map_err(|_| ENOMEM)?;
        for _ in 0..REQ_MAX {
            reqs.push(None, GFP_KERNEL).map_err(|_| ENOMEM)?;
        }
        Ok(reqs)
    }

    /// Installs `slots` unless another caller's came first.
    pub(super) fn give_reqs(&mut self, slots: ReqSlots) {
        if self.reqs.is_empty() {
            self.reqs = slots;
        }
    }

    /// A reconnect's teardown: nothing of ours is outstanding on the new
    /// queue pair, and nothing of the peer's is owed. Ids go on (a caller
    /// that gave up finds its id gone, never another's).
    pub(in crate::conn) fn reset(&mut self) {
        self.reqs.iter_mut().for_each(|s| *s = None);
        self.revokes = [None; REVOKE_MAX];
        self.acks = [None; REVOKE_MAX];
        self.backlog.clear();
        self.drop_bodies();
    }

    /// Frees the waiting messages' buffers (nothing waits), unless kept.
    fn drop_bodies(&mut self) {
        if !self.keep {
            self.bodies.iter_mut().for_each(|b| *b = None);
        }
    }

    pub(super) fn alloc_id(&mut self) -> u64 {
        let id = self.next_id;
        // Never 0 (the wire reserves it), unique for the connection's life.
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
    }

    /// A free request slot; `None` also before the slots are allocated.
    pub(super) fn free_req(&self) -> Option<usize> {
        self.reqs.iter().position(|s| s.is_none())
    }

    pub(super) fn free_revoke(&self) -> Option<usize> {
        self.revokes.iter().position(|s| s.is_none())
    }

    /// The peer answered request `id`.
    pub(super) fn answer(&mut self, id: u64, result: Result<Grant, Errno>) -> Result<(), Errno> {
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
    pub(super) fn acked(&mut self, id: u64) -> Result<(), Errno> {
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
    pub(super) fn defer_ack(&mut self, ack: DueAck) -> Result<(), Errno> {
        let slot = self.acks.iter_mut().find(|a| a.is_none()).ok_or(EPROTO)?;
        *slot = Some(ack);
        Ok(())
    }
}

/// Sends `m` on the connection's queue pair (never blocks); `EAGAIN` if
/// no send buffer is free.
fn send(g: &ConnInner, m: &Ctrl) -> Result<(), Errno> {
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

/// A buffer for a waiting message.
fn body() -> Result<KBox<[u8; CTRL_LEN]>, Errno> {
    KBox::new([0; CTRL_LEN], GFP_KERNEL).map_err(|_| ENOMEM)
}

/// Sends `m`, or queues it behind those waiting for a send buffer; `EPROTO`
/// if more would wait than the bounds allow (for an answer, the peer broke
/// the protocol), `ENOMEM` if no buffer could be allocated for it to wait
/// in. Counts each message that waits.
pub(in crate::conn) fn answer(
    g: &mut ConnInner,
    counts: &CtrlCounts,
    m: Ctrl,
) -> Result<(), Errno> {
    if g.ctrl.backlog.is_empty() {
        match send(g, &m) {
            Err(e) if e == EAGAIN => {}
            // Sent, or the connection is ending (which answers all).
            r => return r,
        }
    }
    let ch = &mut g.ctrl;
    let kind = Kind::of(&m);
    // Before the body is written: while the backlog is full, the next
    // slot is the oldest message's.
    ch.backlog.room(kind)?;
    let next = ch.backlog.next_slot();
    let buf = match ch.bodies[next].as_mut() {
        Some(b) => b,
        None => ch.bodies[next].insert(body()?),
    };
    buf.copy_from_slice(&m.encode(g.version));
    let slot = ch.backlog.owe(kind)?;
    debug_assert_eq!(slot, next);
    counts.backlogged.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Sends what waits in the backlog while send buffers are free (a send
/// completed). On an error nothing is owed any more: the connection is
/// ending, or must end (the error, if it can still talk).
pub(super) fn flush(g: &mut ConnInner) -> Result<(), Errno> {
    let ConnInner {
        ctrl, state, id, ..
    } = g;
    let keep = ctrl.keep;
    let Channel {
        backlog, bodies, ..
    } = &mut *ctrl;
    let sent = backlog.flush(|slot| {
        post(state, id, bodies[slot].as_deref().ok_or(EPROTO)?)?;
        if !keep {
            bodies[slot] = None;
        }
        Ok(())
    });
    if sent.is_err() {
        ctrl.backlog.clear();
        ctrl.drop_bodies();
    }
    sent
}

/// Control channel counts of one file's connections, connections gone
/// included.
pub(crate) struct CtrlCounts {
    backlogged: AtomicU64,
    grown: AtomicU64,
}

impl CtrlCounts {
    pub(crate) const fn new() -> Self {
        Self {
            backlogged: AtomicU64::new(0),
            grown: AtomicU64::new(0),
        }
    }

    /// A queue pair posted the rest of its receive buffers.
    pub(in crate::conn) fn grew(&self) {
        self.grown.fetch_add(1, Ordering::Relaxed);
    }

    /// The fdinfo lines: messages that waited for a send buffer, and
    /// queue pairs that posted the rest of their receive buffers (an idle
    /// connection's holds only what the peer may send unprompted).
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 2] {
        [
            (
                b"rrdma-ctrl-backlogged\0",
                self.backlogged.load(Ordering::Relaxed),
            ),
            (b"rrdma-ctrl-grown\0", self.grown.load(Ordering::Relaxed)),
        ]
    }
}

/// Whether revoke `id` was acknowledged (its slot is left as is).
pub(in crate::conn) fn revoke_answered(g: &ConnInner, id: u64) -> bool {
    g.ctrl
        .revokes
        .iter()
        .flatten()
        .any(|s| s.id == id && s.acked)
}

/// Sends the acknowledgements of revokes whose token has nothing in flight
/// any more (after an operation completed or a revoke arrived). The peer
/// has room for each (it answers one of its bounded revokes) and so has
/// the backlog; `ENOMEM` if an acknowledgement found no buffer to wait in
/// (the caller ends the connection: the peer's revoke would wait for it
/// in vain). Other failures mean the connection is ending, which revokes
/// anyway.
#[must_use]
pub(in crate::conn) fn send_due_acks(g: &mut ConnInner, counts: &CtrlCounts) -> Option<Errno> {
    for i in 0..REVOKE_MAX {
        let Some(ack) = g.ctrl.acks[i] else { continue };
        if g.imports.inflight(ack.token) > 0 {
            continue;
        }
        g.ctrl.acks[i] = None;
        if let Err(e) = answer(g, counts, Ctrl::RevokeAck { req_id: ack.id }) {
            if e == ENOMEM {
                return Some(e);
            }
        }
    }
    None
}
