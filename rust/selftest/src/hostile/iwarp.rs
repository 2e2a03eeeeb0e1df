// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The hostile peer after the handshake (siw): once the exporter has
//! accepted an MPA connection, this side speaks iWARP itself (RDMAP over
//! DDP over MPA: RFC 5040, 5041, 5044, without markers or CRC) and sends
//! rrdma control messages as RDMAP Sends, well-formed or not, and RDMA
//! Writes and Read requests with keys it guessed or was granted.
//!
//! A well-formed message must be answered and leave the connection up; a
//! malformed, unsolicited or out-of-bounds one must end the connection
//! (the exporter's `EPROTO` and log line, or siw's terminate for what the
//! transport refuses), and nothing may be written where it should not.

use std::io::{Read, Write};
use std::net::TcpStream;

use rrdma::abi::errno::{EINVAL, ENOENT};
use rrdma::abi::wire::{self, Ctrl, Grant, CTRL_LEN};
use rrdma::Rrdma;

use super::mpa::{accepted, closed_by_peer, reset};
use super::{real_peer, PORT};
use crate::ensure;
use crate::remote::{addr, token, T};
use crate::Tap;

/// DDP control bits (RFC 5041): a tagged buffer; the message's last
/// segment; DDP version 1 and RDMAP version 1.
const DDP_TAGGED: u16 = 0x8000;
const DDP_LAST: u16 = 0x4000;
const VERSIONS: u16 = 0x0100 | 0x0040;
/// RDMAP opcodes (RFC 5040).
const OP_WRITE: u16 = 0;
const OP_READ_REQ: u16 = 1;
const OP_SEND: u16 = 3;
const OP_SEND_SE: u16 = 5;
const OP_TERMINATE: u16 = 7;
/// Untagged queues: Sends, Read requests.
const QN_SEND: u32 = 0;
const QN_READ: u32 = 1;
/// The MPA reply's CRC flag: this side asks for no CRC, and siw does not
/// insist unless loaded with `mpa_crc_required`.
const MPA_FLAG_CRC: u8 = 0x40;

/// An FPDU: the ULPDU's length, the ULPDU, padding to 4 bytes and the CRC
/// field (zero: CRC not negotiated).
fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let mut f = (ulpdu.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(ulpdu);
    let pad = (4 - f.len() % 4) % 4;
    f.resize(f.len() + pad + 4, 0);
    f
}

/// An accepted connection this side drives by hand.
struct Stream {
    s: TcpStream,
    /// Message sequence numbers of this side's untagged queues.
    send_msn: u32,
    read_msn: u32,
}

impl Stream {
    fn open(peer: &str, nonce: u64) -> Result<Self, String> {
        let (s, flags) = accepted(peer, nonce, None)?;
        if flags & MPA_FLAG_CRC != 0 {
            return Err("the exporter asks for MPA CRC (siw mpa_crc_required)".into());
        }
        // Nothing waits for the exporter to finish its accept: what is
        // sent the moment the MPA reply arrives must be received too (the
        // test kernels' siw patch scripts/kpatch/*/0002).
        Ok(Stream {
            s,
            send_msn: 0,
            read_msn: 0,
        })
    }

    fn write(&mut self, frame: &[u8]) -> Result<(), String> {
        self.s.write_all(frame).map_err(|e| format!("send: {e}"))
    }

    /// An RDMAP Send of `payload` with the next MSN, `skip` more.
    fn send_frame(&mut self, payload: &[u8], skip: u32) -> Vec<u8> {
        self.send_msn += 1 + skip;
        let mut u = (DDP_LAST | VERSIONS | OP_SEND).to_be_bytes().to_vec();
        for w in [0, QN_SEND, self.send_msn, 0] {
            u.extend_from_slice(&u32::to_be_bytes(w));
        }
        u.extend_from_slice(payload);
        fpdu(&u)
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), String> {
        let f = self.send_frame(payload, 0);
        self.write(&f)
    }

    fn ctrl(&mut self, m: Ctrl) -> Result<(), String> {
        self.send(&m.encode(wire::VERSION))
    }

    /// An RDMA Write of `data` to `stag` at `to`.
    fn rdma_write(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), String> {
        let mut u = (DDP_TAGGED | DDP_LAST | VERSIONS | OP_WRITE)
            .to_be_bytes()
            .to_vec();
        u.extend_from_slice(&stag.to_be_bytes());
        u.extend_from_slice(&to.to_be_bytes());
        u.extend_from_slice(data);
        self.write(&fpdu(&u))
    }

    /// An RDMA Read request of `len` bytes of `stag` at `to`, into a sink
    /// this side never registered.
    fn rdma_read(&mut self, stag: u32, to: u64, len: u32) -> Result<(), String> {
        self.read_msn += 1;
        let mut u = (DDP_LAST | VERSIONS | OP_READ_REQ).to_be_bytes().to_vec();
        for w in [0, QN_READ, self.read_msn, 0, 0x1000] {
            u.extend_from_slice(&u32::to_be_bytes(w));
        }
        u.extend_from_slice(&0u64.to_be_bytes());
        u.extend_from_slice(&len.to_be_bytes());
        u.extend_from_slice(&stag.to_be_bytes());
        u.extend_from_slice(&to.to_be_bytes());
        self.write(&fpdu(&u))
    }

    /// The next control message of the exporter, answering its pings on
    /// the way.
    fn next(&mut self) -> Result<Ctrl, String> {
        loop {
            let mut len = [0u8; 2];
            self.s
                .read_exact(&mut len)
                .map_err(|e| format!("reading an FPDU: {e}"))?;
            let len = usize::from(u16::from_be_bytes(len));
            let pad = (4 - (2 + len) % 4) % 4;
            let mut u = vec![0u8; len + pad + 4];
            self.s
                .read_exact(&mut u)
                .map_err(|e| format!("reading an FPDU of {len} bytes: {e}"))?;
            u.truncate(len);
            if u.len() < 2 {
                return Err(format!("an FPDU of {len} bytes"));
            }
            let op = u16::from_be_bytes([u[0], u[1]]) & 0xf;
            match op {
                OP_SEND | OP_SEND_SE if u.len() >= 18 => {
                    let m = Ctrl::decode(&u[18..])
                        .map_err(|e| format!("a Send that is no control message: {e:?}"))?;
                    match m {
                        Ctrl::Ping { seq } => self.ctrl(Ctrl::Pong { seq })?,
                        m => return Ok(m),
                    }
                }
                OP_TERMINATE => return Err("the exporter terminated the stream".into()),
                op => return Err(format!("RDMAP opcode {op} ({len} bytes)")),
            }
        }
    }

    /// A ping, which the exporter must answer.
    fn alive(&mut self, seq: u64) -> Result<(), String> {
        self.ctrl(Ctrl::Ping { seq })?;
        match self.next()? {
            Ctrl::Pong { seq: s } if s == seq => Ok(()),
            m => Err(format!("expected pong {seq}, got {m:?}")),
        }
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

    /// Ends the connection from this side (a reset), after a check that
    /// left it open.
    fn close(self) -> Result<(), String> {
        reset(self.s)
    }

    /// The exporter must close the connection.
    fn closed(mut self) -> Result<(), String> {
        closed_by_peer(&mut self.s)
    }
}

/// Runs `f` on a fresh accepted connection; resets it afterwards.
fn on_stream(
    peer: &str,
    nonce: u64,
    f: impl FnOnce(&mut Stream) -> Result<(), String>,
) -> Result<(), String> {
    let mut st = Stream::open(peer, nonce)?;
    let r = f(&mut st);
    r.and(st.close())
}

/// Well-formed control messages: answered, and the connection lives.
fn answered_checks(t: &mut Tap, peer: &str) {
    t.check(
        "hostile iWARP: a ping sent the moment the MPA reply arrives is answered with its pong",
        on_stream(peer, 0x1001, |st| st.alive(0x5151)),
    );
    t.check(
        "hostile iWARP: an import of a guessed token: ENOENT, and the connection lives",
        on_stream(peer, 0x1002, |st| {
            let r = st.import(1, 0x7e57_0000_dead_beef, 0)?;
            ensure(r == Err(ENOENT.get()), format!("answered {r:?}"))?;
            st.alive(2)
        }),
    );
    t.check(
        "hostile iWARP: an import of the real token from chunk 2^32-1: EINVAL, the connection lives",
        on_stream(peer, 0x1003, |st| {
            let tok = token(peer, "rw").map_err(|e| e.to_string())?;
            let r = st.import(1, tok, u32::MAX)?;
            ensure(r == Err(EINVAL.get()), format!("answered {r:?}"))?;
            st.alive(2)
        }),
    );
    t.check(
        "hostile iWARP: a revoke of something it never imported: acknowledged",
        on_stream(peer, 0x1004, |st| {
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

/// What the exporter must end the connection for, each on a fresh one.
fn closing_checks(t: &mut Tap, peer: &str) {
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
    let oversized = {
        let mut m = ping.to_vec();
        m.resize(2 * CTRL_LEN, 0);
        m
    };
    let messages: [(&str, Vec<u8>); 10] = [
        ("a control message of 100 bytes", ping[..100].to_vec()),
        (
            "a control message of 1024 bytes (beyond the receive buffer)",
            oversized.clone(),
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
    ];
    for (i, (what, m)) in messages.into_iter().enumerate() {
        let res = (|| {
            let mut st = Stream::open(peer, 0x2000 + i as u64)?;
            st.send(&m)?;
            st.closed()
        })();
        t.check(&format!("hostile iWARP: {what}: connection closed"), res);
    }
    // The Send that once crashed the test kernels' siw (its receive path
    // raced the accept's, scripts/kpatch/*/0002), on 20 fresh connections.
    let res = (|| {
        for i in 0..20u64 {
            let mut st = Stream::open(peer, 0x2080 + i)?;
            st.send(&oversized)
                .map_err(|e| format!("connection {i}: {e}"))?;
            st.closed().map_err(|e| format!("connection {i}: {e}"))?;
        }
        Ok(())
    })();
    t.check(
        "hostile iWARP: 20 times a 1024-byte Send the moment the MPA reply arrives: closed each time",
        res,
    );
    let res = (|| {
        let mut st = Stream::open(peer, 0x2100)?;
        st.alive(1)?;
        // The next MSN is 2: a frame numbered 3 is a replay or a gap.
        let f = st.send_frame(&ping, 1);
        st.write(&f)?;
        st.closed()
    })();
    t.check(
        "hostile iWARP: a Send whose sequence number skips one: connection closed",
        res,
    );
    let res = (|| {
        let mut st = Stream::open(peer, 0x2101)?;
        // More Sends at once than the exporter posts receives for.
        let burst: Vec<u8> = (0..256u64)
            .flat_map(|seq| st.send_frame(&Ctrl::Ping { seq: seq + 1 }.encode(wire::VERSION), 0))
            .collect();
        match st.s.write_all(&burst) {
            // Closed while the burst was still going out.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("send: {e}")),
            Ok(()) => st.closed(),
        }
    })();
    t.check(
        "hostile iWARP: 256 pings in one burst (beyond the posted receives): connection closed",
        res,
    );
    for (what, stag) in [("a guessed key", 0x0000_1000), ("key 0", 0)] {
        let res = (|| {
            let mut st = Stream::open(peer, 0x2200 + u64::from(stag))?;
            st.rdma_write(stag, 0, &[0x5a; 64])?;
            st.closed()
        })();
        t.check(
            &format!("hostile iWARP: an RDMA Write with {what}: connection closed"),
            res,
        );
        let res = (|| {
            let mut st = Stream::open(peer, 0x2300 + u64::from(stag))?;
            st.rdma_read(stag, 0, 64)?;
            st.closed()
        })();
        t.check(
            &format!("hostile iWARP: an RDMA Read request with {what}: connection closed"),
            res,
        );
    }
}

/// The last 8 bytes of the exporter's region in front of `end` (a byte
/// offset), read through a real connection.
fn bytes_before(dev: &Rrdma, peer: &str, end: u64) -> Result<Vec<u8>, String> {
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
fn granted_key_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let res = (|| {
        let tok = token(peer, "rw").map_err(|e| e.to_string())?;
        let mut st = Stream::open(peer, 0x3000)?;
        let g = st
            .import(1, tok, 0)?
            .map_err(|e| format!("the real token: errno {e}"))?;
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
        "hostile iWARP: a granted key written across its registration's end: closed, nothing written",
        res,
    );
    let res = (|| {
        let tok = token(peer, "rw").map_err(|e| e.to_string())?;
        let mut owner = Stream::open(peer, 0x3001)?;
        let g = owner
            .import(1, tok, 0)?
            .map_err(|e| format!("the real token: errno {e}"))?;
        let mut thief = Stream::open(peer, 0x3002)?;
        thief.rdma_read(g.rkeys[0], 0, 64)?;
        thief.closed()?;
        // The owner's grant still works for its own connection.
        owner.alive(5)?;
        owner.close()
    })();
    t.check(
        "hostile iWARP: a key granted on one connection, read from another: closed",
        res,
    );
}

/// The attacks after the handshake.
pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    answered_checks(t, peer);
    closing_checks(t, peer);
    granted_key_checks(dev, t, peer);
    t.check(
        "... and after the iWARP attacks the listener still serves a real peer",
        real_peer(dev, peer),
    );
}
