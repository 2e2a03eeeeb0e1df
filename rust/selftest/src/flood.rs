// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `flood PEER_IP PROVIDER [SECONDS]`: a flood of connect, import and
//! disconnect cycles against the exporter (`rrdma serve --max-conns`,
//! which closes its oldest connections as new ones come) while its accepts
//! fail at each point, and then a connection that must still work.
//!
//! Workers connect (plainly, with `RRDMA_CONNECT_RECONNECT`, or with
//! `RRDMA_CONNECT_NO_KEEPALIVE`; data lanes on), import, write a block and
//! read it back, and disconnect, over and over, each on a file of its own.
//! Phases switch the exporter's failures (through the agent's `param`):
//! - `base`: none; the lanes join;
//! - `lane accepts fail`: `fail_at=2`, a data lane's accept fails once its
//!   queue pair is built (the exporter hands the lane's id back to the CM,
//!   which drains that queue pair: the path of issue 43's deadlock);
//!   connections carry their data on their own queue pair;
//! - `accepts fail`: `fail_at=1`, a connection's accept fails once its
//!   queue pair is built (torn down in the listener's handler): every
//!   CONNECT is refused with the exporter's `EIO`;
//! - `storm guard`: `accept_max_teardowns=1` while the exporter tears old
//!   connections down: refusals with `EBUSY` come and go.
//!
//! On rxe a raw rdma_cm client also sends, during the lane phase,
//! connection hellos that go silent after the accept (they fill the
//! backlog until the accept deadline) and lane hellos for them (a lane
//! joining a connection still being accepted, one beyond the grant, one
//! twice), and malformed ones. Afterwards the exporter must accept a new
//! connection that moves data within 30 s, hold no more connections than
//! `serve` keeps, and its kernel must report nothing (no hung task: the
//! test lowers the hung task timeout; no lock held across a drain: the
//! debug kernel checks that on every drain).

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::{OP_READ, OP_WRITE};
use rrdma::{errno, ConnectOptions, Keepalive, Rrdma};

use crate::attack::agent_cmd;
use crate::hostile::{hello_qps, ucma};
use crate::remote::{addr, pattern, peer_count, token};
use crate::{ensure, Tap};

/// The exporter's rdma_cm port.
const PORT: u16 = 7471;
/// Connections `rrdma serve --max-conns` keeps (tests/guest/attack.sh).
pub(crate) const MAX_CONNS: u64 = 8;
/// Workers flooding at once.
const WORKERS: u64 = 3;
/// Each call's timeout: short, so that a wedged exporter shows at once.
const CALL: Duration = Duration::from_secs(5);
/// How long a cycle waits for its connection's lanes to join.
const LANES_WITHIN: Duration = Duration::from_secs(2);
/// How soon after the flood a new connection must move data: requests
/// refused while old teardowns and silent accepts run out are retried
/// (the accept deadline is 10 s; a debug kernel's teardowns are slow).
const SERVES_WITHIN: Duration = Duration::from_secs(30);

/// What one phase's cycles saw.
#[derive(Default)]
struct Phase {
    cycles: u64,
    connected: u64,
    /// Blocks written and read back intact.
    verified: u64,
    /// Connections whose data lanes were up when their data moved.
    with_lanes: u64,
    /// (call, errno) -> count.
    errnos: Vec<((&'static str, i32), u64)>,
}

impl Phase {
    fn errno(&mut self, call: &'static str, e: i32) {
        match self.errnos.iter_mut().find(|(k, _)| *k == (call, e)) {
            Some((_, n)) => *n += 1,
            None => self.errnos.push(((call, e), 1)),
        }
    }

    fn failed(&self, call: &str) -> impl Iterator<Item = (i32, u64)> + '_ {
        let call = call.to_string();
        self.errnos
            .iter()
            .filter(move |((c, _), _)| *c == call)
            .map(|((_, e), n)| (*e, *n))
    }

    fn summary(&self) -> String {
        let errs: Vec<String> = self
            .errnos
            .iter()
            .map(|((c, e), n)| format!("{c} errno {e} x{n}"))
            .collect();
        format!(
            "{} cycles, {} connected, {} verified, {} with lanes; {}",
            self.cycles,
            self.connected,
            self.verified,
            self.with_lanes,
            if errs.is_empty() {
                "no errors".into()
            } else {
                errs.join(", ")
            }
        )
    }
}

/// One cycle on a fresh file: connect with options picked by `n`, import
/// `tok`, write a block, read it back, disconnect (by dropping).
fn cycle(peer: &str, tok: u64, n: u64, ph: &Mutex<Phase>) {
    let note = |call: &'static str, e: &std::io::Error| {
        if let Ok(mut p) = ph.lock() {
            p.errno(call, errno(e).unwrap_or(-1));
        }
    };
    let Ok(dev) = Rrdma::open() else {
        return note("open", &std::io::Error::last_os_error());
    };
    let opts = ConnectOptions {
        keepalive: if n % 3 == 2 {
            Keepalive::Off
        } else {
            Keepalive::Module
        },
        reconnect: n % 3 == 1,
    };
    if let Ok(mut p) = ph.lock() {
        p.cycles += 1;
    }
    let conn = match dev.connect_opts(addr(peer, PORT), CALL, opts) {
        Ok(c) => c,
        Err(e) => return note("CONNECT", &e),
    };
    if let Ok(mut p) = ph.lock() {
        p.connected += 1;
    }
    let rw = match conn.import(tok, CALL) {
        Ok(r) => r,
        Err(e) => return note("IMPORT", &e),
    };
    let Ok(mut buf) = dev.create_region(4096, 2) else {
        return note("REGION_CREATE", &std::io::Error::last_os_error());
    };
    pattern(&mut buf.as_mut_slice()[..4096], n);
    // Workers write blocks of their own: 64 apart.
    let block = 512 + n % 64;
    if let Err(e) = dev.rw_sync(&rw.op(OP_WRITE, &buf, 0, block, 1, n)) {
        return note("WRITE", &e);
    }
    if let Err(e) = dev.rw_sync(&rw.op(OP_READ, &buf, 1, block, 1, n)) {
        return note("READ", &e);
    }
    let intact = {
        let s = buf.as_slice();
        s[..4096] == s[4096..8192]
    };
    // The WRITE asked for the lanes (a connection opens them on its first
    // operation): they join within a few round trips, or not at all when
    // their accepts fail. Each is an rdma_cm connect that the exporter's
    // one CM work queue handles behind the flood's (up to 2 s: a debug
    // kernel's).
    let asked = std::time::Instant::now();
    let mut lanes = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
    while lanes == 0 && asked.elapsed() < LANES_WITHIN {
        std::thread::sleep(std::time::Duration::from_millis(10));
        lanes = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
    }
    if let Ok(mut p) = ph.lock() {
        if intact {
            p.verified += 1;
        } else {
            p.errno("read back", 0);
        }
        if lanes > 0 {
            p.with_lanes += 1;
        }
    }
}

/// Runs the workers for `secs` seconds in one phase.
fn phase(peer: &str, tok: u64, secs: u64, seq: &AtomicU64) -> Phase {
    let ph = Mutex::new(Phase::default());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    cycle(peer, tok, seq.fetch_add(1, Ordering::Relaxed), &ph);
                }
            });
        }
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
    });
    ph.into_inner().unwrap_or_default()
}

/// Sets the exporter's module parameter `name` through the agent.
fn param(peer: &str, name: &str, value: &str) -> Result<(), String> {
    agent_cmd(peer, &format!("param {name} {value}"))
}

/// rxe: the raw rdma_cm client's requests, until `stop`: connections that
/// go silent after their accept, lanes for them, and malformed ones.
/// Returns how many requests it sent.
fn raw_requests(peer: &str, stop: &AtomicBool) -> Result<u64, String> {
    let dst: SocketAddrV4 = format!("{peer}:{PORT}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let wait = Duration::from_secs(10);
    let mut sent = 0;
    let mut nonce = 0x0f10_0d00_0000_0000u64;
    while !stop.load(Ordering::Relaxed) {
        // Its ids stay until the file closes: the accepted connections
        // are never completed.
        let silent = ucma::Ucma::open().map_err(|e| e.to_string())?;
        nonce += 1;
        let _ = silent.request_and_go_silent(dst, &hello_qps(nonce, 4, None, None), wait);
        let u = ucma::Ucma::open().map_err(|e| e.to_string())?;
        // Lanes of the silent connection: within the grant, twice, beyond.
        for lane in [1u16, 1, 3, 15] {
            let _ = u.request(dst, &hello_qps(nonce, 4, None, Some(lane)), wait);
        }
        let _ = u.request(dst, &[0xa5; 24], wait);
        sent += 6;
        drop(silent);
    }
    Ok(sent)
}

pub(crate) fn checks(t: &mut Tap, peer: &str, prov: &str, secs: u64) {
    let tok = match token(peer, "rw") {
        Ok(tk) => tk,
        Err(e) => return t.check("flood: the exporter's rw token", Err(e.to_string())),
    };
    let each = (secs / 4).max(5);
    let seq = AtomicU64::new(1);
    let mut phases = Vec::new();
    // Each phase's failure points, set on the exporter before it starts.
    let plan: [(&str, &str, &str); 4] = [
        ("base", "fail_at", "0"),
        ("lane accepts fail", "fail_at", "2"),
        ("accepts fail", "fail_at", "1"),
        ("storm guard", "accept_max_teardowns", "1"),
    ];
    for (name, key, value) in plan {
        let set = param(peer, "fail_at", "0").and_then(|()| param(peer, key, value));
        if let Err(e) = set {
            t.check(&format!("flood: the agent sets {key}={value}"), Err(e));
            return;
        }
        let stop = AtomicBool::new(false);
        let (ph, raw) = std::thread::scope(|s| {
            let raw = (prov == "rxe" && name == "lane accepts fail")
                .then(|| s.spawn(|| raw_requests(peer, &stop)));
            let ph = phase(peer, tok, each, &seq);
            stop.store(true, Ordering::Relaxed);
            (ph, raw.map(|h| h.join()))
        });
        println!("# flood {prov}: phase '{name}': {}", ph.summary());
        if let Some(r) = raw {
            let r = r.unwrap_or_else(|_| Err("panicked".into()));
            t.check(
                "flood: raw rdma_cm requests (silent connections, their lanes, malformed) sent",
                r.and_then(|n| ensure(n > 0, "none sent")),
            );
        }
        phases.push((name, ph));
    }
    let restore = param(peer, "accept_max_teardowns", "restore")
        .and_then(|()| param(peer, "fail_at", "restore"));
    t.check("flood: the exporter's parameters restored", restore);
    for (name, ph) in &phases {
        match *name {
            "base" => t.check(
                "flood: with nothing failing, connections move data and their lanes join",
                ensure(ph.verified > 0 && ph.with_lanes > 0, ph.summary()),
            ),
            "lane accepts fail" => t.check(
                "flood: with every lane's accept failing after its queue pair was built, \
                 connections move data without lanes",
                ensure(ph.verified > 0 && ph.with_lanes == 0, ph.summary()),
            ),
            "accepts fail" => t.check(
                "flood: with every accept failing after its queue pair was built, \
                 CONNECT is refused with the exporter's EIO",
                ensure(
                    ph.connected == 0
                        && ph.cycles > 0
                        && ph.failed("CONNECT").all(|(e, _)| e == libc::EIO),
                    ph.summary(),
                ),
            ),
            _ => t.check(
                &format!("flood: phase '{name}' ran cycles"),
                ensure(ph.cycles > 0, ph.summary()),
            ),
        }
        t.check(
            &format!("flood: phase '{name}': no block read back torn"),
            ensure(ph.failed("read back").count() == 0, ph.summary()),
        );
    }
    // The exporter still serves: a new connection moves data.
    let start = Instant::now();
    let res = loop {
        let ph = Mutex::new(Phase::default());
        cycle(peer, tok, 1 << 40, &ph);
        let ph = ph.into_inner().unwrap_or_default();
        if ph.verified == 1 {
            break Ok(());
        }
        if start.elapsed() > SERVES_WITHIN {
            break Err(ph.summary());
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    t.check(
        "flood: afterwards a new connection imports and moves data within 30 s",
        res,
    );
    let held = peer_count(peer, "rrdma-connections-live");
    t.check(
        &format!("flood: the exporter holds at most {MAX_CONNS} connections (serve's)"),
        held.and_then(|n| ensure(n <= MAX_CONNS, format!("{n} live"))),
    );
    let refused = peer_count(peer, "rrdma-storm-refusals").unwrap_or(0);
    println!("# flood {prov}: the exporter's storm-guard refusals: {refused}");
}
