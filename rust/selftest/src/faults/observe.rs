// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the fault suite looks at on both guests besides the record: the
//! exporter's connections and clock, rmmod and the module, stuck tasks.

use std::thread::sleep;
use std::time::{Duration, Instant};

use super::state::now_ns;
use super::CONNS;
use crate::agent::{delete_module, module_live};
use crate::attack::{agent_cmd, agent_query};
use crate::ensure;
use crate::remote::peer_count;

/// The exporter's live connections (its `rrdma serve`'s fdinfo).
pub(super) fn exporter_live(peer: &str) -> Option<u64> {
    peer_count(peer, "rrdma-connections-live").ok()
}

/// The connections the exporter's keepalive has ended.
pub(super) fn exporter_timeouts(peer: &str) -> Option<u64> {
    peer_count(peer, "rrdma-keepalive-timeouts").ok()
}

/// This guest's CLOCK_MONOTONIC and the exporter's (its agent's `clock`)
/// read together, in ns: ours is the middle of the question's round trip.
/// A guest's clock stops while its QEMU is stopped.
pub(super) fn clocks(peer: &str) -> Result<(u64, u64), String> {
    let asked = now_ns();
    let theirs = agent_query(peer, "clock")?;
    let ours = asked + (now_ns() - asked) / 2;
    let theirs = theirs.parse().map_err(|_| format!("clock '{theirs}'"))?;
    Ok((ours, theirs))
}

/// How much more time this guest's clock counted than the exporter's from
/// `c0` to `c1` (negative: the exporter's counted more), in ms.
pub(super) fn exporter_missed_ms(c0: (u64, u64), c1: (u64, u64)) -> i64 {
    (c1.0 as i64 - c0.0 as i64 - (c1.1 as i64 - c0.1 as i64)) / 1_000_000
}

/// The exporter was stopped and runs again: once its agent answers (at
/// most `within`), its clock missed at least half of `pause` since
/// `before` (a QEMU stopped, its clock stops) and moves again.
pub(super) fn exporter_resumed(
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
pub(super) fn rmmod_refused(peer: &str) -> Result<(), String> {
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
pub(super) fn module_serves(peer: &str) -> Result<String, String> {
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
pub(super) fn stuck_tasks() -> Vec<String> {
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
