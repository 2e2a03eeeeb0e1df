// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The hostile peer after the handshake on RoCE (rxe): a real RC queue
//! pair of its own, connected through librdmacm with a valid hello, from
//! which it sends what the checks in [`super::after`] want: control
//! messages as Sends, RDMA Writes and Read requests with any key. rxe
//! itself refuses a bad key (a NAK that takes both queue pairs to the
//! error state); what it delivers, rrdma must refuse.
//!
//! The verbs calls are static inline functions of rdma-core's headers, so
//! they are made in C (`csrc/verbs_peer.c`, linked statically with the rxe
//! provider by `build.rs`); this file is its thin, safe owner.

use core::ffi::c_void;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrdma::abi::errno::{Errno, ENOENT};
use rrdma::abi::wire::{self, Ctrl};
use rrdma::Rrdma;

use super::after::{self, Peer};
use super::{PORT, WAIT};
use crate::{ensure, Tap};

/// How soon the exporter must end a connection it should end: before its
/// keepalive (15 s in the guests) could, so that the end comes from what
/// this side sent. A Write with a bad key sent before the exporter saw its
/// ESTABLISHED event once took the keepalive's 15 s; the ends now take
/// 14-257 ms (7.3 and debug 6.12). The ping burst has its own end
/// ([`Peer::burst_ended`]).
const CLOSED_WITHIN: Duration = Duration::from_secs(10);
/// The exporter's live connections before the attacks, and this side's
/// connections open now: with none of its own left, the exporter holds
/// no more than their sum.
static BASELINE: AtomicU64 = AtomicU64::new(0);
static OPEN: AtomicU64 = AtomicU64::new(0);
/// Bytes of one buffer slot of the C side (`VP_SLOT`).
const SLOT: usize = 1024;
/// `RDMA_CM_EVENT_REJECTED`.
const EV_REJECTED: u32 = 8;
/// `IBV_WC_SUCCESS`.
const WC_SUCCESS: u32 = 0;

/// `struct vp_result`.
#[repr(C)]
struct VpResult {
    err: i32,
    event: u32,
    status: i32,
    private_data_len: u8,
    private_data: [u8; 255],
}

/// `struct vp_wc`.
#[repr(C)]
struct VpWc {
    wr_id: u64,
    status: u32,
    opcode: u32,
    byte_len: u32,
    recv: u32,
    data: [u8; SLOT],
}

extern "C" {
    fn vp_connect(
        ip: u32,
        port: u16,
        private_data: *const u8,
        private_data_len: u8,
        timeout_ms: i32,
        r: *mut VpResult,
    ) -> *mut c_void;
    fn vp_listen(port: u16, r: *mut VpResult) -> *mut c_void;
    fn vp_accept(
        l: *mut c_void,
        private_data: *const u8,
        private_data_len: u8,
        timeout_ms: i32,
        r: *mut VpResult,
    ) -> *mut c_void;
    fn vp_destroy(v: *mut c_void);
    fn vp_send(v: *mut c_void, data: *const u8, len: u32) -> i32;
    fn vp_write(v: *mut c_void, data: *const u8, len: u32, raddr: u64, rkey: u32) -> i32;
    fn vp_read(v: *mut c_void, len: u32, raddr: u64, rkey: u32) -> i32;
    fn vp_slot_copy(v: *mut c_void, slot: u32, out: *mut u8, len: u32);
    fn vp_poll(v: *mut c_void, timeout_ms: i32, wc: *mut VpWc) -> i32;
    fn vp_disconnected(v: *mut c_void, timeout_ms: i32) -> i32;
}

fn wait_ms() -> i32 {
    WAIT.as_millis() as i32
}

/// How a connect went.
enum Connected {
    Yes(Verbs),
    /// Rejected, with rrdma's errno (`None`: not an rrdma reject).
    Refused(Option<Errno>),
}

/// A connection of the C side, destroyed (disconnected first) on drop.
pub(super) struct Verbs {
    /// INVARIANT: a connection `vp_connect` returned, destroyed only by
    /// `drop`.
    v: *mut c_void,
    /// The exporter's address.
    peer: String,
}

impl Drop for Verbs {
    fn drop(&mut self) {
        // SAFETY: `v` is live (type invariant) and not used after this.
        unsafe { vp_destroy(self.v) }
        OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Verbs {
    /// Owns connection `v` to (or from) `peer`, counted in [`OPEN`].
    ///
    /// # Safety
    ///
    /// `v` is a live connection `vp_connect` or `vp_accept` returned, and
    /// nothing else destroys it.
    unsafe fn own(v: *mut c_void, peer: &str) -> Self {
        OPEN.fetch_add(1, Ordering::Relaxed);
        // INVARIANT: live, and owned from here (the caller's guarantee).
        Verbs {
            v,
            peer: peer.to_string(),
        }
    }

    /// Connects to the exporter at `peer` with hello `h`: the connection,
    /// or the errno of the exporter's reject (`None`: not rrdma's).
    fn connect_with(peer: &str, h: &[u8]) -> Result<Connected, String> {
        let ip: Ipv4Addr = peer.parse().map_err(|e| format!("{peer}: {e}"))?;
        let mut r = new_result();
        // SAFETY: `h` and `r` are valid for the call; C copies what it
        // keeps.
        let v = unsafe {
            vp_connect(
                u32::from_ne_bytes(ip.octets()),
                PORT.to_be(),
                h.as_ptr(),
                h.len() as u8,
                wait_ms(),
                &mut r,
            )
        };
        if !v.is_null() {
            // SAFETY: `vp_connect` returned it, to no other owner.
            return Ok(Connected::Yes(unsafe { Verbs::own(v, peer) }));
        }
        let pd = &r.private_data[..usize::from(r.private_data_len)];
        if r.event == EV_REJECTED {
            return Ok(Connected::Refused(wire::decode_reject(pd)));
        }
        Err(format!(
            "connect: {} (last event {}, status {})",
            std::io::Error::from_raw_os_error(-r.err),
            r.event,
            r.status
        ))
    }

    /// Whether a DISCONNECTED event comes within `d`.
    fn disconnected_within(&self, d: Duration) -> Result<bool, String> {
        // SAFETY: `v` is live.
        match unsafe { vp_disconnected(self.v, d.as_millis() as i32) } {
            1 => Ok(true),
            0 => Ok(false),
            e => Err(format!(
                "waiting for the end: {}",
                std::io::Error::from_raw_os_error(-e)
            )),
        }
    }

    /// Waits for the next work completion, which must be a success.
    fn completion(&mut self) -> Result<VpWc, String> {
        let mut wc = new_wc();
        // SAFETY: `v` is live and `wc` valid for the call.
        match unsafe { vp_poll(self.v, wait_ms(), &mut wc) } {
            1 => {}
            0 => return Err(format!("no work completion within {WAIT:?}")),
            e => {
                return Err(format!(
                    "polling: {}",
                    std::io::Error::from_raw_os_error(-e)
                ))
            }
        }
        if wc.status != WC_SUCCESS {
            return Err(format!(
                "a work completion with status {} (opcode {})",
                wc.status, wc.opcode
            ));
        }
        Ok(wc)
    }

    /// A received control message: `None` if it was a ping (answered).
    fn received(&mut self, wc: &VpWc) -> Result<Option<Ctrl>, String> {
        let len = (wc.byte_len as usize).min(SLOT);
        match Ctrl::decode(&wc.data[..len])
            .map_err(|e| format!("a Send that is no control message: {e:?}"))?
        {
            Ctrl::Ping { seq } => self.ctrl(Ctrl::Pong { seq }).map(|()| None),
            m => Ok(Some(m)),
        }
    }

    /// Posts an RDMA Read into a slot of C's: the slot.
    fn post_read(&mut self, stag: u32, to: u64, len: u32) -> Result<u32, String> {
        // SAFETY: `v` is live; the sink is C's own slot.
        let rc = unsafe { vp_read(self.v, len, to, stag) };
        if rc < 0 {
            Self::posted("an RDMA Read", rc)?;
        }
        Ok(rc as u32)
    }

    /// Reads `len` bytes (at most a slot) of `stag` at `to`: the bytes.
    fn read_back(&mut self, stag: u32, to: u64, len: u32) -> Result<Vec<u8>, String> {
        let slot = self.post_read(stag, to, len)?;
        loop {
            let wc = self.completion()?;
            if wc.recv != 0 {
                if let Some(m) = self.received(&wc)? {
                    return Err(format!("unasked for: {m:?}"));
                }
            } else if wc.wr_id == u64::from(slot) {
                let mut out = vec![0u8; (len as usize).min(SLOT)];
                // SAFETY: `v` is live; `out` holds the bytes copied.
                unsafe { vp_slot_copy(self.v, slot, out.as_mut_ptr(), out.len() as u32) };
                return Ok(out);
            }
        }
    }

    /// Whether the connection ended, waiting up to `ms` for the CM: a
    /// DISCONNECTED event, or the exporter no longer holds it. The second
    /// is for an end before the exporter's CM processed this side's RTU
    /// (the first Send raced it): its CM then rejects, and this side's CM,
    /// established already, drops the reject, so no event comes.
    fn gone(&self, ms: i32) -> Result<bool, String> {
        // SAFETY: `v` is live.
        match unsafe { vp_disconnected(self.v, ms) } {
            1 => return Ok(true),
            0 => {}
            e => {
                return Err(format!(
                    "waiting for the end: {}",
                    std::io::Error::from_raw_os_error(-e)
                ))
            }
        }
        let others = OPEN.load(Ordering::Relaxed) - 1;
        if super::live_conns(&self.peer)? <= BASELINE.load(Ordering::Relaxed) + others {
            println!(
                "# ended by the exporter before its CM established it (no DISCONNECTED event)"
            );
            return Ok(true);
        }
        Ok(false)
    }

    fn posted(what: &str, rc: i32) -> Result<(), String> {
        match rc {
            0 => Ok(()),
            e => Err(format!(
                "posting {what}: {}",
                std::io::Error::from_raw_os_error(-e)
            )),
        }
    }
}

impl Peer for Verbs {
    const NAME: &'static str = "RoCE";

    fn open(peer: &str, nonce: u64) -> Result<Self, String> {
        match Verbs::connect_with(peer, &super::hello_of(nonce, None, None))? {
            Connected::Yes(v) => Ok(v),
            Connected::Refused(e) => Err(format!("rejected: errno {:?}", e.map(|e| e.get()))),
        }
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), String> {
        if payload.len() > SLOT {
            return Err(format!("a Send of {} bytes", payload.len()));
        }
        // SAFETY: `v` is live; C copies `payload` before it returns.
        let rc = unsafe { vp_send(self.v, payload.as_ptr(), payload.len() as u32) };
        Self::posted("a Send", rc)
    }

    fn burst(&mut self, msgs: &[Vec<u8>]) -> Result<(), String> {
        // Posted back to back: rxe sends them without waiting for the
        // exporter's receives (and retries what it refuses for lack of
        // one, RNR).
        msgs.iter().try_for_each(|m| self.send(m))
    }

    fn rdma_write(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), String> {
        if data.len() > SLOT {
            return Err(format!("a Write of {} bytes", data.len()));
        }
        // SAFETY: `v` is live; C copies `data` before it returns.
        let rc = unsafe { vp_write(self.v, data.as_ptr(), data.len() as u32, to, stag) };
        Self::posted("an RDMA Write", rc)
    }

    fn rdma_read(&mut self, stag: u32, to: u64, len: u32) -> Result<(), String> {
        self.post_read(stag, to, len).map(|_| ())
    }

    fn next(&mut self) -> Result<Ctrl, String> {
        loop {
            let wc = self.completion()?;
            if wc.recv == 0 {
                // One of this side's sends.
                continue;
            }
            if let Some(m) = self.received(&wc)? {
                return Ok(m);
            }
        }
    }

    fn close(self) -> Result<(), String> {
        // Dropped: disconnected and destroyed.
        Ok(())
    }

    /// Ended: a DISCONNECTED event, or the exporter no longer holds the
    /// connection (see [`Verbs::gone`]).
    fn closed(self) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if self.gone(100)? {
                return Ok(());
            }
            if t0.elapsed() > CLOSED_WITHIN {
                return Err(format!("still connected after {CLOSED_WITHIN:?}"));
            }
        }
    }

    const BURST_ENDS: &'static str = "each answered, or the connection closed";

    /// rxe holds back a Send that finds no receive (receiver not ready)
    /// and retries it, so the pings trickle in as the exporter posts its
    /// receives again: it answers each while its send buffers and
    /// backlog have room, and ends the connection ("ping beyond the
    /// limit") when they have not. Either is right; the connection must
    /// not hang between the two: it fails once `WAIT` passed with no pong
    /// (the debug kernel on rxe answered 222 in its first 20 s once).
    fn burst_ended(mut self, n: u64) -> Result<(), String> {
        let mut t0 = Instant::now();
        let mut pongs = 0;
        loop {
            if self.gone(0)? {
                println!("# the burst: closed after {pongs} of {n} pongs");
                return Ok(());
            }
            let mut wc = new_wc();
            // SAFETY: `v` is live and `wc` valid for the call.
            match unsafe { vp_poll(self.v, 100, &mut wc) } {
                1 if wc.status != WC_SUCCESS => {
                    // This side's queue pair failed with the exporter's.
                    return self.closed();
                }
                1 if wc.recv != 0 => match self.received(&wc)? {
                    Some(Ctrl::Pong { seq }) if (1..=n).contains(&seq) => {
                        pongs += 1;
                        t0 = Instant::now();
                    }
                    None => {}
                    Some(m) => return Err(format!("unasked for: {m:?}")),
                },
                1 | 0 => {}
                e => {
                    return Err(format!(
                        "polling: {}",
                        std::io::Error::from_raw_os_error(-e)
                    ))
                }
            }
            if pongs == n {
                self.alive(n + 1)?;
                println!("# the burst: all {n} pings answered, the connection lives");
                return Ok(());
            }
            if t0.elapsed() > WAIT {
                return Err(format!(
                    "{pongs} of {n} pongs, and still connected, none for {WAIT:?}"
                ));
            }
        }
    }
}

fn new_wc() -> VpWc {
    VpWc {
        wr_id: 0,
        status: 0,
        opcode: 0,
        byte_len: 0,
        recv: 0,
        data: [0; SLOT],
    }
}

fn new_result() -> VpResult {
    VpResult {
        err: 0,
        event: 0,
        status: 0,
        private_data_len: 0,
        private_data: [0; 255],
    }
}

/// A hostile listener of this side's (the exporter an importer connects
/// to), destroyed on drop.
struct Listening {
    /// INVARIANT: a listener `vp_listen` returned, destroyed only by
    /// `drop`.
    l: *mut c_void,
}

// SAFETY: the C side's listener is used by one thread at a time (`&mut`
// or by value); nothing in it is tied to the thread that created it.
unsafe impl Send for Listening {}
// SAFETY: as above: a connection is used by one thread at a time.
unsafe impl Send for Verbs {}

impl Drop for Listening {
    fn drop(&mut self) {
        // SAFETY: `l` is live (type invariant) and not used after this.
        unsafe { vp_destroy(self.l) }
    }
}

impl Listening {
    fn new(port: u16) -> Result<Self, String> {
        let mut r = new_result();
        // SAFETY: `r` is valid for the call.
        let l = unsafe { vp_listen(port.to_be(), &mut r) };
        if l.is_null() {
            return Err(format!(
                "listen: {}",
                std::io::Error::from_raw_os_error(-r.err)
            ));
        }
        // INVARIANT: a live listener, owned from here.
        Ok(Listening { l })
    }

    /// Accepts the next connect request with a valid hello of `nonce`,
    /// without waiting for the requester's RTU.
    fn accept(&mut self, nonce: u64, peer: &str) -> Result<Verbs, String> {
        let h = super::hello_of(nonce, None, None);
        let mut r = new_result();
        // SAFETY: `l` is live; `h` and `r` are valid for the call.
        let v = unsafe { vp_accept(self.l, h.as_ptr(), h.len() as u8, wait_ms(), &mut r) };
        if v.is_null() {
            return Err(format!(
                "accept: {} (event {})",
                std::io::Error::from_raw_os_error(-r.err),
                r.event
            ));
        }
        // SAFETY: `vp_accept` returned it, to no other owner.
        Ok(unsafe { Verbs::own(v, peer) })
    }
}

/// The importer's side of the early flush: a hostile exporter (this
/// side's listener, on this guest) accepts rrdma's CONNECT and at once
/// sends an RDMA Write with a guessed key, which kills the importer's
/// queue pair, maybe before the importer's ESTABLISHED event. CONNECT
/// must then fail with `ECONNRESET`, or the connection it returned must
/// end within [`CLOSED_WITHIN`], not at its keepalive. On 7.3 the Write
/// first reaches a queue pair not yet ready and is dropped; its
/// retransmission ends the established connection 0.55 s later.
fn hostile_exporter_check(dev: &Rrdma, t: &mut Tap) {
    const HOSTILE_PORT: u16 = 7480;
    let res = (|| {
        let me = std::env::var("RRDMA_SELF").map_err(|_| "RRDMA_SELF unset".to_string())?;
        let mut l = Listening::new(HOSTILE_PORT)?;
        let live = || {
            dev.fdinfo_value("rrdma-connections-live")
                .unwrap_or(u64::MAX)
        };
        let before = live();
        let (conn, accepted) = std::thread::scope(|s| {
            let h = s.spawn(|| -> Result<Verbs, String> {
                let mut v = l.accept(0x4000, &me)?;
                v.rdma_write(0x1000, 0, &[0x5a; 64])?;
                Ok(v)
            });
            let conn = dev.connect(crate::remote::addr(&me, HOSTILE_PORT), crate::remote::T);
            let accepted = h.join().unwrap_or(Err("panicked".into()));
            (conn, accepted)
        });
        let _hostile = accepted?;
        let t0 = Instant::now();
        match conn {
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                println!("# CONNECT failed with ECONNRESET");
                Ok(())
            }
            Err(e) => Err(format!("CONNECT: {e}, expected ECONNRESET or success")),
            Ok(conn) => loop {
                if live() <= before {
                    println!(
                        "# CONNECT succeeded; the connection ended after {} ms",
                        t0.elapsed().as_millis()
                    );
                    drop(conn);
                    break Ok(());
                }
                if t0.elapsed() > CLOSED_WITHIN {
                    break Err(format!(
                        "the connection still lives after {CLOSED_WITHIN:?}"
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            },
        }
    })();
    t.check(
        "hostile RoCE exporter: a Write with a guessed key right after its accept: CONNECT fails or its connection ends",
        res,
    );
}

/// What a real queue pair shows and hand framing cannot: a granted key
/// within its registration reads the region's bytes, so the refusals in
/// the other checks come from the keys, not from a peer that cannot read.
fn granted_read_check(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let res = (|| {
        let mut st = Verbs::open(peer, 0x3100)?;
        let g = st.import_real(peer)?;
        let got = st.read_back(g.rkeys[0], 0, 64)?;
        let want = after::bytes_before(dev, peer, 64)?;
        ensure(
            got[56..] == want[..],
            format!("read {:02x?}, the region holds {want:02x?}", &got[56..]),
        )?;
        st.alive(2)?;
        st.close()
    })();
    t.check(
        "hostile RoCE: a granted key read within its registration: the region's bytes, the connection lives",
        res,
    );
}

/// A hostile peer's data lanes (`conn/lanes.rs` on the exporter): a lane
/// joins only a connection of its own address named by its nonce, only
/// within the grant and only once; it shares its connection's domain, so
/// a key granted on the connection reads through the lane, and a key of
/// another connection fails the lane, which ends its connection.
fn lane_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    const NONCE: u64 = 0x1a9e_0001;
    let res = (|| {
        let mut main = match Verbs::connect_with(peer, &super::hello_qps(NONCE, 2, None, None))? {
            Connected::Yes(v) => v,
            Connected::Refused(e) => return Err(format!("connection: rejected, errno {e:?}")),
        };
        let g = main.import_real(peer)?;
        let lane = super::hello_qps(NONCE, 2, None, Some(1));
        let mut lane = match Verbs::connect_with(peer, &lane)? {
            Connected::Yes(v) => v,
            Connected::Refused(e) => return Err(format!("lane 1: rejected, errno {e:?}")),
        };
        let got = lane.read_back(g.rkeys[0], 0, 64)?;
        let want = after::bytes_before(dev, peer, 64)?;
        ensure(
            got[56..] == want[..],
            format!(
                "read through the lane {:02x?}, the region holds {want:02x?}",
                &got[56..]
            ),
        )?;
        for (what, nonce, l) in [
            ("lane 1 again", NONCE, 1),
            ("lane 2, beyond the grant of 2 queue pairs", NONCE, 2),
            ("lane 1 of a nonce no connection has", NONCE + 1, 1),
        ] {
            match Verbs::connect_with(peer, &super::hello_qps(nonce, 2, None, Some(l)))? {
                Connected::Refused(Some(e)) if e == ENOENT => {}
                Connected::Refused(e) => return Err(format!("{what}: rejected with {e:?}")),
                Connected::Yes(_) => return Err(format!("{what}: accepted")),
            }
        }
        let mut other = Verbs::open(peer, 0x1a9e_0002)?;
        let g2 = other.import_real(peer)?;
        let t0 = Instant::now();
        lane.rdma_read(g2.rkeys[0], 0, 64)?;
        if !main.disconnected_within(CLOSED_WITHIN)? {
            return Err(format!(
                "a key of another connection read through the lane: its connection lives after {CLOSED_WITHIN:?}"
            ));
        }
        println!(
            "# a key of another connection on a lane: its connection ended after {} ms",
            t0.elapsed().as_millis()
        );
        other.alive(2)?;
        other.close()
    })();
    t.check(
        "hostile RoCE lanes: one joins its connection and reads with its keys; a duplicate, one beyond the grant and one of an unknown nonce are ENOENT; another connection's key ends the connection",
        res,
    );
}

/// The attacks after the handshake; `before`: the exporter's live
/// connections before any attack, which it must be back to first.
pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, before: u64) {
    let t0 = Instant::now();
    let settled = loop {
        match super::live_conns(peer) {
            Ok(n) if n <= before => break Ok(()),
            Ok(n) if t0.elapsed() > WAIT => break Err(format!("{n} live, {before} before")),
            Err(e) => break Err(e),
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    if let Err(e) = settled {
        return t.check(
            "hostile RoCE: the exporter's connections settle first",
            Err(e),
        );
    }
    BASELINE.store(before, Ordering::Relaxed);
    granted_read_check(dev, t, peer);
    lane_checks(dev, t, peer);
    for _ in 0..3 {
        hostile_exporter_check(dev, t);
    }
    after::checks::<Verbs>(dev, t, peer);
}
