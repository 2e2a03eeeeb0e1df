// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The hostile peer on iWARP (siw): plain TCP against the exporter's
//! rdma_cm listener, below rdma_cm and the verbs. siw's connection manager
//! speaks MPA (RFC 5044) over TCP, and rrdma's handshake rides in the MPA
//! private data, so a TCP socket can send any handshake, or none, and can
//! reset connections siw has not accepted yet.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use rrdma::abi::errno::Errno;
use rrdma::abi::wire::{self, Hello};
use rrdma::Rrdma;

use super::{hello, real_peer, PORT, WAIT};
use crate::ensure;
use crate::remote::{addr, T};
use crate::Tap;

const KEY_REQ: &[u8; 16] = b"MPA ID Req Frame";
const KEY_REP: &[u8; 16] = b"MPA ID Rep Frame";
/// How long siw's MPA request timer (10 s) may take to close a silent
/// connection.
const MPA_TIMER_WAIT: Duration = Duration::from_secs(60);
/// MPA header flags (the high byte of the 16-bit field after the key).
const FLAG_MARKERS: u8 = 0x80;
const FLAG_REJECT: u8 = 0x20;

fn sock(peer: &str) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&addr(peer, PORT), T)
        .map_err(|e| format!("TCP connect: {e}"))?;
    s.set_read_timeout(Some(WAIT)).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Closes `s` with a reset instead of a FIN (SO_LINGER 0).
pub(super) fn reset(s: TcpStream) -> Result<(), String> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `s` is an open socket and `l` a valid `linger` for the call.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            core::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(format!("SO_LINGER: {}", io::Error::last_os_error()));
    }
    Ok(())
}

/// An MPA request frame, revision 1 (no IRD/ORD negotiation), with `flags`
/// and private data `pd`.
fn request(flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
    let mut f = KEY_REQ.to_vec();
    f.extend_from_slice(&[flags, rev]);
    f.extend_from_slice(&(pd.len() as u16).to_be_bytes());
    f.extend_from_slice(pd);
    f
}

/// An MPA reply: its flags and private data.
struct Reply {
    flags: u8,
    pd: Vec<u8>,
}

fn read_reply(s: &mut TcpStream) -> Result<Reply, String> {
    let mut h = [0u8; 20];
    s.read_exact(&mut h)
        .map_err(|e| format!("reading the MPA reply: {e}"))?;
    if &h[..16] != KEY_REP {
        return Err(format!("not an MPA reply: {:02x?}", &h[..16]));
    }
    let len = u16::from_be_bytes([h[18], h[19]]) as usize;
    let mut pd = vec![0u8; len];
    s.read_exact(&mut pd)
        .map_err(|e| format!("reading {len} bytes of private data: {e}"))?;
    Ok(Reply { flags: h[16], pd })
}

/// Waits until the peer closes `s` (EOF or reset), reading and dropping
/// whatever it sends first.
pub(super) fn closed_by_peer(s: &mut TcpStream) -> Result<(), String> {
    let t0 = Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(format!("still open after {:?}: {e}", t0.elapsed())),
        }
    }
}

/// Sends an MPA request carrying `pd`; expects rrdma's reject with `want`.
fn refused(peer: &str, pd: &[u8], want: Errno) -> Result<(), String> {
    let mut s = sock(peer)?;
    s.write_all(&request(0, 1, pd)).map_err(|e| e.to_string())?;
    let r = read_reply(&mut s)?;
    if r.flags & FLAG_REJECT == 0 {
        return Err(format!("accepted (flags {:#x}, {:02x?})", r.flags, r.pd));
    }
    match wire::decode_reject(&r.pd) {
        Some(got) if got == want => {}
        Some(got) => {
            return Err(format!(
                "rejected with errno {}, expected {}",
                got.get(),
                want.get()
            ))
        }
        None => return Err(format!("not an rrdma reject: {:02x?}", r.pd)),
    }
    closed_by_peer(&mut s)
}

/// Malformed handshakes in a well-formed MPA request: each one is
/// rejected with the errno the decoder gives it.
fn handshake_checks(t: &mut Tap, peer: &str) {
    for (what, pd, want) in super::malformed_hellos(true) {
        t.check(
            &format!(
                "hostile MPA request with {what}: rejected with errno {}",
                want.get()
            ),
            refused(peer, &pd, want),
        );
    }
}

/// Requests siw refuses before rrdma sees them: a closed connection (or
/// siw's own reject without private data), never an rrdma connection.
fn mpa_checks(t: &mut Tap, peer: &str) {
    let res = (|| {
        let mut s = sock(peer)?;
        s.write_all(&[0xa5; 64]).map_err(|e| e.to_string())?;
        closed_by_peer(&mut s)
    })();
    t.check("hostile: 64 bytes that are not MPA: connection closed", res);
    let res = (|| {
        let mut s = sock(peer)?;
        s.write_all(&request(0, 3, &hello()))
            .map_err(|e| e.to_string())?;
        closed_by_peer(&mut s)
    })();
    t.check("hostile: MPA revision 3: connection closed", res);
    let res = (|| {
        let mut s = sock(peer)?;
        let mut f = request(0, 1, &[]);
        // A length beyond MPA's 256-byte maximum, with the bytes sent.
        f[18..20].copy_from_slice(&1000u16.to_be_bytes());
        f.extend_from_slice(&[0u8; 1000]);
        s.write_all(&f).map_err(|e| e.to_string())?;
        closed_by_peer(&mut s)
    })();
    t.check(
        "hostile: 1000 bytes of MPA private data: connection closed",
        res,
    );
    let res = (|| {
        let mut s = sock(peer)?;
        s.write_all(&request(FLAG_MARKERS, 1, &hello()))
            .map_err(|e| e.to_string())?;
        let r = read_reply(&mut s)?;
        if r.flags & FLAG_REJECT == 0 {
            return Err(format!("accepted (flags {:#x})", r.flags));
        }
        closed_by_peer(&mut s)
    })();
    t.check("hostile: MPA markers (unsupported): rejected", res);
    let res = (|| {
        let mut s = sock(peer)?;
        // siw's MPA timer is 10 s; on a debug kernel under TCG it has
        // fired more than 20 s after the connection (make check, once).
        s.set_read_timeout(Some(MPA_TIMER_WAIT))
            .map_err(|e| e.to_string())?;
        // Half a header, then silence: siw's MPA timer must end it.
        s.write_all(&request(0, 1, &hello())[..9])
            .map_err(|e| e.to_string())?;
        closed_by_peer(&mut s)
    })();
    t.check(
        "hostile: a truncated MPA header, then silence: closed by the MPA timer",
        res,
    );
}

/// A valid handshake from a peer that then talks nonsense: accepted, and
/// torn down on the first bad frame. The same hello twice (a replay) is
/// accepted twice: the nonce tells reconnects apart, it is no credential
/// (the tokens are).
fn accepted_checks(t: &mut Tap, peer: &str) {
    let mut padded = hello().to_vec();
    padded.resize(255, 0xee);
    for (round, pd) in [
        ("a valid hello", hello().to_vec()),
        ("the same hello replayed", hello().to_vec()),
        ("a valid hello padded to 255 bytes", padded),
    ] {
        let res = (|| {
            let mut s = sock(peer)?;
            s.write_all(&request(0, 1, &pd))
                .map_err(|e| e.to_string())?;
            let r = read_reply(&mut s)?;
            if r.flags & FLAG_REJECT != 0 {
                return Err(format!("rejected: {:02x?}", r.pd));
            }
            let h = Hello::decode(&r.pd)
                .map_err(|e| format!("the accept's hello: errno {}", e.get()))?;
            if h.version != wire::VERSION {
                return Err(format!("accepted version {}", h.version));
            }
            // An MPA frame (length 16) whose DDP header is all ones.
            let mut f = 16u16.to_be_bytes().to_vec();
            f.extend_from_slice(&[0xff; 16]);
            s.write_all(&f).map_err(|e| e.to_string())?;
            closed_by_peer(&mut s)
        })();
        t.check(
            &format!("hostile: {round}, then a bad frame: accepted, then closed"),
            res,
        );
    }
    let res = (|| {
        let mut s = sock(peer)?;
        s.write_all(&request(0, 1, &hello()))
            .map_err(|e| e.to_string())?;
        read_reply(&mut s)?;
        reset(s)
    })();
    t.check("hostile: a valid hello, then a reset", res);
}

/// An accepted handshake from this host with `nonce`, naming `replaces`:
/// the stream and the MPA reply's flags.
pub(super) fn accepted(
    peer: &str,
    nonce: u64,
    replaces: Option<u64>,
) -> Result<(TcpStream, u8), String> {
    let mut s = sock(peer)?;
    s.write_all(&request(0, 1, &super::hello_of(nonce, replaces, None)))
        .map_err(|e| e.to_string())?;
    let r = read_reply(&mut s)?;
    if r.flags & FLAG_REJECT != 0 {
        return Err(format!("rejected: {:02x?}", r.pd));
    }
    Ok((s, r.flags))
}

/// The reconnect fence, driven by hand: a hello that names a connection of
/// this host by its nonce ends it before it is accepted; one that names a
/// nonce the exporter does not hold ends nothing.
fn fence_checks(t: &mut Tap, peer: &str) {
    let replaced = || crate::remote::peer_count(peer, "rrdma-connections-replaced");
    let old_nonce = 0x0123_4567_89ab_cdef;
    let res = (|| {
        let before = replaced()?;
        let (mut old, _) = accepted(peer, old_nonce, None)?;
        let (wrong, _) = accepted(peer, 2, Some(old_nonce ^ 1))?;
        let after_wrong = replaced()?;
        if after_wrong != before {
            return Err(format!("a wrong nonce replaced {before} -> {after_wrong}"));
        }
        let (new, _) = accepted(peer, 3, Some(old_nonce))?;
        closed_by_peer(&mut old)?;
        let after = replaced()?;
        for s in [wrong, new] {
            reset(s)?;
        }
        ensure(after == before + 1, format!("replaced {before} -> {after}"))
    })();
    t.check(
        "hostile: a hello naming this host's connection ends it, a wrong nonce nothing",
        res,
    );
}

/// Connections reset before siw accepts them. siw let such a close tear
/// down the listener itself (scripts/kpatch/*/0003).
fn reset_flood(t: &mut Tap, peer: &str) {
    let res = (|| {
        for i in 0..300 {
            let s = sock(peer).map_err(|e| format!("connection {i}: {e}"))?;
            reset(s).map_err(|e| format!("connection {i}: {e}"))?;
        }
        Ok(())
    })();
    t.check("hostile: 300 TCP connections reset at once", res);
}

/// Silent connections held open: the listener keeps serving meanwhile.
fn silent_flood(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let held: Vec<TcpStream> = (0..64).filter_map(|_| sock(peer).ok()).collect();
    t.check(
        "hostile: 64 silent TCP connections held open",
        if held.len() == 64 {
            Ok(())
        } else {
            Err(format!("only {} connected", held.len()))
        },
    );
    t.check(
        "... and meanwhile a real CONNECT and IMPORT work",
        real_peer(dev, peer),
    );
    drop(held);
}

/// The attacks over TCP.
pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    reset_flood(t, peer);
    t.check(
        "... and the listener still serves a real peer",
        real_peer(dev, peer),
    );
    handshake_checks(t, peer);
    mpa_checks(t, peer);
    accepted_checks(t, peer);
    fence_checks(t, peer);
    super::iwarp::checks(dev, t, peer);
    silent_flood(dev, t, peer);
}
