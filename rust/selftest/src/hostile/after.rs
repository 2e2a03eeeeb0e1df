// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The hostile peer after the handshake, on either transport: once the
//! exporter has accepted a connection, this side sends rrdma control
//! messages, well-formed or not, and RDMA Writes and Read requests with
//! keys it guessed or was granted. [`Peer`] is what a transport gives:
//! iWARP framed by hand over TCP ([`super::iwarp`], siw) or a real queue
//! pair of its own ([`super::verbs`], rxe).
//!
//! A well-formed message must be answered and leave the connection up; a
//! malformed, unsolicited or out-of-bounds one must end the connection
//! (the exporter's `EPROTO` and log line, or the transport's own error for
//! what it refuses), and nothing may be written where it should not.

use rrdma::abi::errno::{EINVAL, ENOENT};
use rrdma::abi::wire::{self, Ctrl, Grant, CTRL_LEN};
use rrdma::Rrdma;

use super::{real_peer, PORT};
use crate::ensure;
use crate::remote::{addr, token, T};
use crate::Tap;

/// An accepted connection this side drives below rrdma's library.
pub(super) trait Peer: Sized {
    /// The transport, in check names.
    const NAME: &'static str;

    /// Connects to the exporter at `peer` with a valid hello of `nonce`.
    fn open(peer: &str, nonce: u64) -> Result<Self, String>;
    /// Sends `payload` as one Send.
    fn send(&mut self, payload: &[u8]) -> Result<(), String>;
    /// Sends every message of `msgs` as a Send, at once; closed while
    /// sending is no error (the caller checks that it is closed).
    fn burst(&mut self, msgs: &[Vec<u8>]) -> Result<(), String>;
    /// An RDMA Write of `data` to `stag` at `to`.
    fn rdma_write(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), String>;
    /// An RDMA Read request of `len` bytes of `stag` at `to`.
    fn rdma_read(&mut self, stag: u32, to: u64, len: u32) -> Result<(), String>;
    /// The exporter's next control message, its pings answered on the way.
    fn next(&mut self) -> Result<Ctrl, String>;
    /// Ends the connection from this side, after a check that left it up.
    fn close(self) -> Result<(), String>;
    /// The exporter must end the connection.
    fn closed(self) -> Result<(), String>;

    /// What a burst of more pings than the exporter posts receives for
    /// must come to, in check names.
    const BURST_ENDS: &'static str = "connection closed";
    /// After a burst of `n` pings: by default the exporter must end the
    /// connection (iWARP has no receiver-not-ready retry: a Send that
    /// finds no receive kills the queue pair).
    fn burst_ended(self, _n: u64) -> Result<(), String> {
        self.closed()
    }

    fn ctrl(&mut self, m: Ctrl) -> Result<(), String> {
        self.send(&m.encode(wire::VERSION))
    }

    /// A ping, which the exporter must answer.
    fn alive(&mut self, seq: u64) -> Result<(), String> {
        self.ctrl(Ctrl::Ping { seq })?;
        match self.next()? {
            Ctrl::Pong { seq: s } if s == seq => Ok(()),
            m => Err(format!("expected pong {seq}, got {m:?}")),
        }
    }

    /// Imports the exporter's real read-write token from chunk 0: its
    /// grant.
    fn import_real(&mut self, peer: &str) -> Result<Grant, String> {
        let tok = token(peer, "rw").map_err(|e| e.to_string())?;
        self.import(1, tok, 0)?
            .map_err(|e| format!("the real token: errno {e}"))
    }

    /// Imports `token` from chunk `first`: the exporter's answer.
    fn import(
        &mut self,
        req_id: u64,
        token: u64,
        first: u32,
    ) -> Result<Result<Grant, i32>, String> {
        self.ctrl(Ctrl::ImportReq {
            req_id,
            token,
            first_chunk: first,
        })?;
        match self.next()? {
            Ctrl::ImportResp { req_id: r, result } if r == req_id => {
                Ok(result.map_err(|e| e.get()))
            }
            m => Err(format!(
                "expected the answer to request {req_id}, got {m:?}"
            )),
        }
    }
}

/// Runs `f` on a fresh accepted connection; closes it afterwards.
fn on_peer<P: Peer>(
    peer: &str,
    nonce: u64,
    f: impl FnOnce(&mut P) -> Result<(), String>,
) -> Result<(), String> {
    let mut st = P::open(peer, nonce)?;
    let r = f(&mut st);
    r.and(st.close())
}

/// Well-formed control messages: answered, and the connection lives.
fn answered_checks<P: Peer>(t: &mut Tap, peer: &str) {
    let name = P::NAME;
    t.check(
        &format!("hostile {name}: a ping sent the moment the connection is accepted is answered with its pong"),
        on_peer::<P>(peer, 0x1001, |st| st.alive(0x5151)),
    );
    t.check(
        &format!("hostile {name}: an import of a guessed token: ENOENT, and the connection lives"),
        on_peer::<P>(peer, 0x1002, |st| {
            let r = st.import(1, 0x7e57_0000_dead_beef, 0)?;
            ensure(r == Err(ENOENT.get()), format!("answered {r:?}"))?;
            st.alive(2)
        }),
    );
    t.check(
        &format!("hostile {name}: an import of the real token from chunk 2^32-1: EINVAL, the connection lives"),
        on_peer::<P>(peer, 0x1003, |st| {
            let tok = token(peer, "rw").map_err(|e| e.to_string())?;
            let r = st.import(1, tok, u32::MAX)?;
            ensure(r == Err(EINVAL.get()), format!("answered {r:?}"))?;
            st.alive(2)
        }),
    );
    t.check(
        &format!("hostile {name}: a revoke of something it never imported: acknowledged"),
        on_peer::<P>(peer, 0x1004, |st| {
            st.ctrl(Ctrl::Revoke {
                req_id: 9,
                token: 0x1,
                generation: 1,
            })?;
            match st.next()? {
                Ctrl::RevokeAck { req_id: 9 } => st.alive(3),
                m => Err(format!(
                    "expected the acknowledgement of revoke 9, got {m:?}"
                )),
            }
        }),
    );
}

/// Control messages the exporter must end the connection for.
fn malformed() -> Vec<(&'static str, Vec<u8>)> {
    let ping = Ctrl::Ping { seq: 4 }.encode(wire::VERSION);
    let edit = |at: usize, bytes: &[u8]| {
        let mut m = ping;
        m[at..at + bytes.len()].copy_from_slice(bytes);
        m.to_vec()
    };
    let mut req = Ctrl::ImportReq {
        req_id: 1,
        token: 1,
        first_chunk: 0,
    }
    .encode(wire::VERSION);
    req[7] = 1;
    vec![
        ("a control message of 100 bytes", ping[..100].to_vec()),
        (
            "a control message of 1024 bytes (beyond the receive buffer)",
            oversized(),
        ),
        ("an empty Send", Vec::new()),
        ("a wrong magic", edit(0, b"RRDX")),
        (
            "a newer protocol version",
            edit(4, &(wire::VERSION + 1).to_le_bytes()),
        ),
        ("an unknown opcode", edit(6, &[0x7f])),
        ("an import request with a flag byte set", req.to_vec()),
        (
            "an import answer it never asked for",
            Ctrl::ImportResp {
                req_id: 77,
                result: Err(ENOENT),
            }
            .encode(wire::VERSION)
            .to_vec(),
        ),
        (
            "an acknowledgement of a revoke it never sent",
            Ctrl::RevokeAck { req_id: 77 }
                .encode(wire::VERSION)
                .to_vec(),
        ),
        (
            "a pong to a ping it never sent",
            Ctrl::Pong { seq: u64::MAX - 3 }
                .encode(wire::VERSION)
                .to_vec(),
        ),
    ]
}

/// A ping padded to twice the exporter's receive buffers.
pub(super) fn oversized() -> Vec<u8> {
    let mut m = Ctrl::Ping { seq: 4 }.encode(wire::VERSION).to_vec();
    m.resize(2 * CTRL_LEN, 0);
    m
}

/// Prints how long after `what` was sent the connection was closed
/// (`closed` is the wait's result); times are printed, not asserted.
fn timed(what: &str, closed: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    let r = closed();
    println!(
        "# {what}: the end came after {} ms",
        t0.elapsed().as_millis()
    );
    r
}

/// What the exporter must end the connection for, each on a fresh one.
fn closing_checks<P: Peer>(t: &mut Tap, peer: &str) {
    let name = P::NAME;
    for (i, (what, m)) in malformed().into_iter().enumerate() {
        let res = (|| {
            let mut st = P::open(peer, 0x2000 + i as u64)?;
            st.send(&m)?;
            timed(what, || st.closed())
        })();
        t.check(&format!("hostile {name}: {what}: connection closed"), res);
    }
    // The Send that once crashed the test kernels' siw (its receive path
    // raced the accept's, scripts/kpatch/*/0002), on 20 fresh connections.
    let res = (|| {
        for i in 0..20u64 {
            let mut st = P::open(peer, 0x2080 + i)?;
            st.send(&oversized())
                .map_err(|e| format!("connection {i}: {e}"))?;
            st.closed().map_err(|e| format!("connection {i}: {e}"))?;
        }
        Ok(())
    })();
    t.check(
        &format!("hostile {name}: 20 times a 1024-byte Send the moment the connection is accepted: closed each time"),
        res,
    );
    let res = (|| {
        let mut st = P::open(peer, 0x2101)?;
        // More Sends at once than the exporter posts receives for.
        let burst: Vec<Vec<u8>> = (0..256u64)
            .map(|seq| Ctrl::Ping { seq: seq + 1 }.encode(wire::VERSION).to_vec())
            .collect();
        st.burst(&burst)?;
        timed("the burst", || st.burst_ended(256))
    })();
    t.check(
        &format!(
            "hostile {name}: 256 pings in one burst (beyond the posted receives): {}",
            P::BURST_ENDS
        ),
        res,
    );
    for (what, stag) in [("a guessed key", 0x0000_1000), ("key 0", 0)] {
        let res = (|| {
            let mut st = P::open(peer, 0x2200 + u64::from(stag))?;
            st.rdma_write(stag, 0, &[0x5a; 64])?;
            timed("the Write", || st.closed())
        })();
        t.check(
            &format!("hostile {name}: an RDMA Write with {what}: connection closed"),
            res,
        );
        let res = (|| {
            let mut st = P::open(peer, 0x2300 + u64::from(stag))?;
            st.rdma_read(stag, 0, 64)?;
            timed("the Read request", || st.closed())
        })();
        t.check(
            &format!("hostile {name}: an RDMA Read request with {what}: connection closed"),
            res,
        );
    }
}

/// The last 8 bytes of the exporter's region in front of `end` (a byte
/// offset), read through a real connection.
pub(super) fn bytes_before(dev: &Rrdma, peer: &str, end: u64) -> Result<Vec<u8>, String> {
    let tok = token(peer, "rw").map_err(|e| e.to_string())?;
    let conn = dev
        .connect(addr(peer, PORT), T)
        .map_err(|e| format!("CONNECT: {e}"))?;
    let rr = conn.import(tok, T).map_err(|e| format!("IMPORT: {e}"))?;
    let bs = u64::from(rr.block_size());
    let local = dev
        .create_region(rr.block_size(), 1)
        .map_err(|e| e.to_string())?;
    rr.read(&local, 0, (end - 1) / bs, 1)
        .map_err(|e| format!("READ: {e}"))?;
    let at = ((end - 1) % bs + 1) as usize;
    Ok(local.as_slice()[at - 8..at].to_vec())
}

/// Keys the exporter granted, used where the grant does not reach: past
/// the end of the registration, and from another connection.
fn granted_key_checks<P: Peer>(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let name = P::NAME;
    let res = (|| {
        let mut st = P::open(peer, 0x3000)?;
        let g = st.import_real(peer)?;
        let bytes = g.nblocks * u64::from(g.block_size);
        let end = bytes.min(1 << g.chunk_shift);
        let before = bytes_before(dev, peer, end)?;
        // 16 bytes from 8 before the end of chunk 0's registration.
        st.rdma_write(g.rkeys[0], end - 8, &[0xa5; 16])?;
        st.closed()?;
        let after = bytes_before(dev, peer, end)?;
        ensure(
            before == after,
            format!("the region's last bytes went {before:02x?} -> {after:02x?}"),
        )
    })();
    t.check(
        &format!("hostile {name}: a granted key written across its registration's end: closed, nothing written"),
        res,
    );
    let res = (|| {
        let mut owner = P::open(peer, 0x3001)?;
        let g = owner.import_real(peer)?;
        let mut thief = P::open(peer, 0x3002)?;
        thief.rdma_read(g.rkeys[0], 0, 64)?;
        thief.closed()?;
        // The owner's grant still works for its own connection.
        owner.alive(5)?;
        owner.close()
    })();
    t.check(
        &format!("hostile {name}: a key granted on one connection, read from another: closed"),
        res,
    );
}

/// The attacks after the handshake over transport `P`.
pub(super) fn checks<P: Peer>(dev: &Rrdma, t: &mut Tap, peer: &str) {
    answered_checks::<P>(t, peer);
    closing_checks::<P>(t, peer);
    granted_key_checks::<P>(dev, t, peer);
    t.check(
        &format!(
            "... and after the {} attacks the listener still serves a real peer",
            P::NAME
        ),
        real_peer(dev, peer),
    );
}
