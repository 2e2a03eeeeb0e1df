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

mod block;
mod inject;
mod load;
mod state;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub(crate) use inject::{netem_counts, netem_here_on, qdisc_here_reset};
pub(crate) use load::{run as load, Load};
pub(crate) use state::now_ns;

use block::{judge, Verdict, BLOCK};
use inject::{Fault, ALL};
use rrdma::Rrdma;
use state::{State, ERRNOS, MAX_THREADS, NBLOCKS};

use crate::agent::{counters_moved, delete_module, device_counters, module_live};
use crate::attack::{agent_cmd, agent_query};
use crate::keepalive::EXPORTER_MISSES;
use crate::remote::{addr, control, peer_count, token, T};
use crate::{ensure, Tap};

/// The shared record's file.
pub(crate) const STATE: &str = "/tmp/faults.state";
/// Connections of the workload, threads on each, blocks per thread.
const CONNS: usize = 3;
const THREADS: usize = 2;
const BLOCKS: u64 = 16;
const _: () = assert!(CONNS * THREADS <= MAX_THREADS && CONNS * THREADS * 16 <= NBLOCKS);

/// The errnos a fault may end an operation with: the connection's.
const CONNECTION_ERRNOS: [i32; 11] = [
    libc::EAGAIN,
    libc::ECONNRESET,
    libc::ETIMEDOUT,
    libc::EKEYREVOKED,
    libc::ENOTCONN,
    libc::ECONNREFUSED,
    libc::ECONNABORTED,
    libc::ENETUNREACH,
    libc::EHOSTUNREACH,
    libc::ENODEV,
    libc::ESHUTDOWN,
];

fn errno_name(e: usize) -> String {
    let name = match e as i32 {
        libc::EAGAIN => "EAGAIN",
        libc::ECONNRESET => "ECONNRESET",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EKEYREVOKED => "EKEYREVOKED",
        libc::ENOTCONN => "ENOTCONN",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENODEV => "ENODEV",
        libc::ESHUTDOWN => "ESHUTDOWN",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EINVAL => "EINVAL",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

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

/// A snapshot of the record.
#[derive(Clone)]
struct Snap {
    at: u64,
    ok: u64,
    errors: u64,
    errnos: Vec<u64>,
    mismatches: u64,
}

fn snap(st: &State) -> Snap {
    let th = &st.threads[..CONNS * THREADS];
    Snap {
        at: now_ns(),
        ok: th.iter().map(|t| t.ok.load(SeqCst)).sum(),
        errors: th.iter().map(|t| t.errors.load(SeqCst)).sum(),
        errnos: st.errnos.iter().map(|e| e.load(SeqCst)).collect(),
        mismatches: th.iter().map(|t| t.mismatches.load(SeqCst)).sum(),
    }
}

fn rate(ops: u64, from: u64, to: u64) -> u64 {
    ops * 1_000_000_000 / to.saturating_sub(from).max(1)
}

/// Samples the record while a fault lasts and after: the first error
/// after `t0`, and the longest any thread went without completing an
/// operation.
struct Monitor {
    t0: u64,
    errors0: u64,
    first_error: Option<u64>,
    max_stall: u64,
}

impl Monitor {
    fn sample(&mut self, st: &State) {
        let now = now_ns();
        for th in &st.threads[..CONNS * THREADS] {
            let last = th.last_ok_ns.load(SeqCst);
            self.max_stall = self.max_stall.max(now.saturating_sub(last));
        }
        let errors: u64 = st.threads[..CONNS * THREADS]
            .iter()
            .map(|t| t.errors.load(SeqCst))
            .sum();
        if self.first_error.is_none() && errors > self.errors0 {
            self.first_error = Some(now - self.t0);
        }
    }

    /// Samples until `until` (CLOCK_MONOTONIC ns) or until `done` holds.
    fn watch(&mut self, st: &State, until: u64, mut done: impl FnMut() -> bool) -> bool {
        loop {
            self.sample(st);
            if done() {
                return true;
            }
            if now_ns() >= until {
                return false;
            }
            sleep(Duration::from_millis(20));
        }
    }
}

/// One row of the table.
struct Row {
    name: &'static str,
    before: u64,
    during: u64,
    after: u64,
    noticed: Option<u64>,
    back: Option<u64>,
    stall: u64,
    errors: String,
    lost: u64,
    verified: u64,
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

fn spawn(peer: &str, tm: &Timing) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .args([
            "faults-load",
            STATE,
            peer,
            &CONNS.to_string(),
            &THREADS.to_string(),
            &BLOCKS.to_string(),
            &tm.interval.as_millis().to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn the workload: {e}"))
}

/// The exporter's live connections (its `rrdma serve`'s fdinfo).
fn exporter_live(peer: &str) -> Option<u64> {
    peer_count(peer, "rrdma-connections-live").ok()
}

/// The connections the exporter's keepalive has ended.
fn exporter_timeouts(peer: &str) -> Option<u64> {
    peer_count(peer, "rrdma-keepalive-timeouts").ok()
}

/// This guest's CLOCK_MONOTONIC and the exporter's (its agent's `clock`)
/// read together, in ns: ours is the middle of the question's round trip.
/// A guest's clock stops while its QEMU is stopped.
fn clocks(peer: &str) -> Result<(u64, u64), String> {
    let asked = now_ns();
    let theirs = agent_query(peer, "clock")?;
    let ours = asked + (now_ns() - asked) / 2;
    let theirs = theirs.parse().map_err(|_| format!("clock '{theirs}'"))?;
    Ok((ours, theirs))
}

/// How much more time this guest's clock counted than the exporter's from
/// `c0` to `c1` (negative: the exporter's counted more), in ms.
fn exporter_missed_ms(c0: (u64, u64), c1: (u64, u64)) -> i64 {
    (c1.0 as i64 - c0.0 as i64 - (c1.1 as i64 - c0.1 as i64)) / 1_000_000
}

/// The exporter was stopped and runs again: once its agent answers (at
/// most `within`), its clock missed at least half of `pause` since
/// `before` (a QEMU stopped, its clock stops) and moves again.
fn exporter_resumed(
    peer: &str,
    before: &Result<(u64, u64), String>,
    pause: Duration,
    within: Duration,
) -> Result<(), String> {
    let before = before
        .as_ref()
        .map_err(|e| format!("the clocks before: {e}"))?;
    let start = Instant::now();
    // The first answer may have waited out the rest of the pause: the
    // figures are taken afresh once it answers.
    while let Err(e) = clocks(peer) {
        if start.elapsed() > within {
            return Err(format!("the exporter's agent does not answer: {e}"));
        }
        sleep(Duration::from_millis(200));
    }
    let c1 = clocks(peer)?;
    sleep(Duration::from_millis(200));
    let c2 = clocks(peer)?;
    let missed = exporter_missed_ms(*before, c1);
    let (ours, theirs) = (
        (c2.0 - c1.0) / 1_000_000,
        c2.1.saturating_sub(c1.1) / 1_000_000,
    );
    println!("# exporter paused: its clock missed {missed} ms of this guest's");
    ensure(
        missed >= pause.as_millis() as i64 / 2 && theirs >= ours / 2,
        format!(
            "its clock missed {missed} ms of a {} ms pause; then moved {theirs} ms in {ours} ms",
            pause.as_millis()
        ),
    )
}

/// `rmmod rrdma` here and on the exporter, with the workload's files
/// open: `Ok` if both reached the module and were refused because it is
/// in use (`EWOULDBLOCK`).
fn rmmod_refused(peer: &str) -> Result<(), String> {
    let here = match delete_module() {
        Ok(()) => Err("rmmod rrdma succeeded here".to_string()),
        Err(e) if e == libc::EWOULDBLOCK => Ok(()),
        Err(e) => Err(format!(
            "refused here with {}, not EWOULDBLOCK (in use)",
            std::io::Error::from_raw_os_error(e)
        )),
    };
    here.and(agent_cmd(peer, "rmmod").map_err(|e| format!("exporter: {e}")))
}

/// The module is loaded and live on both guests, with references (the
/// workload's files here, `rrdma serve`'s there); the exporter still
/// serves the workload's connections.
fn module_serves(peer: &str) -> Result<String, String> {
    let here = module_live().map_err(|e| format!("here: {e}"))?;
    let there = agent_query(peer, "module").map_err(|e| format!("exporter: {e}"))?;
    let live = exporter_live(peer);
    ensure(
        here > 0 && there != "0" && live >= Some(CONNS as u64),
        format!("refcount here {here}, there {there}; the exporter's live connections {live:?}"),
    )?;
    Ok(format!("refcount here {here}, there {there}"))
}

/// Tasks in uninterruptible sleep in two samples a second apart.
fn stuck_tasks() -> Vec<String> {
    let sample = || -> Vec<(String, String)> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| {
                let pid = e.file_name().into_string().ok()?;
                pid.parse::<u32>().ok()?;
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let (comm, rest) = stat.rsplit_once(") ")?;
                let comm = comm.split_once('(')?.1.to_string();
                rest.starts_with('D').then_some((pid, comm))
            })
            .collect()
    };
    let first = sample();
    sleep(Duration::from_secs(1));
    let second = sample();
    first
        .into_iter()
        .filter(|t| second.contains(t))
        .map(|(pid, comm)| format!("{comm} ({pid})"))
        .collect()
}

/// Reads every block of the workload back on a connection of this
/// process and judges each: (blocks checked, descriptions of bad ones).
fn verify(dev: &Rrdma, st: &State, peer: &str) -> Result<(u64, Vec<String>), String> {
    let n = (CONNS * THREADS) as u64 * BLOCKS;
    let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
    let conn = dev
        .connect(addr(peer, 7471), T)
        .map_err(|e| format!("connect: {e}"))?;
    let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    let local = dev
        .create_region(BLOCK as u32, n)
        .map_err(|e| e.to_string())?;
    rw.read(&local, 0, 0, n as u32)
        .map_err(|e| format!("read: {e}"))?;
    let mut checked = 0;
    let mut bad = Vec::new();
    for k in 0..n {
        let b = &st.blocks[k as usize];
        let (acked, pending) = (b.acked.load(SeqCst), b.pending.load(SeqCst));
        let at = k as usize * BLOCK;
        match judge(&local.as_slice()[at..at + BLOCK], k, acked, pending) {
            Verdict::Unwritten => {}
            Verdict::Holds => checked += 1,
            v => {
                checked += 1;
                bad.push(format!(
                    "block {k}: {v:?} (acked {acked}, pending {pending})"
                ));
            }
        }
    }
    drop(rw);
    conn.disconnect().map_err(|e| format!("disconnect: {e}"))?;
    Ok((checked, bad))
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

/// Runs the workload through one fault; returns its row.
#[allow(clippy::too_many_arguments)]
fn one(
    dev: &Rrdma,
    t: &mut Tap,
    st: &State,
    f: Fault,
    peer: &str,
    prov: &str,
    dev_name: &str,
    tm: &Timing,
) -> Row {
    let name = f.name();
    let mut row = Row {
        name,
        before: 0,
        during: 0,
        after: 0,
        noticed: None,
        back: None,
        stall: 0,
        errors: String::new(),
        lost: 0,
        verified: 0,
    };
    st.stop.store(0, SeqCst);
    let base: Vec<u64> = st.threads.iter().map(|t| t.ok.load(SeqCst)).collect();
    let mut child = match spawn(peer, tm) {
        Ok(c) => c,
        Err(e) => {
            t.check(&format!("{name}: the workload runs"), Err(e));
            return row;
        }
    };
    let running = |st: &State| {
        st.threads[..CONNS * THREADS]
            .iter()
            .zip(&base)
            .all(|(t, b)| t.ok.load(SeqCst) > *b)
    };
    let start = Instant::now();
    while !running(st) && start.elapsed() < tm.recover {
        sleep(Duration::from_millis(50));
    }
    let started = running(st);
    t.check(
        &format!("{name}: the workload runs on every connection"),
        ensure(
            started,
            format!(
                "setup failures {} (last errno {})",
                st.setup_failures.load(SeqCst),
                st.setup_errno.load(SeqCst)
            ),
        ),
    );
    if !started {
        let _ = child.kill();
        let _ = child.wait();
        return row;
    }
    let sw = snap(st);
    sleep(tm.warm);
    let s0 = snap(st);
    row.before = rate(s0.ok - sw.ok, sw.at, s0.at);

    // The fault.
    let t_fault = now_ns();
    let until = t_fault + tm.fault.as_nanos() as u64;
    let mut mon = Monitor {
        t0: t_fault,
        errors0: s0.errors,
        first_error: None,
        max_stall: 0,
    };
    let old_token = token(peer, "rw").ok();
    let timeouts0 = exporter_timeouts(peer);
    // The devices' own counters (rxe's retries, duplicates, sequence
    // errors), printed after the recovery: what the transport did.
    let counters0 = device_counters(dev_name);
    let _ = agent_cmd(peer, &format!("counters {} before", f.key()));
    let serve_pid = control(peer, "pid").ok();
    let clocks0 = clocks(peer);
    let mut evidence: Result<(), String> = Ok(());
    let applied = match f {
        Fault::Netem(_, args) => inject::netem_on(peer, args),
        Fault::LinkDown => inject::run("ip", &["link", "set", "eth0", "down"]).map(|_| ()),
        Fault::Pause => inject::pause('a', tm.fault),
        Fault::PauseImporter => inject::pause('b', tm.importer_pause()),
        Fault::KillImporter => child.kill().map_err(|e| e.to_string()),
        Fault::KillExporter => match control(peer, "die") {
            // The connection closes without an answer.
            Ok(a) if !a.is_empty() => Err(format!("serve answered 'die' with '{a}'")),
            Ok(_) | Err(_) => Ok(()),
        },
        Fault::LinkDelExporter => agent_cmd(peer, "linkdel"),
        Fault::LinkDelImporter => inject::run("rdma", &["link", "del", dev_name]).map(|_| ()),
        Fault::Rmmod => rmmod_refused(peer),
    };
    // A killed exporter's is judged once the fault has had its time.
    if f != Fault::KillExporter {
        t.check(&format!("{name}: injected"), applied.clone());
    }
    if f == Fault::KillImporter {
        // Killed: the exporter must end its connections on its own.
        let status = child.wait();
        evidence = ensure(
            status.as_ref().is_ok_and(|s| {
                std::os::unix::process::ExitStatusExt::signal(s) == Some(libc::SIGKILL)
            }),
            format!("workload ended with {status:?}"),
        );
        let gone = mon.watch(st, until, || exporter_live(peer) == Some(0));
        if gone {
            mon.first_error = Some(now_ns() - t_fault);
        }
        mon.watch(st, until, || false);
        evidence = evidence.and(ensure(
            gone,
            format!(
                "the exporter still had {:?} connections after {} ms",
                exporter_live(peer),
                tm.fault.as_millis()
            ),
        ));
    } else if f == Fault::PauseImporter {
        // This guest's clock stops while it is paused, so it cannot wait
        // out its own pause: it waits (bounded by its own clock) until the
        // exporter's keepalive has ended the workload's connections, which
        // can only happen while this guest is silent. In its clock, the
        // first error then comes that long after it was continued.
        let want = timeouts0.map(|t| t + CONNS as u64);
        let bound = t_fault + (tm.importer_pause() + tm.recover).as_nanos() as u64;
        let mut asked = Instant::now();
        let ended = mon.watch(st, bound, || {
            if asked.elapsed() < Duration::from_millis(250) {
                return false;
            }
            asked = Instant::now();
            want.is_some() && exporter_timeouts(peer) >= want
        });
        evidence = ensure(
            ended,
            format!(
                "the exporter's keepalive ended {:?} connections (before {timeouts0:?}), \
                 not the workload's {CONNS}",
                exporter_timeouts(peer)
            ),
        );
    } else {
        mon.watch(st, until, || false);
    }
    if f == Fault::KillExporter {
        // Killed: `rrdma serve`'s process ended, and with it the
        // workload's connections (its operations failed).
        let killed = applied.clone().and_then(|()| {
            let pid = serve_pid
                .clone()
                .ok_or("serve's pid before the fault: no answer")?;
            agent_cmd(peer, &format!("gone {pid}")).map_err(|e| format!("serve {pid}: {e}"))?;
            ensure(
                mon.first_error.is_some(),
                format!(
                    "serve {pid} ended, yet no operation of the workload failed in {} ms",
                    tm.fault.as_millis()
                ),
            )
        });
        t.check(&format!("{name}: injected"), killed);
    }
    let s1 = snap(st);
    row.during = rate(s1.ok - s0.ok, s0.at, s1.at);
    if let Fault::Netem(_, args) = f {
        let counts = inject::netem_counts();
        evidence = match counts {
            Some((pkt, dropped)) => ensure(
                pkt > 0 && (!args.starts_with("loss") || dropped > 0),
                format!("netem: {pkt} packets, {dropped} dropped"),
            ),
            None => Err("no netem counts".into()),
        };
    }

    // Undo it.
    let t_heal_req = now_ns();
    let healed = match f {
        Fault::Netem(..) => inject::netem_off(peer),
        Fault::LinkDown => inject::run("ip", &["link", "set", "eth0", "up"]).map(|_| ()),
        // The host continues the exporter after the pause it asked for.
        Fault::Pause => exporter_resumed(peer, &clocks0, tm.fault, tm.recover),
        // The host continued this guest (it runs): its clock missed the
        // pause, which the exporter's counted.
        Fault::PauseImporter => clocks0.clone().and_then(|c0| {
            let missed = -exporter_missed_ms(c0, clocks(peer)?);
            let pause = tm.importer_pause().as_millis() as i64;
            println!("# importer paused: its clock missed {missed} ms of the exporter's");
            ensure(
                missed >= pause / 2,
                format!("this guest's clock missed {missed} ms of a {pause} ms pause"),
            )
        }),
        Fault::KillImporter => spawn(peer, tm).map(|c| child = c),
        // A new `rrdma serve` with new tokens.
        Fault::KillExporter => inject::tokens(peer, tm.recover).and_then(|tokens| {
            let pid = control(peer, "pid").map_err(|e| format!("pid: {e}"))?;
            ensure(
                old_token.is_some_and(|o| !tokens.contains(&format!("{o:#x}")))
                    && serve_pid.as_ref().is_some_and(|old| *old != pid),
                format!(
                    "tokens {tokens} (before {old_token:x?}), serve {pid} (before {serve_pid:?})"
                ),
            )
        }),
        Fault::LinkDelExporter => agent_cmd(peer, "linkadd"),
        Fault::LinkDelImporter => inject::link_add(dev_name, prov),
        // Refused: the module stayed, and serves.
        Fault::Rmmod => module_serves(peer).map(|_| ()),
    };
    t.check(&format!("{name}: undone"), healed);
    let t_heal = t_heal_req;
    let back = mon.watch(st, t_heal + tm.recover.as_nanos() as u64, || {
        st.threads[..CONNS * THREADS]
            .iter()
            .all(|th| th.last_ok_ns.load(SeqCst) > t_heal)
    });
    if back {
        row.back = Some(ms(now_ns() - t_heal));
    }
    t.check(
        &format!(
            "{name}: every connection works again within {} s",
            tm.recover.as_secs()
        ),
        ensure(back, "not all threads completed an operation"),
    );
    sleep(Duration::from_secs(1));
    let s2 = snap(st);
    let counters1 = device_counters(dev_name);
    if !counters1.is_empty() {
        println!(
            "# counters, {name}: importer's {dev_name}: {}",
            counters_moved(&counters0, &counters1)
        );
    }
    let _ = agent_cmd(peer, &format!("counters {} fault and recovery", f.key()));
    row.after = rate(s2.ok - s1.ok, t_heal, s2.at);
    row.noticed = mon.first_error.map(ms);
    row.stall = ms(mon.max_stall);
    if matches!(
        f,
        Fault::LinkDown | Fault::Pause | Fault::LinkDelExporter | Fault::LinkDelImporter
    ) {
        evidence = ensure(
            s2.errors > s0.errors || mon.max_stall >= tm.fault.as_nanos() as u64 / 2,
            format!("no error, longest stall {} ms", row.stall),
        );
    }
    if f == Fault::KillExporter {
        // The restored imports name the dead exporter's export.
        let k = libc::EKEYREVOKED as usize;
        evidence = ensure(
            s2.errnos[k] > s0.errnos[k],
            "no operation failed with EKEYREVOKED",
        );
    }
    if f == Fault::Rmmod {
        // Refused because in use, with operations completing across it.
        evidence = applied
            .clone()
            .map_err(|e| format!("not refused as in use: {e}"))
            .and_then(|()| {
                let refs = module_serves(peer)?;
                ensure(
                    s1.ok > s0.ok,
                    format!("{refs}; no operation completed during the fault"),
                )
            });
        t.check(
            "rmmod in flight: the workload saw no error",
            ensure(
                s2.errors == s0.errors,
                format!("{} errors", s2.errors - s0.errors),
            ),
        );
    }
    t.check(&format!("{name}: the fault acted"), evidence);

    // Errors by errno over the fault and the recovery.
    let mut errs = Vec::new();
    let mut foreign = Vec::new();
    for e in 0..ERRNOS {
        let n = s2.errnos[e] - s0.errnos[e];
        if n > 0 {
            errs.push(format!("{} {n}", errno_name(e)));
            if !CONNECTION_ERRNOS.contains(&(e as i32)) {
                foreign.push(errno_name(e));
            }
        }
    }
    row.errors = errs.join(", ");
    t.check(
        &format!("{name}: operations failed only with connection errnos"),
        ensure(foreign.is_empty(), format!("{foreign:?}")),
    );
    t.check(
        &format!("{name}: every read held its block's acknowledged write"),
        ensure(
            s2.mismatches == s0.mismatches,
            format!("{} mismatches", s2.mismatches - s0.mismatches),
        ),
    );

    // Stop, verify, and look at the exporter.
    st.stop.store(1, SeqCst);
    let stop_start = Instant::now();
    let stopped = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if stop_start.elapsed() < tm.stop => sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    t.check(
        &format!("{name}: the workload stops when asked"),
        ensure(
            stopped,
            format!("still running after {} s", tm.stop.as_secs()),
        ),
    );
    let verified = verify(dev, st, peer);
    let lost = match &verified {
        Ok((n, bad)) => {
            row.verified = *n;
            row.lost = bad.len() as u64;
            ensure(
                bad.is_empty(),
                bad.iter().take(3).cloned().collect::<Vec<_>>().join("; "),
            )
        }
        Err(e) => Err(e.clone()),
    };
    t.check(
        &format!(
            "{name}: no acknowledged write lost ({} blocks)",
            row.verified
        ),
        lost,
    );
    let ex_start = Instant::now();
    while exporter_live(peer) != Some(0) && ex_start.elapsed() < tm.exporter {
        sleep(Duration::from_millis(100));
    }
    let live = exporter_live(peer);
    t.check(
        &format!("{name}: the exporter ends every connection"),
        ensure(
            live == Some(0),
            format!("{live:?} live after {} s", tm.exporter.as_secs()),
        ),
    );
    let stuck = stuck_tasks();
    t.check(
        &format!("{name}: no task stuck in D state"),
        ensure(stuck.is_empty(), stuck.join(", ")),
    );
    row
}
