// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Busy polling of synchronous operations, a check of `remote` (the
//! importing guest; `sync-poll PEER_IP` runs it alone).
//!
//! `RW_SYNC` polls its queue pair's send CQ before it sleeps, and handles
//! what it finds itself, its own completion and others' (no wake-up of
//! the CQ's work item, none of the task); fdinfo `rrdma-work-sync-polled`
//! counts them. By default the window is twice the connection's mean
//! completion time (none while that is over 500 us: the debug kernel);
//! `sync_poll_us` fixes it, `sync_poll=N` turns polling off. Two checks:
//!
//! - rounds of one-block WRITEs, each read back at once, all through
//!   `RW_SYNC`, with a fixed window, polling off and the adaptive window
//!   alternated: every block comes back intact, and with polling off the
//!   task handles no completion itself. How many it handled in each mode,
//!   and each round's median READ latency, are printed: figures (an
//!   operation's own completion is polled only if it comes within the
//!   window, and these guests' round trips are near a millisecond, tens
//!   of them on the debug kernel);
//! - on a connection of one queue pair (one send CQ), `RW_SYNC` READs
//!   while a second thread keeps `STREAM_DEPTH` READs in flight on the
//!   same queue pair: completions then arrive all the time, so some land
//!   in the polling windows whatever the round trip. With polling on the
//!   task must handle at least one itself (the READs go on until it has,
//!   within a bound); with it off, none.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Instant;

use rrdma::abi::uapi::{Completion, OP_READ, OP_WRITE};
use rrdma::{Region, RemoteRegion, Rrdma};

use crate::param::ModParam;
use crate::remote::{addr, pattern, quiet, token, T};
use crate::{ensure, Tap};

const PARAM: &str = "sync_poll_us";
/// Polling at all (Y: adaptive unless `sync_poll_us` fixes the window).
const ON: &str = "sync_poll";

/// A polling setting of the module.
#[derive(Clone, Copy)]
enum Mode {
    /// `sync_poll=N`.
    Off,
    /// `sync_poll_us` set.
    Fixed(u32),
    /// The default: a window from the connection's mean completion time.
    Auto,
}

impl Mode {
    fn apply(self) -> Result<(), String> {
        let (on, us) = match self {
            Mode::Off => ("N", 0),
            Mode::Fixed(us) => ("Y", us),
            Mode::Auto => ("Y", 0),
        };
        ModParam::write(ON, on)?;
        ModParam::write(PARAM, &us.to_string())
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Off => write!(f, "sync_poll=N"),
            Mode::Fixed(us) => write!(f, "sync_poll_us={us}"),
            Mode::Auto => write!(f, "adaptive"),
        }
    }
}
/// The count of completions polling handled.
const POLLED: &str = "rrdma-work-sync-polled";
/// Operations (a WRITE and its READ) per round, and rounds per setting.
const OPS: u64 = 32;
const ROUNDS: u64 = 2;
const BLOCK: u32 = 4096;
/// The polling time of the rounds with polling on: the most the module
/// allows.
const POLL_US: u32 = 1000;
/// READs the stream keeps in flight. A 4 KiB READ's round trip is about
/// 1 ms on these guests on 7.3 and 15-40 ms on the debug 6.12 kernel,
/// where an operation's own completion never comes within the 1 ms
/// window (0 of 128 polled, siw and rxe alike). With 16 READs in flight
/// completions arrive all the time (100-150 a second), and a window
/// catches one about as often as one arrives per ms: measured, from 2
/// polled in 32 RW_SYNC READs (a loaded host) to 40 in 96 on 7.3, from 6
/// in 48 to 27 in 96 on debug 6.12: a window in 16 at worst.
const STREAM_DEPTH: u64 = 16;
/// `RW_SYNC` READs under the stream with polling on: they go on until
/// the first polled completion, at least `STREAM_SYNC_MIN` (the figure)
/// and at most `STREAM_SYNC_MAX`: at a window in 16, none in 400 has odds
/// of (15/16)^400, below 1e-11. The passing run stays short (a window
/// costs a round trip behind the stream: 100-200 ms on the debug kernel);
/// only a failing one takes all 400.
const STREAM_SYNC_MIN: u64 = 32;
const STREAM_SYNC_MAX: u64 = 400;
/// With polling off, where none may be polled.
const STREAM_SYNC_OFF: u64 = 32;

/// The count of completions the task's polling handled on `dev`; a
/// missing key is an error, not 0.
fn polled(dev: &Rrdma) -> Result<u64, String> {
    dev.fdinfo()
        .map_err(|e| format!("fdinfo: {e}"))?
        .into_iter()
        .find_map(|(k, v)| (k == POLLED).then_some(v))
        .ok_or_else(|| format!("fdinfo has no {POLLED}"))
}

/// One round with polling `mode`: `OPS` blocks written and read back one
/// at a time. Returns the median READ latency (us) and the completions
/// the task's polling handled.
fn round(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    src: &mut Region<'_>,
    dst: &Region<'_>,
    mode: Mode,
    seed: u64,
) -> Result<(f64, u64), String> {
    mode.apply()?;
    pattern(src.as_mut_slice(), seed);
    let polled0 = polled(dev)?;
    let mut lat = Vec::with_capacity(OPS as usize);
    for i in 0..OPS {
        dev.rw_sync(&rw.op(OP_WRITE, src, i, i, 1, 0))
            .map_err(|e| format!("WRITE {i}: {e}"))?;
        let t = Instant::now();
        dev.rw_sync(&rw.op(OP_READ, dst, i, i, 1, 0))
            .map_err(|e| format!("READ {i}: {e}"))?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let n = (OPS * u64::from(BLOCK)) as usize;
    ensure(
        src.as_slice()[..n] == dst.as_slice()[..n],
        format!("a block read back differs ({mode})"),
    )?;
    lat.sort_by(f64::total_cmp);
    Ok((lat[lat.len() / 2], polled(dev)? - polled0))
}

/// `RW_SYNC` READs with polling `mode` while another thread
/// keeps `STREAM_DEPTH` READs in flight on the same import (one queue
/// pair): `count` of them, or (`until_polled`) from `count` on only until
/// one completion was polled, at most `STREAM_SYNC_MAX`. Returns the
/// completions the task's polling handled, the READs it made, and the
/// stream's READs that completed.
fn under_stream(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    local: &Region<'_>,
    mode: Mode,
    count: u64,
    until_polled: bool,
) -> Result<(u64, u64, u64), String> {
    mode.apply()?;
    let stop = AtomicBool::new(false);
    let polled0 = polled(dev)?;
    let start = Instant::now();
    let (sync, stream) = std::thread::scope(|s| {
        let stream = s.spawn(|| -> Result<u64, String> {
            let op = |i: u64| rw.op(OP_READ, local, 1 + i % 8, i % 64, 1, i);
            let mut next = 0;
            let mut in_flight = 0;
            let mut done = 0;
            let mut buf = vec![Completion::zeroed(); STREAM_DEPTH as usize];
            loop {
                while in_flight < STREAM_DEPTH && !stop.load(SeqCst) {
                    match dev.submit(&[op(next)]) {
                        Ok(_) => {
                            next += 1;
                            in_flight += 1;
                        }
                        // No room (a small NIC's queue, shared with the
                        // synchronous READs): completions make some.
                        Err(e) if rrdma::errno(&e) == Some(libc::EAGAIN) => break,
                        Err(e) => {
                            // What is in flight completes before the
                            // error goes up: none reaches a later check.
                            let mut left = in_flight as usize;
                            while left > 0 {
                                match dev.completions(&mut buf, Some(T)) {
                                    Ok(n) if n > 0 => left = left.saturating_sub(n),
                                    _ => break,
                                }
                            }
                            return Err(format!("stream SUBMIT: {e}"));
                        }
                    }
                }
                if in_flight == 0 {
                    if stop.load(SeqCst) {
                        return Ok(done);
                    }
                    // Full without a READ of its own in flight: the
                    // synchronous READ holds the room; it ends soon.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                let n = dev
                    .completions(&mut buf, Some(T))
                    .map_err(|e| format!("stream completions: {e}"))?;
                ensure(n > 0, "the stream's READs did not complete")?;
                if let Some(c) = buf[..n].iter().find(|c| c.status != 0) {
                    return Err(format!("a stream READ failed: status {}", c.status));
                }
                in_flight -= n as u64;
                done += n as u64;
            }
        });
        let sync = (|| -> Result<u64, String> {
            let max = if until_polled { STREAM_SYNC_MAX } else { count };
            for i in 0..max {
                dev.rw_sync(&rw.op(OP_READ, local, 0, 64 + i % 64, 1, 0))
                    .map_err(|e| format!("RW_SYNC READ {i}: {e}"))?;
                if until_polled && i + 1 >= count && polled(dev)? > polled0 {
                    return Ok(i + 1);
                }
            }
            Ok(max)
        })();
        stop.store(true, SeqCst);
        let stream = stream
            .join()
            .unwrap_or_else(|_| Err("the stream panicked".into()));
        (sync, stream)
    });
    let made = sync?;
    let done = stream?;
    println!(
        "# sync polling under a stream, {mode}: {made} RW_SYNC READs in {} ms",
        start.elapsed().as_millis()
    );
    Ok((polled(dev)? - polled0, made, done))
}

/// The stream's part: a connection of one queue pair, so that the stream
/// and the synchronous READs share one send CQ.
fn stream_checks(dev: &Rrdma, peer: &str) -> Result<(u64, u64, u64), String> {
    let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
    let one_qp = ModParam::set("queue_pairs", "1")?;
    let conn = dev.connect(addr(peer, 7471), T);
    one_qp.restore()?;
    let conn = conn.map_err(|e| format!("connect: {e}"))?;
    let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    let local = dev
        .create_region(BLOCK, 9)
        .map_err(|e| format!("create_region: {e}"))?;
    let fixed = Mode::Fixed(POLL_US);
    let (on, on_made, on_stream) = under_stream(dev, &rw, &local, fixed, STREAM_SYNC_MIN, true)?;
    let (off, off_made, off_stream) =
        under_stream(dev, &rw, &local, Mode::Off, STREAM_SYNC_OFF, false)?;
    println!(
        "# sync polling under a stream of {STREAM_DEPTH} READs in flight: {on} completions polled \
         in {on_made} RW_SYNC READs with sync_poll_us={POLL_US} ({on_stream} stream READs), \
         {off} in {off_made} without ({off_stream})"
    );
    quiet(dev, 300).map_err(|e| format!("after the stream: {e}"))?;
    drop(rw);
    conn.disconnect().map_err(|e| format!("disconnect: {e}"))?;
    Ok((on, on_made, off))
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    let saved = match ModParam::set(PARAM, "0").and_then(|p| Ok((p, ModParam::set(ON, "Y")?))) {
        Ok(p) => p,
        Err(e) => return t.check("sync_poll and sync_poll_us can be set", Err(e)),
    };
    let res = (|| -> Result<(), String> {
        let mut src = dev
            .create_region(BLOCK, OPS)
            .map_err(|e| format!("create_region: {e}"))?;
        let dst = dev
            .create_region(BLOCK, OPS)
            .map_err(|e| format!("create_region: {e}"))?;
        // Fixed, off and adaptive alternated; each mode's READ p50 per
        // round and completions polled.
        let modes = [Mode::Fixed(POLL_US), Mode::Off, Mode::Auto];
        let mut seen = [(Vec::new(), 0), (Vec::new(), 0), (Vec::new(), 0)];
        for r in 0..ROUNDS {
            for (i, m) in modes.iter().enumerate() {
                let (p50, n) = round(dev, rw, &mut src, &dst, *m, 3 * r + i as u64)?;
                seen[i].0.push(format!("{p50:.0}"));
                seen[i].1 += n;
            }
        }
        let line = modes
            .iter()
            .zip(&seen)
            .map(|(m, (p, n))| format!("{} us {m} ({n} polled)", p.join("/")))
            .collect::<Vec<_>>()
            .join(", ");
        println!("# sync polling: READ p50 {line}");
        let off = &seen[1];
        ensure(
            off.1 == 0,
            format!("polling off: {} completions polled", off.1),
        )
    })();
    t.check(
        "synchronous operations with a fixed polling window, none and the adaptive one move the right bytes; with none the task polls nothing",
        res,
    );
    let res = stream_checks(dev, peer).and_then(|(on, made, off)| {
        ensure(
            on > 0 && off == 0,
            format!("{on} completions polled with polling on (in {made} READs), {off} with it off"),
        )
    });
    let restored = saved.0.restore().and(saved.1.restore());
    t.check(
        "with busy polling on, a synchronous operation handles completions itself (a stream's, on its queue pair); off, none",
        res.and(restored),
    );
}

/// `sync-poll PEER_IP`: the checks alone, on a connection of their own.
pub(crate) fn run(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let res = (|| -> Result<_, String> {
        let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
        let conn = dev
            .connect(addr(peer, 7471), T)
            .map_err(|e| format!("connect: {e}"))?;
        Ok((tok, conn))
    })();
    let (tok, conn) = match res {
        Ok(x) => x,
        Err(e) => return t.check("connect to the peer", Err(e)),
    };
    match conn.import(tok, T) {
        Ok(rw) => checks(dev, t, peer, &rw),
        Err(e) => t.check("import", Err(e.to_string())),
    }
}
