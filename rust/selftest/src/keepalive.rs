// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Keepalive against `rrdma serve` on the other guest (part of `attack`):
//! a peer cut off (this guest's outgoing packets all dropped with netem, so
//! the two sides see different failures: the exporter hears nothing, the
//! importer still hears the exporter's pings but no answer to its own) is
//! noticed by both sides within their `interval × misses`, and the
//! exporter then ends the connection and releases what it granted on it.
//! With keepalive off on both sides, the same cut is survived.
//!
//! The exporter's settings are its module parameters, set for the duration
//! through the agent (10 misses); the importer's are CONNECT's (4 misses),
//! so that each side's end is its own keepalive's.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{ECONNRESET, ETIMEDOUT};
use rrdma::abi::uapi::OP_READ;
use rrdma::{Keepalive, Rrdma};

use crate::attack::agent_cmd;
use crate::remote::{addr, peer_count, quiet, reap, token, T};
use crate::{ensure, Tap};

/// The importer's misses; the exporter allows more, so that the importer's
/// own keepalive is what ends its side (the exporter's last answer can be
/// older than the importer's by a delayed pong).
pub(crate) const MISSES: u16 = 4;
pub(crate) const EXPORTER_MISSES: u16 = 10;
/// Lateness allowed past a limit: the timer's work item and the teardown
/// run on emulated CPUs.
const SLACK: Duration = Duration::from_millis(1500);

/// The interval: 300 ms, or 1 s on debug kernels (`quick`), where a work
/// item or a pong can be late by most of 300 ms.
#[derive(Clone, Copy)]
struct Timing {
    interval_ms: u64,
}

impl Timing {
    fn interval(self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }
    /// The importer's `interval × misses`.
    fn limit(self) -> Duration {
        self.interval() * u32::from(MISSES)
    }
    /// The exporter's.
    fn exporter_limit(self) -> Duration {
        self.interval() * u32::from(EXPORTER_MISSES)
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    ensure(
        out.status.success(),
        format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    )
}

/// This guest's outgoing packets dropped while it lives.
pub(crate) struct Cut;

impl Cut {
    pub(crate) fn new() -> Result<Self, String> {
        // The kernel's request_module() may not find busybox's modprobe.
        let _ = run("modprobe", &["sch_netem"]);
        run(
            "tc",
            &[
                "qdisc", "add", "dev", "eth0", "root", "netem", "loss", "100%",
            ],
        )?;
        Ok(Cut)
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        if let Err(e) = run("tc", &["qdisc", "del", "dev", "eth0", "root"]) {
            eprintln!("keepalive: cannot restore the link: {e}");
        }
    }
}

/// Waits until `f` holds, for at most `limit`.
pub(crate) fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        sleep(Duration::from_millis(100));
    }
    f()
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, quick: bool) {
    let tm = Timing {
        interval_ms: if quick { 1000 } else { 300 },
    };
    let set = |ms: u64, misses: u16| agent_cmd(peer, &format!("keepalive {ms} {misses}"));
    t.check(
        "keepalive: the exporter takes short settings",
        set(tm.interval_ms, EXPORTER_MISSES),
    );
    cut_is_noticed(dev, t, peer, tm);
    t.check("keepalive: the exporter turns it off", set(0, MISSES));
    cut_is_survived_without(dev, t, peer, tm);
    t.check(
        "keepalive: the exporter's settings come back",
        agent_cmd(peer, "keepalive restore"),
    );
}

/// Connects with `keepalive` and imports the `rw` export.
fn open<'a>(
    dev: &'a Rrdma,
    peer: &str,
    keepalive: Keepalive,
) -> Result<(rrdma::Connection<'a>, rrdma::RemoteRegion<'a>), String> {
    let tok = token(peer, "rw").map_err(|e| e.to_string())?;
    let conn = dev
        .connect_with(addr(peer, 7471), T, keepalive)
        .map_err(|e| format!("connect: {e}"))?;
    let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    Ok((conn, rw))
}

fn cut_is_noticed(dev: &Rrdma, t: &mut Tap, peer: &str, tm: Timing) {
    let live0 = peer_count(peer, "rrdma-connections-live");
    let timeouts0 = peer_count(peer, "rrdma-keepalive-timeouts");
    let pings0 = dev.fdinfo_value("rrdma-keepalive-pings").unwrap_or(0);
    let (conn, rw) = match open(
        dev,
        peer,
        Keepalive::Every {
            interval: tm.interval(),
            misses: MISSES,
        },
    ) {
        Ok(x) => x,
        Err(e) => return t.check("keepalive: connect and import", Err(e)),
    };
    let local = match dev.create_region(4096, 4) {
        Ok(r) => r,
        Err(e) => return t.check("keepalive: a local region", Err(e.to_string())),
    };
    // Idle for 8 intervals: the pings keep the connection up.
    sleep(tm.interval() * 8);
    t.check(
        "keepalive: an idle connection stays up past interval x misses",
        rw.write(&local, 0, 0, 1)
            .and_then(|()| rw.read(&local, 1, 0, 1))
            .map_err(|e| e.to_string()),
    );
    let pings = dev
        .fdinfo_value("rrdma-keepalive-pings")
        .unwrap_or(0)
        .saturating_sub(pings0);
    t.check(
        "keepalive: ... with a ping each interval of silence",
        ensure(
            (4..=12).contains(&pings),
            format!("{pings} pings in 8 intervals"),
        ),
    );

    let cut = match Cut::new() {
        Ok(c) => c,
        Err(e) => return t.check("keepalive: cut this guest off (netem loss 100%)", Err(e)),
    };
    let start = Instant::now();
    // Eight operations in flight, then one that blocks until the
    // connection ends: none can be placed.
    let ops: Vec<_> = (0..8u64)
        .map(|i| rw.op(OP_READ, &local, i % 4, i, 1, 100 + i))
        .collect();
    let posted = dev.submit(&ops);
    let r = rw.read(&local, 2, 0, 1);
    let took = start.elapsed();
    println!(
        "# keepalive: importer noticed the cut after {} ms (limit {} ms)",
        took.as_millis(),
        tm.limit().as_millis()
    );
    // The importer's own keepalive ends it (ETIMEDOUT). ECONNRESET if the
    // provider flushed the queue pair before the end reached the state
    // machine, or if the exporter's keepalive fired first after all and its
    // disconnect got through (the cut drops only this guest's packets).
    let end = match &r {
        Err(e) => e.raw_os_error().unwrap_or(0),
        Ok(()) => 0,
    };
    println!(
        "# keepalive: the importer's connection ended with errno {end} ({})",
        if end == ETIMEDOUT.get() {
            "its own keepalive"
        } else {
            "the exporter's disconnect"
        }
    );
    t.check(
        "keepalive: the importer notices the cut: its operation ends with ETIMEDOUT or ECONNRESET",
        ensure(
            end == ETIMEDOUT.get() || end == ECONNRESET.get(),
            format!("{r:?}"),
        ),
    );
    let flushed = match posted {
        Ok(8) => reap(dev, 8).map_err(|e| e.to_string()).and_then(|got| {
            let mut ids: Vec<u64> = got.iter().map(|c| c.user_data).collect();
            ids.sort_unstable();
            ensure(
                ids == (100..108).collect::<Vec<_>>() && got.iter().all(|c| c.status == -end),
                format!("{got:?}"),
            )?;
            quiet(dev, 300)
        }),
        other => Err(format!("SUBMIT: {other:?}")),
    };
    t.check(
        "keepalive: ... and so do those in flight, each exactly once",
        flushed,
    );
    // (No lower bound: the last answer may be older than the cut by a
    // late pong; the idle phase above shows no early end.)
    t.check(
        "keepalive: ... within interval x misses",
        ensure(
            took <= tm.limit() + SLACK,
            format!("{} ms", took.as_millis()),
        ),
    );
    // Past the exporter's limit from its last answer, the link comes back
    // and the exporter must have ended the connection.
    sleep((tm.exporter_limit() + SLACK).saturating_sub(start.elapsed()));
    drop(cut);
    // Another connection of the suite may still be closing: the count
    // must come back to at most what it was before ours.
    let live = wait_for(
        Duration::from_secs(5),
        || matches!((&live0, peer_count(peer, "rrdma-connections-live")), (Ok(a), Ok(b)) if b <= *a),
    );
    t.check(
        "keepalive: the exporter ended the connection and released its grants",
        ensure(
            live,
            format!(
                "live before {live0:?}, now {:?}",
                peer_count(peer, "rrdma-connections-live")
            ),
        ),
    );
    let timeouts = peer_count(peer, "rrdma-keepalive-timeouts");
    t.check(
        "keepalive: ... because the peer went silent",
        match (&timeouts0, &timeouts) {
            (Ok(a), Ok(b)) => ensure(*b == a + 1, format!("timeouts {a} -> {b}")),
            _ => Err(format!("{timeouts0:?} -> {timeouts:?}")),
        },
    );
    t.check(
        "keepalive: the ended connection refuses new operations",
        // The connection's errno, which the read above may not have seen
        // (a flush before the end reached the state machine).
        match rw.write(&local, 0, 0, 1) {
            Err(e)
                if [ETIMEDOUT.get(), ECONNRESET.get()].contains(&e.raw_os_error().unwrap_or(0)) =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        },
    );
    drop(rw);
    t.check(
        "keepalive: ... and disconnects cleanly",
        conn.disconnect().map_err(|e| e.to_string()),
    );
}

fn cut_is_survived_without(dev: &Rrdma, t: &mut Tap, peer: &str, tm: Timing) {
    let (conn, rw) = match open(dev, peer, Keepalive::Off) {
        Ok(x) => x,
        Err(e) => return t.check("keepalive: connect and import, keepalive off", Err(e)),
    };
    let local = match dev.create_region(4096, 4) {
        Ok(r) => r,
        Err(e) => return t.check("keepalive: a local region", Err(e.to_string())),
    };
    match Cut::new() {
        Ok(cut) => {
            sleep(tm.limit() + SLACK);
            drop(cut);
        }
        Err(e) => return t.check("keepalive: cut this guest off (netem loss 100%)", Err(e)),
    }
    t.check(
        "keepalive off on both sides: a cut of interval x misses is survived",
        rw.write(&local, 0, 0, 1).map_err(|e| e.to_string()),
    );
    drop(rw);
    let _ = conn.disconnect();
}
