// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Control messages a side owes its peer but has no send buffer for yet.
//!
//! A control message's send buffer is free again only when its send
//! completes, and a queue pair completes in order: a data work request
//! that waits for a retransmission (a lost RDMA READ response waits out
//! the transport's retry timer, seconds per try) holds the completions of
//! every message posted after it, although the peer got them long ago and
//! answered. The wire protocol bounds what the peer can have outstanding,
//! not how long our completions take, so a busy peer's pings and requests
//! can find every send buffer still held. Failing the connection then
//! would turn a slow retransmission into a protocol error.
//!
//! So an answer that finds no free buffer waits here, and goes out, oldest
//! first, as send completions free buffers. The protocol still bounds what
//! waits: the peer has no more than [`REQ_MAX`] import requests,
//! [`REVOKE_MAX`] revokes and [`PING_MAX`] pings outstanding, and each one
//! answered here is still outstanding for the peer; our own ping (one at
//! most) may wait too. An answer beyond those bounds means the peer broke
//! the protocol: [`Backlog::owe`] refuses it with `EPROTO`. Our revokes
//! wait here too (at most [`REVOKE_MAX`], our own slots bound them): an
//! exporter that cannot tell the importer its access is gone would have to
//! end the connection. So do our import requests (at most [`REQ_MAX`],
//! bound by our request slots): a connection has only a few send buffers
//! (`limits::CTRL_SEND`), and an IMPORT should not fail for lack of one.
//! So does the passive side's one [`Ctrl::LanesWanted`].

use super::errno::{Errno, EAGAIN, EPROTO};
use super::wire::{Ctrl, PING_MAX, REQ_MAX, REVOKE_MAX};

/// Messages that may wait at once: the peer's bounds plus our own ping,
/// revokes and import requests.
pub const BACKLOG_MAX: usize =
    2 * REQ_MAX + REVOKE_MAX + PING_MAX + PING_MAX + REVOKE_MAX + LANES_WANTED_MAX;

/// [`Ctrl::LanesWanted`] messages a side sends on a connection.
const LANES_WANTED_MAX: usize = 1;

/// The kinds of message that may wait, each with its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An answer to one of the peer's import requests.
    ImportResp,
    /// An acknowledgement of one of the peer's revokes.
    RevokeAck,
    /// The answer to the peer's ping.
    Pong,
    /// Our own ping.
    Ping,
    /// One of our revokes.
    Revoke,
    /// One of our import requests.
    ImportReq,
    /// Our ask for the lanes (the passive side's).
    LanesWanted,
}

impl Kind {
    /// The kind of `m`.
    pub fn of(m: &Ctrl) -> Kind {
        match m {
            Ctrl::ImportResp { .. } => Kind::ImportResp,
            Ctrl::RevokeAck { .. } => Kind::RevokeAck,
            Ctrl::Pong { .. } => Kind::Pong,
            Ctrl::Ping { .. } => Kind::Ping,
            Ctrl::Revoke { .. } => Kind::Revoke,
            Ctrl::ImportReq { .. } => Kind::ImportReq,
            Ctrl::LanesWanted => Kind::LanesWanted,
        }
    }

    fn bound(self) -> usize {
        match self {
            Kind::ImportResp | Kind::ImportReq => REQ_MAX,
            Kind::RevokeAck | Kind::Revoke => REVOKE_MAX,
            Kind::Pong | Kind::Ping => PING_MAX,
            Kind::LanesWanted => LANES_WANTED_MAX,
        }
    }
}

/// The order and kinds of the messages waiting for a send buffer, oldest
/// first. The messages themselves are the caller's, one per slot
/// (`0..BACKLOG_MAX`): an import response is ~500 bytes, which the kernel
/// keeps in a buffer of its own rather than on its stack.
#[derive(Clone, Copy, Debug)]
pub struct Backlog {
    /// The kind of the message in each slot; slots are used in ring order.
    kinds: [Option<Kind>; BACKLOG_MAX],
    /// Slot of the oldest message.
    head: usize,
    len: usize,
}

impl Default for Backlog {
    fn default() -> Self {
        Self::new()
    }
}

impl Backlog {
    /// An empty backlog.
    pub const fn new() -> Self {
        Self {
            kinds: [None; BACKLOG_MAX],
            head: 0,
            len: 0,
        }
    }

    /// Number of messages waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops everything (the queue pair is gone: the peer's requests died
    /// with it).
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    /// Whether [`Backlog::owe`] would accept a message of `kind`: `EPROTO`
    /// if as many of its kind wait as the protocol allows.
    pub fn room(&self, kind: Kind) -> Result<(), Errno> {
        let waiting = self.kinds.iter().filter(|k| **k == Some(kind)).count();
        if waiting >= kind.bound() || self.len >= BACKLOG_MAX {
            return Err(EPROTO);
        }
        Ok(())
    }

    /// The slot the next message [`Backlog::owe`] accepts goes to (its
    /// caller may prepare the slot's buffer first, once [`Backlog::room`]
    /// said that it will accept it: the slot may be the oldest message's
    /// while the backlog is full).
    pub fn next_slot(&self) -> usize {
        (self.head + self.len) % BACKLOG_MAX
    }

    /// Queues a message of `kind` behind what already waits and returns
    /// the slot the caller stores it in; `EPROTO` if that is more than the
    /// protocol lets the peer cause.
    pub fn owe(&mut self, kind: Kind) -> Result<usize, Errno> {
        self.room(kind)?;
        let slot = self.next_slot();
        self.kinds[slot] = Some(kind);
        self.len += 1;
        Ok(slot)
    }

    /// Sends what waits, oldest first, through `send` (given the slot),
    /// until it is empty or `send` finds no buffer (`EAGAIN`: the rest
    /// waits for the next completion). Another error (the connection is
    /// ending) is returned and leaves the message that met it in place.
    pub fn flush(&mut self, mut send: impl FnMut(usize) -> Result<(), Errno>) -> Result<(), Errno> {
        while self.len > 0 {
            match send(self.head) {
                Ok(()) => {
                    self.kinds[self.head] = None;
                    self.head = (self.head + 1) % BACKLOG_MAX;
                    self.len -= 1;
                }
                Err(e) if e == EAGAIN => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::errno::ENOTCONN;
    use proptest::prelude::*;

    /// A backlog with its messages, as the kernel keeps them.
    struct Store {
        b: Backlog,
        msgs: [Option<Ctrl>; BACKLOG_MAX],
    }

    impl Store {
        fn new() -> Self {
            Self {
                b: Backlog::new(),
                msgs: [None; BACKLOG_MAX],
            }
        }

        fn owe(&mut self, m: Ctrl) -> Result<(), Errno> {
            let next = self.b.next_slot();
            let room = self.b.room(Kind::of(&m));
            let slot = self.b.owe(Kind::of(&m));
            assert_eq!(room.is_ok(), slot.is_ok());
            let slot = slot?;
            assert_eq!(slot, next);
            self.msgs[slot] = Some(m);
            Ok(())
        }

        /// Flushes with `buffers` free send buffers; what went out.
        fn flush(&mut self, buffers: usize) -> std::vec::Vec<Ctrl> {
            let mut sent = std::vec::Vec::new();
            let msgs = self.msgs;
            self.b
                .flush(|slot| {
                    if sent.len() == buffers {
                        return Err(EAGAIN);
                    }
                    sent.push(msgs[slot].unwrap());
                    Ok(())
                })
                .unwrap();
            sent
        }
    }

    fn pong(seq: u64) -> Ctrl {
        Ctrl::Pong { seq }
    }

    fn resp(req_id: u64) -> Ctrl {
        Ctrl::ImportResp {
            req_id,
            result: Err(EAGAIN),
        }
    }

    #[test]
    fn waits_within_the_peers_bounds() {
        let mut s = Store::new();
        for i in 0..REQ_MAX as u64 {
            s.owe(resp(i + 1)).unwrap();
        }
        assert_eq!(s.owe(resp(99)), Err(EPROTO));
        for i in 0..REVOKE_MAX as u64 {
            s.owe(Ctrl::RevokeAck { req_id: i + 1 }).unwrap();
        }
        assert_eq!(s.owe(Ctrl::RevokeAck { req_id: 9 }), Err(EPROTO));
        s.owe(pong(1)).unwrap();
        // A second ping before the first was answered broke the bound.
        assert_eq!(s.owe(pong(2)), Err(EPROTO));
        s.owe(Ctrl::Ping { seq: 7 }).unwrap();
        assert_eq!(s.owe(Ctrl::Ping { seq: 8 }), Err(EPROTO));
        for i in 0..REVOKE_MAX as u64 {
            s.owe(revoke(i + 1)).unwrap();
        }
        assert_eq!(s.owe(revoke(9)), Err(EPROTO));
        for i in 0..REQ_MAX as u64 {
            s.owe(req(i + 1)).unwrap();
        }
        assert_eq!(s.owe(req(99)), Err(EPROTO));
        s.owe(Ctrl::LanesWanted).unwrap();
        assert_eq!(s.owe(Ctrl::LanesWanted), Err(EPROTO));
        assert_eq!(s.b.len(), BACKLOG_MAX);
    }

    fn req(req_id: u64) -> Ctrl {
        Ctrl::ImportReq {
            req_id,
            token: 2,
            first_chunk: 0,
        }
    }

    fn revoke(req_id: u64) -> Ctrl {
        Ctrl::Revoke {
            req_id,
            token: 2,
            generation: 3,
        }
    }

    #[test]
    fn import_requests_wait_apart_from_answers() {
        assert_eq!(Kind::of(&req(1)), Kind::ImportReq);
        assert_eq!(Kind::of(&resp(1)), Kind::ImportResp);
        assert_eq!(Kind::of(&revoke(1)), Kind::Revoke);
    }

    #[test]
    fn flush_sends_oldest_first_and_stops_without_a_buffer() {
        let mut s = Store::new();
        s.owe(pong(1)).unwrap();
        s.owe(Ctrl::RevokeAck { req_id: 5 }).unwrap();
        s.owe(Ctrl::Ping { seq: 3 }).unwrap();
        assert_eq!(s.flush(2), [pong(1), Ctrl::RevokeAck { req_id: 5 }]);
        assert_eq!(s.b.len(), 1);
        // The answered ping's slot is free again.
        s.owe(pong(2)).unwrap();
        assert_eq!(s.b.flush(|_| Err(ENOTCONN)), Err(ENOTCONN));
        assert_eq!(s.b.len(), 2);
        assert_eq!(s.flush(9), [Ctrl::Ping { seq: 3 }, pong(2)]);
        assert!(s.b.is_empty());
        s.owe(resp(4)).unwrap();
        s.b.clear();
        assert!(s.b.is_empty());
        assert_eq!(s.flush(9), []);
    }

    /// Message `k` of a random sequence: one of the kinds that may wait.
    fn answer(k: u8, id: u64) -> Ctrl {
        match k % 6 {
            0 => resp(id),
            1 => Ctrl::RevokeAck { req_id: id },
            2 => pong(id),
            3 => revoke(id),
            4 => req(id),
            _ => Ctrl::Ping { seq: id },
        }
    }

    proptest! {
        /// Against a plain queue: the backlog accepts a message exactly
        /// when fewer of its kind wait than the protocol allows, never
        /// hands out a slot still in use, and sends what it accepted once
        /// each, in order, as buffers free up.
        #[test]
        fn behaves_like_a_bounded_queue(
            steps in proptest::collection::vec((any::<bool>(), any::<u8>(), 0usize..4), 1..200),
        ) {
            let mut s = Store::new();
            let mut model: std::collections::VecDeque<Ctrl> = Default::default();
            let mut id = 0u64;
            for (owe, k, buffers) in steps {
                if owe {
                    id += 1;
                    let m = answer(k, id);
                    let kind = Kind::of(&m);
                    let waiting = model.iter().filter(|w| Kind::of(w) == kind).count();
                    let fits = waiting < kind.bound();
                    prop_assert_eq!(s.owe(m).is_ok(), fits);
                    if fits {
                        model.push_back(m);
                    }
                } else {
                    let sent = s.flush(buffers);
                    prop_assert!(sent.len() == buffers || sent.len() == model.len());
                    for m in sent {
                        prop_assert_eq!(model.pop_front(), Some(m));
                    }
                }
                prop_assert_eq!(s.b.len(), model.len());
                prop_assert!(s.b.len() <= BACKLOG_MAX);
            }
            let rest = s.flush(BACKLOG_MAX);
            prop_assert_eq!(rest, std::vec::Vec::from(model));
        }
    }
}
