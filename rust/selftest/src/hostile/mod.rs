// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A hostile peer against the exporter (`rrdma serve` on the other guest):
//! malformed and replayed handshakes, connection floods and guessed
//! tokens, sent below rrdma's library.
//!
//! - On iWARP (siw), [`mpa`] speaks MPA over plain TCP, and [`iwarp`]
//!   the RDMAP framing after it: control messages, Writes and Reads.
//! - On RoCE (rxe), [`ucma`] sends rdma_cm connect requests with any
//!   private data through the kernel's user CM ABI, and [`verbs`] a real
//!   queue pair's Sends, Writes and Reads after an accepted one.
//! - [`after`] holds the attacks after the handshake, for either.
//!
//! Each attack must end in a reject carrying rrdma's errno, or in a closed
//! connection, and must leave the listener serving: afterwards a real
//! CONNECT and IMPORT work, and the exporter holds no more connections
//! than before. The exporter's kernel log is checked by the harness (no
//! WARNING, no KASAN report).

mod after;
mod iwarp;
mod mpa;
pub(crate) mod ucma;
mod verbs;

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{Errno, EBUSY, ENOENT, EPROTO, EPROTONOSUPPORT};
use rrdma::abi::wire::{self, Hello, CTRL_RECV_MIN, HELLO_LEN};
use rrdma::{Connection, Rrdma};

use crate::remote::{addr, token, T};
use crate::Tap;

/// The exporter's rdma_cm port (`rrdma serve --listen 0.0.0.0:7471`).
const PORT: u16 = 7471;
/// How long the exporter may take to answer or to close a connection
/// (siw's MPA request timeout is 10 s).
const WAIT: Duration = Duration::from_secs(20);

/// A valid hello of this version from a connection `nonce`, replacing
/// `replaces`, or joining as `lane`.
fn hello_of(nonce: u64, replaces: Option<u64>, lane: Option<u16>) -> [u8; HELLO_LEN] {
    hello_qps(nonce, 1, replaces, lane)
}

/// As [`hello_of`], offering `qps` queue pairs.
pub(crate) fn hello_qps(
    nonce: u64,
    qps: u16,
    replaces: Option<u64>,
    lane: Option<u16>,
) -> [u8; HELLO_LEN] {
    Hello {
        version: wire::VERSION,
        ctrl_credits: CTRL_RECV_MIN,
        qps,
        nonce,
        replaces,
        lane,
    }
    .encode()
}

fn hello() -> [u8; HELLO_LEN] {
    hello_of(0x5eed_0bad_cafe_f00d, None, None)
}

/// Malformed handshakes and the errno each must be rejected with. IB CM
/// pads the request's private data with zeros, so a hello one byte short
/// is whole again there: it is in the list only when `exact` (MPA carries
/// the length).
fn malformed_hellos(exact: bool) -> Vec<(&'static str, Vec<u8>, Errno)> {
    let good = hello();
    let mut cases = vec![
        ("no private data", Vec::new(), EPROTO),
        ("a truncated hello (10 bytes)", good[..10].to_vec(), EPROTO),
    ];
    if exact {
        cases.push((
            "a hello one byte short",
            good[..HELLO_LEN - 1].to_vec(),
            EPROTO,
        ));
    }
    let mut edit = |what, at: usize, bytes: &[u8], want| {
        let mut m = good;
        m[at..at + bytes.len()].copy_from_slice(bytes);
        cases.push((what, m.to_vec(), want));
    };
    edit("a wrong magic", 0, &[0xff], EPROTO);
    edit("version 1", 4, &1u16.to_le_bytes(), EPROTONOSUPPORT);
    edit("version 0", 4, &0u16.to_le_bytes(), EPROTONOSUPPORT);
    edit("an undefined flag", 6, &[2], EPROTO);
    edit("an unflagged replaced nonce", 24, &[1], EPROTO);
    edit("a non-zero reserved byte", 13, &[0x80], EPROTO);
    edit(
        "too few receive credits",
        8,
        &(CTRL_RECV_MIN - 1).to_le_bytes(),
        EPROTO,
    );
    edit("zero queue pairs", 10, &0u16.to_le_bytes(), EPROTO);
    // Lanes (version 5): this build grants none, so no connection has
    // one to join; a malformed lane hello is EPROTO.
    let lane =
        |l: u16, replaces: Option<u64>| hello_of(0x5eed_0bad_cafe_f00d, replaces, Some(l)).to_vec();
    cases.push(("a lane joining no connection", lane(1, None), ENOENT));
    let mut lane0 = lane(1, None);
    lane0[12] = 0;
    cases.push(("a lane numbered 0", lane0, EPROTO));
    cases.push((
        "a lane that also replaces a connection",
        lane(2, Some(1)),
        EPROTO,
    ));
    let junk = (0..48u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(11))
        .collect();
    cases.push(("48 bytes of junk", junk, EPROTO));
    cases
}

fn real_peer(dev: &Rrdma, peer: &str) -> Result<(), String> {
    let tok = token(peer, "rw").map_err(|e| e.to_string())?;
    let conn = dev
        .connect(addr(peer, PORT), T)
        .map_err(|e| format!("CONNECT: {e}"))?;
    conn.import(tok, T)
        .map(|_| ())
        .map_err(|e| format!("IMPORT: {e}"))
}

pub(super) fn live_conns(peer: &str) -> Result<u64, String> {
    crate::remote::peer_count(peer, "rrdma-connections-live")
}

/// Connect requests through rdma_cm with malformed handshakes (rxe), then
/// the attacks after the handshake; `before`: the exporter's live
/// connections before the attacks.
fn cm_checks(dev: &Rrdma, t: &mut Tap, peer: &str, before: u64) {
    let u = match ucma::Ucma::open() {
        Ok(u) => u,
        Err(e) => return t.check("hostile: open /dev/infiniband/rdma_cm", Err(e.to_string())),
    };
    let dst: SocketAddrV4 = match format!("{peer}:{PORT}").parse() {
        Ok(a) => a,
        Err(e) => return t.check("hostile: the peer's address", Err(format!("{e}"))),
    };
    let refused = |pd: &[u8], want: Errno| -> Result<(), String> {
        let e = u.request(dst, pd, WAIT).map_err(|e| e.to_string())?;
        if e.event != ucma::EV_REJECTED {
            return Err(format!(
                "event {} (status {}), expected a reject",
                e.event, e.status
            ));
        }
        match wire::decode_reject(&e.private_data) {
            Some(got) if got == want => Ok(()),
            Some(got) => Err(format!(
                "rejected with errno {}, expected {}",
                got.get(),
                want.get()
            )),
            None => Err(format!("not an rrdma reject: {:02x?}", e.private_data)),
        }
    };
    for (what, pd, want) in malformed_hellos(false) {
        t.check(
            &format!(
                "hostile connect request with {what}: rejected with errno {}",
                want.get()
            ),
            refused(&pd, want),
        );
    }
    // A valid hello from a peer without a queue pair, 20 times (replays):
    // each is accepted, then rejected by the hostile side as it goes.
    let res = (|| {
        for i in 0..20 {
            let e = u
                .request(dst, &hello(), WAIT)
                .map_err(|e| format!("try {i}: {e}"))?;
            if e.event != ucma::EV_CONNECT_RESPONSE {
                return Err(format!("try {i}: event {} (status {})", e.event, e.status));
            }
        }
        Ok(())
    })();
    t.check(
        "hostile: a valid hello replayed 20 times: accepted each time",
        res,
    );
    let res = (|| {
        for i in 0..200 {
            refused(&[0xa5; 24], EPROTO).map_err(|e| format!("request {i}: {e}"))?;
        }
        Ok(())
    })();
    t.check(
        "hostile: 200 malformed connect requests in a row: each rejected",
        res,
    );
    t.check(
        "... and the listener still serves a real peer",
        real_peer(dev, peer),
    );
    verbs::checks(dev, t, peer, before);
    silent_after_accept(dev, t, peer, dst);
}

/// Valid hellos from a peer that then goes silent (it never completes the
/// handshake): they fill the listener's backlog until its accept deadline
/// (10 s) drops them, while the silent ids are still held.
fn silent_after_accept(dev: &Rrdma, t: &mut Tap, peer: &str, dst: SocketAddrV4) {
    let silent = match ucma::Ucma::open() {
        Ok(u) => u,
        Err(e) => return t.check("hostile: open /dev/infiniband/rdma_cm", Err(e.to_string())),
    };
    let res = (|| {
        let (mut accepted, mut busy) = (0, 0);
        for i in 0..24 {
            let e = silent
                .request_and_go_silent(dst, &hello(), WAIT)
                .map_err(|e| format!("request {i}: {e}"))?;
            match (e.event, wire::decode_reject(&e.private_data)) {
                (ucma::EV_CONNECT_RESPONSE, _) => accepted += 1,
                (ucma::EV_REJECTED, Some(errno)) if errno == EBUSY => busy += 1,
                _ => {
                    return Err(format!(
                        "request {i}: event {} (status {})",
                        e.event, e.status
                    ))
                }
            }
        }
        if busy == 0 {
            return Err(format!(
                "{accepted} accepted and none refused: the backlog never filled"
            ));
        }
        Ok(())
    })();
    t.check(
        "hostile: 24 valid requests whose peer goes silent: the backlog fills (EBUSY)",
        res,
    );
    std::thread::sleep(Duration::from_secs(12));
    t.check(
        "... and 12 s later, the silent ones still held, a real peer connects",
        real_peer(dev, peer),
    );
    drop(silent);
}

/// Guessed tokens on a real connection: each IMPORT is ENOENT, and the
/// connection stays usable.
fn token_guesses(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let res = (|| {
        let conn: Connection<'_> = dev
            .connect(addr(peer, PORT), T)
            .map_err(|e| format!("CONNECT: {e}"))?;
        let real = token(peer, "rw").map_err(|e| e.to_string())?;
        let mut x = real ^ 0x9e37_79b9_7f4a_7c15;
        for i in 0..200 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if x == real {
                continue;
            }
            match conn.import(x, T) {
                Ok(_) => return Err(format!("guess {i} ({x:#x}) imported")),
                Err(e) if e.raw_os_error() == Some(ENOENT.get()) => {}
                Err(e) => return Err(format!("guess {i}: {e}, expected ENOENT")),
            }
        }
        conn.import(real, T)
            .map(|_| ())
            .map_err(|e| format!("the real token then: {e}"))
    })();
    t.check(
        "hostile: 200 guessed tokens: ENOENT each, then the real one imports",
        res,
    );
}

/// The hostile peer's attacks on provider `prov`.
pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, prov: &str) {
    let before = match live_conns(peer) {
        Ok(n) => n,
        Err(e) => return t.check("hostile: the exporter's connection count", Err(e)),
    };
    if prov == "siw" {
        mpa::checks(dev, t, peer);
    } else {
        cm_checks(dev, t, peer, before);
    }
    token_guesses(dev, t, peer);
    let t0 = Instant::now();
    let res = loop {
        match live_conns(peer) {
            Ok(n) if n <= before => break Ok(()),
            Ok(n) if t0.elapsed() > WAIT => {
                break Err(format!("{n} live connections, {before} before the attacks"))
            }
            Err(e) => break Err(e),
            Ok(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    t.check(
        "hostile: afterwards the exporter holds no more connections than before",
        res,
    );
}
