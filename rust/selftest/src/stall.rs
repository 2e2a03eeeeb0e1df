// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A send queue held up by a retransmission (part of `attack`, rxe only).
//!
//! First, what a lost retry costs: READ responses dropped for 1.5 s, so
//! that rxe's first retry is lost too, with pings every second; the READ
//! must complete with the right data, and within 10 s: rxe's retransmit
//! timer must fire though the pings' acknowledgements go on (the test
//! kernels' scripts/kpatch/*/0007; without it, 19 s).
//!
//! Then the exporter's guest drops every RDMA READ response it sends for
//! three seconds (a `tc` filter on RoCE's BTH opcode), so the importer's
//! READ waits out the transport's retry timer, and every control message
//! the importer sends after it completes only after the READ does (the
//! connection has no data lanes here, `queue_pairs=1`: on a lane the READ
//! would hold nothing of the control messages' queue pair). The
//! importer imports until an import has to wait (its 8 send buffers are
//! all held), while both sides go on pinging each other every 100 ms and
//! answering at once. That import's request, and the answers, must wait
//! for buffers (the fdinfo count `rrdma-ctrl-backlogged` shows they did)
//! and go out once the READ completes: the import succeeds then, not with
//! `EAGAIN`; the READ completes with the right data, and the connection
//! keeps working.
//!
//! Then the exporter's side: this guest drops the RoCE acknowledgements it
//! sends, so every control message the exporter sends completes only once
//! the drop ends. Imports take the exporter's send buffers (each answer
//! holds one), and the exporter unexports meanwhile: its revoke must wait
//! in the backlog, not end the connection. siw is not tested: its TCP
//! retransmits a lost segment itself, without holding the queue pair.

use std::thread::sleep;
use std::time::{Duration, Instant};

use rrdma::{Keepalive, Rrdma};

use crate::attack::agent_cmd;
use crate::param::ModParam;
use crate::remote::{addr, control, peer_count, token, T};
use crate::{ensure, Tap};

/// How long the READ responses are dropped: longer than rxe's first retry
/// (its responses are then dropped too), shorter than the keepalive limit.
const DROP: Duration = Duration::from_secs(3);
/// Keepalive on both sides: pings every 100 ms (the minimum), a limit of
/// 10 s, well past the stall.
const INTERVAL_MS: u64 = 100;
const MISSES: u16 = 100;
/// The most a READ whose retry was lost may take: the 1.5 s drop, two
/// retransmit timeouts of 2.1 s and ample slack; a timer pushed back by
/// every acknowledgement took 19 s.
const LOST_RETRY_BOUND: Duration = Duration::from_secs(10);

/// The exporter's READ responses dropped while it lives.
struct DropReadResponses<'a> {
    peer: &'a str,
}

impl<'a> DropReadResponses<'a> {
    fn new(peer: &'a str) -> Result<Self, String> {
        agent_cmd(peer, "drop-read-responses")?;
        Ok(Self { peer })
    }
}

impl Drop for DropReadResponses<'_> {
    fn drop(&mut self) {
        if let Err(e) = agent_cmd(self.peer, "drop-read-responses off") {
            eprintln!("stall: cannot restore the exporter's link: {e}");
        }
    }
}

/// This guest's RoCE acknowledgements dropped while it lives.
struct DropAcks;

impl DropAcks {
    fn new() -> Result<Self, String> {
        // BTH opcode 0x11: RC ACKNOWLEDGE.
        crate::agent::drop_bth(&[("0x11", "0xff")])?;
        Ok(Self)
    }
}

impl Drop for DropAcks {
    fn drop(&mut self) {
        if let Err(e) = crate::agent::tool("tc", &["qdisc", "del", "dev", "eth0", "root"]) {
            eprintln!("stall: cannot restore this guest's link: {e}");
        }
    }
}

/// Imports `tok` until an import waits (a second or more) for a send
/// buffer: its request waits in the backlog until the stalled READ frees
/// one. That import must succeed. How many were answered at once.
fn take_send_buffers(conn: &rrdma::Connection<'_>, tok: u64) -> Result<usize, String> {
    let mut held = Vec::new();
    for _ in 0..64 {
        let t0 = Instant::now();
        let r = conn
            .import(tok, T)
            .map_err(|e| format!("import {}: {e}", held.len() + 1))?;
        if t0.elapsed() >= Duration::from_secs(1) {
            return Ok(held.len());
        }
        held.push(r);
    }
    Err(format!(
        "{} imports and none waited for a send buffer",
        held.len()
    ))
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, prov: &str) {
    if prov != "rxe" {
        return;
    }
    let r = lost_retry(dev, peer);
    let took = r.as_ref().ok().copied();
    t.check(
        "stall: a READ whose retry was lost too completes with the right data",
        r.map(|_| ()),
    );
    // The test kernels' rxe restarts its retransmit timer only on
    // progress (scripts/kpatch/*/0007): the READ is retried about 2.1 s
    // after the ping's acknowledgement, not once the pings stop (19 s).
    if let Some(took) = took {
        t.check(
            "stall: ... and within 10 s: acknowledgements that make no progress do not push rxe's retry timer back",
            ensure(
                took < LOST_RETRY_BOUND,
                format!("the READ took {} ms", took.as_millis()),
            ),
        );
    }
    let set = agent_cmd(peer, &format!("keepalive {INTERVAL_MS} {MISSES}"));
    t.check("stall: the exporter pings every 100 ms", set);
    let r = held_send_queue(dev, t, peer);
    t.check("stall: a held send queue does not end the connection", r);
    let r = held_exporter_queue(dev, t, peer);
    t.check(
        "stall: a revoke that finds the exporter's send buffers held waits, and the connection lives",
        r,
    );
    t.check(
        "stall: the exporter's settings come back",
        agent_cmd(peer, "keepalive restore"),
    );
}

/// A connection to the exporter pinging every `interval_ms`.
fn connect<'a>(
    dev: &'a Rrdma,
    peer: &str,
    interval_ms: u64,
) -> Result<rrdma::Connection<'a>, String> {
    let keepalive = Keepalive::Every {
        interval: Duration::from_millis(interval_ms),
        misses: MISSES,
    };
    dev.connect_with(addr(peer, 7471), T, keepalive)
        .map_err(|e| format!("connect: {e}"))
}

/// A two-block local region whose first block holds a pattern (from
/// `seed`) written to remote block 0, and whose second block is zeroed
/// for reading it back: the region and the pattern.
fn written_block<'a>(
    dev: &'a Rrdma,
    rw: &rrdma::RemoteRegion<'_>,
    seed: u32,
) -> Result<(rrdma::Region<'a>, Vec<u8>), String> {
    let mut local = dev.create_region(4096, 2).map_err(|e| e.to_string())?;
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * seed + 13) as u8).collect();
    local.as_mut_slice()[..4096].copy_from_slice(&pattern);
    local.as_mut_slice()[4096..].fill(0);
    rw.write(&local, 0, 0, 1)
        .map_err(|e| format!("write: {e}"))?;
    Ok((local, pattern))
}

fn held_send_queue(dev: &Rrdma, t: &mut Tap, peer: &str) -> Result<(), String> {
    let tok = token(peer, "rw").map_err(|e| e.to_string())?;
    // The READ must go on the queue pair of the control messages: on a
    // data lane (`queue_pairs` above 1, the READ on the reader's CPU's
    // lane), nothing would hold them.
    let one_qp = ModParam::set("queue_pairs", "1")?;
    let conn = connect(dev, peer, INTERVAL_MS)?;
    drop(one_qp);
    let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    let (local, pattern) = written_block(dev, &rw, 7)?;
    let backlogged0 = dev.fdinfo_value("rrdma-ctrl-backlogged").unwrap_or(0);

    let start = Instant::now();
    let stall = DropReadResponses::new(peer)?;
    let (read, imports) = std::thread::scope(|s| {
        let lift = s.spawn(|| {
            sleep(DROP);
            drop(stall);
        });
        let reader = s.spawn(|| rw.read(&local, 1, 0, 1));
        // Once the READ is stuck, imports (each answered at once, each
        // holding one of our send buffers) take the buffers the pings and
        // pongs would take over seconds, whatever the timer's pace.
        sleep(Duration::from_millis(300));
        let imports = take_send_buffers(&conn, tok);
        // The READ is what held the buffers: the import that waited got
        // its answer only once the responses flowed again.
        let imports = imports.and_then(|n| {
            ensure(
                start.elapsed() >= DROP,
                format!(
                    "the import after {n} others returned {} ms into a {} ms stall",
                    start.elapsed().as_millis(),
                    DROP.as_millis()
                ),
            )
            .map(|()| n)
        });
        let r = reader
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("reader panicked")));
        let _ = lift.join();
        (r, imports)
    });
    let took = start.elapsed();
    t.check(
        "stall: an import that finds every send buffer held waits for the READ, then succeeds (no EAGAIN)",
        imports.map(|n| println!("# stall: {n} imports took the send buffers")),
    );
    let backlogged = dev
        .fdinfo_value("rrdma-ctrl-backlogged")
        .unwrap_or(0)
        .saturating_sub(backlogged0);
    println!(
        "# stall: the READ took {} ms with its responses dropped for {} ms; {backlogged} control messages waited for a send buffer",
        took.as_millis(),
        DROP.as_millis()
    );
    read.map_err(|e| format!("the READ failed after {} ms: {e}", took.as_millis()))?;
    t.check(
        "stall: the READ waited for the retransmission and read the right data",
        ensure(
            took >= DROP && local.as_slice()[4096..] == pattern[..],
            format!(
                "{} ms, data equal: {}",
                took.as_millis(),
                local.as_slice()[4096..] == pattern[..]
            ),
        ),
    );
    t.check(
        "stall: the answers waited for send buffers (rrdma-ctrl-backlogged grew)",
        ensure(
            backlogged > 0,
            "no control message waited: the stall did not hold the send queue".to_string(),
        ),
    );
    // Idle for a second of pings, then an operation: still connected.
    sleep(Duration::from_secs(1));
    rw.write(&local, 1, 0, 1)
        .map_err(|e| format!("a write after the stall: {e}"))?;
    drop(rw);
    conn.disconnect().map_err(|e| format!("disconnect: {e}"))
}

/// A READ whose responses, the first retry's included, are lost for
/// 1.5 s, while keepalive traffic flows every second: it must complete
/// with the right data; returns how long it took. rxe retries a READ once
/// when a later acknowledgement shows its response lost, then only when
/// its retransmit timer (2.1 s) fires. A stock rxe pushes that timer back
/// with every acknowledgement that arrives, so the pings and pongs on the
/// same queue pair kept it from firing until all control send buffers
/// were held behind the READ (about 16 s at two messages a second).
fn lost_retry(dev: &Rrdma, peer: &str) -> Result<Duration, String> {
    agent_cmd(peer, &format!("keepalive 1000 {MISSES}"))?;
    let tok = token(peer, "rw").map_err(|e| e.to_string())?;
    let conn = connect(dev, peer, 1000)?;
    let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    let (local, pattern) = written_block(dev, &rw, 11)?;
    let backlogged0 = dev.fdinfo_value("rrdma-ctrl-backlogged").unwrap_or(0);
    let c0 = crate::agent::device_counters("rxe0");
    let start = Instant::now();
    let stall = DropReadResponses::new(peer)?;
    let read = std::thread::scope(|s| {
        s.spawn(|| {
            sleep(Duration::from_millis(1500));
            drop(stall);
        });
        rw.read(&local, 1, 0, 1)
    });
    let took = start.elapsed();
    let backlogged = dev
        .fdinfo_value("rrdma-ctrl-backlogged")
        .unwrap_or(0)
        .saturating_sub(backlogged0);
    println!(
        "# stall: READ responses dropped for 1500 ms, pings every 1 s: the READ took {} ms; \
         {backlogged} control messages waited; importer's rxe0: {}",
        took.as_millis(),
        crate::agent::counters_moved(&c0, &crate::agent::device_counters("rxe0"))
    );
    read.map_err(|e| format!("the READ failed after {} ms: {e}", took.as_millis()))?;
    ensure(
        local.as_slice()[4096..] == pattern[..],
        "the READ completed with other data",
    )?;
    drop(rw);
    conn.disconnect()
        .map_err(|e| format!("disconnect: {e}"))
        .map(|()| took)
}

/// The exporter's send buffers held by its unacknowledged answers, and an
/// unexport meanwhile: the revoke waits for a buffer and is acknowledged
/// once the acknowledgements flow again; the connection lives.
fn held_exporter_queue(dev: &Rrdma, t: &mut Tap, peer: &str) -> Result<(), String> {
    let doomed = control(peer, "export rw").map_err(|e| e.to_string())?;
    let doomed = u64::from_str_radix(doomed.trim_start_matches("0x"), 16)
        .map_err(|e| format!("export: {doomed}: {e}"))?;
    let tok = token(peer, "rw").map_err(|e| e.to_string())?;
    let conn = connect(dev, peer, INTERVAL_MS)?;
    let first = conn.import(doomed, T).map_err(|e| format!("import: {e}"))?;
    let backlogged0 = peer_count(peer, "rrdma-ctrl-backlogged")?;
    let start = Instant::now();
    let drop_acks = DropAcks::new()?;
    let (imports, unexport) = std::thread::scope(|s| {
        let lift = s.spawn(|| {
            sleep(DROP);
            drop(drop_acks);
        });
        // Each answer holds one of the exporter's send buffers until the
        // drop ends; the import that finds none waits for its answer.
        let importer = s.spawn(|| {
            let mut held = Vec::new();
            while held.len() < 40 && start.elapsed() < DROP {
                match conn.import(doomed, T) {
                    Ok(r) => held.push(r),
                    // The revoke came: the token is gone.
                    Err(e) if rrdma::errno(&e) == Some(libc::ENOENT) => break,
                    Err(e) => return Err(format!("import {}: {e}", held.len() + 2)),
                }
            }
            Ok(held.len())
        });
        sleep(Duration::from_millis(1500));
        let unexport = control(peer, "unexport rw").map_err(|e| e.to_string());
        let imports = importer
            .join()
            .unwrap_or_else(|_| Err("importer panicked".into()));
        let _ = lift.join();
        (imports, unexport)
    });
    let backlogged = peer_count(peer, "rrdma-ctrl-backlogged")?.saturating_sub(backlogged0);
    println!(
        "# stall: {:?} imports while the exporter's acknowledgements were dropped; the unexport answered {:?} after {} ms; {backlogged} of the exporter's messages waited",
        imports,
        unexport,
        start.elapsed().as_millis()
    );
    t.check(
        "stall: the exporter's answers waited for send buffers (its rrdma-ctrl-backlogged grew)",
        ensure(backlogged > 0, "no message of the exporter waited"),
    );
    ensure(
        unexport.as_deref() == Ok("ok"),
        format!("unexport: {unexport:?}"),
    )?;
    drop(first);
    // The connection lives: the revoked export is gone, the other works.
    let again = conn.import(doomed, T).err().and_then(|e| rrdma::errno(&e));
    ensure(
        again == Some(libc::ENOENT),
        format!("import of the revoked token: {again:?}"),
    )?;
    let rw = conn
        .import(tok, T)
        .map_err(|e| format!("import after: {e}"))?;
    let local = dev.create_region(4096, 1).map_err(|e| e.to_string())?;
    rw.read(&local, 0, 0, 1)
        .map_err(|e| format!("a read after: {e}"))?;
    drop(rw);
    conn.disconnect().map_err(|e| format!("disconnect: {e}"))
}
