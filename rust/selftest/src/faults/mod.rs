// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `faults PEER PROVIDER SECONDS [quick] [KEY...]`: the fault suite's
//! driver, on the importing guest, against `rrdma serve` and the agent on
//! `PEER` (tests/guest/faults.sh).
//!
//! For each fault (`inject.rs`; `KEY`s pick some, e.g. `loss-10`), a fresh
//! workload process (`load.rs`) runs a checksummed write/read loop on
//! several connections; the fault is injected after a warm-up, lasts
//! `SECONDS`, and is undone. The driver samples the shared record
//! (`state.rs`) every 20 ms and measures: operations per second before,
//! during and after; when the importer first saw an error (for a killed
//! importer, when the exporter had ended its connections; for a paused one,
//! in its own clock, which stopped while it was paused); how long
//! after the fault was undone every connection worked again; the longest
//! time a thread went without a completed operation; the errors by errno.
//! Then it stops the workload, reads every block back on a connection of
//! its own and judges each against the journal (`block.rs`).
//!
//! Checks per fault: the workload ran on every connection; the fault was
//! injected (a killed exporter's process ended and the workload's
//! operations failed; rmmod reached the module on both guests and was
//! refused as in use, `EWOULDBLOCK`); it acted (netem counted packets,
//! and drops for a loss; the workload stalled or failed; the exporter's
//! keepalive ended a paused importer's connections; a killed exporter's
//! restored imports failed with `EKEYREVOKED`; the refused rmmod left the
//! module live, with references, on both guests while operations went
//! on); it was undone (a paused guest's clock missed about the pause
//! against the other's, and it runs again; a killed exporter is a new
//! process with new tokens; after rmmod the module still serves); every
//! connection came back; operations failed only with connection errnos;
//! every read held its block's acknowledged write (or the write in flight
//! at the fault); no acknowledged write was lost; the exporter ended every
//! connection afterwards; no task is stuck in D
//! state. A table of the figures ends the output (`# ` lines).
//!
//! Here: the suite's parameters, its run and the table; `one.rs` runs one
//! fault; `figures.rs` holds what it measures, `observe.rs` what it looks
//! at on both guests, `workload.rs` the workload process's start and the
//! verification after it.

mod block;
mod figures;
mod inject;
mod load;
mod observe;
mod one;
mod state;
mod workload;

use std::path::Path;
use std::time::Duration;

pub(crate) use inject::{netem_counts, netem_here_on, qdisc_here_reset};
pub(crate) use load::{run as load, Load};
pub(crate) use state::now_ns;

use figures::Row;
use inject::{Fault, ALL};
use one::one;
use rrdma::Rrdma;
use state::{State, MAX_THREADS, NBLOCKS};

use crate::attack::agent_cmd;
use crate::keepalive::EXPORTER_MISSES;
use crate::{ensure, Tap};

/// The shared record's file.
pub(crate) const STATE: &str = "/tmp/faults.state";
/// Connections of the workload, threads on each, blocks per thread.
const CONNS: usize = 3;
const THREADS: usize = 2;
const BLOCKS: u64 = 16;
const _: () = assert!(CONNS * THREADS <= MAX_THREADS && CONNS * THREADS * 16 <= NBLOCKS);

/// Times of the suite; `quick` for debug kernels.
struct Timing {
    warm: Duration,
    fault: Duration,
    /// Every connection must work again within this after the fault ends.
    recover: Duration,
    /// The workload must stop within this once asked.
    stop: Duration,
    /// The exporter must have ended the workload's connections within this.
    exporter: Duration,
    /// The keepalive interval of both sides (the importer allows 4 misses,
    /// the exporter 10).
    interval: Duration,
}

impl Timing {
    /// How long the importer is paused: the fault's time, and at least 2 s
    /// beyond the exporter's keepalive limit, so that the exporter ends its
    /// connections (and with them the importer's access) while it sleeps.
    fn importer_pause(&self) -> Duration {
        self.fault
            .max(self.interval * u32::from(EXPORTER_MISSES) + Duration::from_secs(2))
    }
}

pub(crate) fn run(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    prov: &str,
    secs: u64,
    quick: bool,
    keys: &[String],
) {
    // The importer's keepalive limit (4 intervals) must exceed the time
    // the transport takes to resend a lost packet, or a single loss ends
    // the connection: TCP's (siw) starts at 200 ms, rxe's is the ACK
    // timeout rrdma sets, 2.1 s.
    let interval = Duration::from_millis(match (prov, quick) {
        ("rxe", false) => 1000,
        ("rxe", true) => 2000,
        (_, false) => 300,
        (_, true) => 1000,
    });
    let tm = Timing {
        warm: Duration::from_secs(if quick { 3 } else { 2 }),
        fault: Duration::from_secs(secs.max(1)),
        recover: Duration::from_secs(if quick { 60 } else { 30 }),
        stop: Duration::from_secs(if quick { 60 } else { 30 }),
        exporter: interval * u32::from(EXPORTER_MISSES)
            + Duration::from_secs(if quick { 20 } else { 5 }),
        interval,
    };
    let faults: Vec<Fault> = ALL
        .into_iter()
        .filter(|f| keys.is_empty() || keys.iter().any(|k| *k == f.key()))
        .collect();
    let unknown: Vec<&String> = keys
        .iter()
        .filter(|k| !ALL.iter().any(|f| f.key() == **k))
        .collect();
    t.check(
        "faults: the faults asked for exist",
        ensure(
            unknown.is_empty(),
            format!(
                "unknown {unknown:?}; known: {}",
                ALL.map(Fault::key).join(" ")
            ),
        ),
    );
    let st = match State::open(Path::new(STATE), true) {
        Ok(s) => s,
        Err(e) => return t.check("faults: the shared record", Err(e.to_string())),
    };
    let syn = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_syn_retries").unwrap_or_default();
    // siw connects with a blocking TCP connect: bound an attempt toward a
    // cut link to 3 s, as the reconnect checks do.
    let _ = std::fs::write("/proc/sys/net/ipv4/tcp_syn_retries", "1");
    t.check(
        "faults: the exporter takes the suite's keepalive",
        agent_cmd(
            peer,
            &format!("keepalive {} {EXPORTER_MISSES}", tm.interval.as_millis()),
        ),
    );
    let dev_name = format!("{prov}0");
    let mut rows = Vec::new();
    for f in faults {
        rows.push(one(dev, t, &st, f, peer, prov, &dev_name, &tm));
    }
    t.check(
        "faults: the exporter's keepalive comes back",
        agent_cmd(peer, "keepalive restore"),
    );
    let _ = std::fs::write("/proc/sys/net/ipv4/tcp_syn_retries", syn.trim());
    table(&rows, prov, &tm);
}

fn table(rows: &[Row], prov: &str, tm: &Timing) {
    println!(
        "# faults on {prov}: {CONNS} connections x {THREADS} threads, 4 KiB write + read each; \
         fault {} s; keepalive {} ms x 4 (exporter x {EXPORTER_MISSES})",
        tm.fault.as_secs(),
        tm.interval.as_millis()
    );
    println!(
        "# {:<24} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>5} {:>5}  errors by errno",
        "fault", "ops/s", "during", "after", "noticed", "back", "stall", "lost", "of"
    );
    for r in rows {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{v} ms"));
        println!(
            "# {:<24} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>5} {:>5}  {}",
            r.name,
            r.before,
            r.during,
            r.after,
            opt(r.noticed),
            opt(r.back),
            format!("{} ms", r.stall),
            r.lost,
            r.verified,
            if r.errors.is_empty() { "-" } else { &r.errors }
        );
    }
}
