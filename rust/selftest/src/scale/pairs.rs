// SPDX-License-Identifier: GPL-2.0

//! The connection pairs of `scale` (issue 47): each connect accepted by
//! the same file, with the connect time and the kernel memory per idle
//! pair and per pair after its first import and READ. Checks that an idle
//! connection's queue pair posted only its idle control receive buffers
//! (`rrdma-ctrl-grown` stands still while the pairs connect) and that both
//! ends posted the rest at the pair's first import (it grows by two per
//! pair: the importer before its request, the exporter at it).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::OP_READ;
use rrdma::{Connection, Listener, Rrdma};

use super::{line, p, settle_lanes, Rig, T};
use crate::ensure;
use crate::measure::Profile;

/// Connects `conns` pairs to `me` (accepted from `listener`), measures
/// them idle, then imports `token` over each and READs one block.
pub(super) fn pairs(
    dev: &Rrdma,
    me: SocketAddr,
    listener: &Listener<'_>,
    rig: &Rig<'_>,
    token: u64,
    conns: usize,
    json: &mut String,
) -> Result<(), String> {
    let grown = || dev.fdinfo_value("rrdma-ctrl-grown").unwrap_or(0);
    let grown0 = grown();
    let before = Profile::take().map_err(|e| e.to_string())?;
    let mut times: Vec<Duration> = Vec::new();
    let mut held: Vec<(Connection<'_>, Connection<'_>)> = Vec::new();
    for _ in 0..conns {
        let t0 = Instant::now();
        let c = dev
            .connect(me, T)
            .map_err(|e| format!("connect {}: {e}", held.len()))?;
        times.push(t0.elapsed());
        let a = listener
            .accept(Some(T))
            .map_err(|e| format!("accept: {e}"))?
            .ok_or("accept: none")?;
        held.push((c, a));
    }
    let after = Profile::take().map_err(|e| e.to_string())?;
    let grown_idle = grown() - grown0;
    // Where it goes: the providers keep their queues in vmalloc.
    let parts = before.growth(&after, conns);
    let f = rig.figures()?;
    let per_pair = after.kib().saturating_sub(before.kib()) as f64 / conns as f64;
    // Then each pair's first operation: an import over it and a READ,
    // which opens its data lanes (once they stand still).
    let mut used = Vec::new();
    for (c, _) in &held {
        let r = c.import(token, T).map_err(|e| format!("import: {e}"))?;
        dev.rw_sync(&r.op(OP_READ, &rig.local, 0, 0, 1, 0))
            .map_err(|e| format!("first READ: {e}"))?;
        used.push(r);
    }
    settle_lanes(dev);
    let used_kib = Profile::take().map_err(|e| e.to_string())?;
    let grown_used = grown() - grown0 - grown_idle;
    let per_used = used_kib.kib().saturating_sub(before.kib()) as f64 / conns as f64;
    let used_parts = after.growth(&used_kib, conns);
    drop(used);
    println!(
        "# connections {conns} pairs: connect p50 {:.0} us, p99 {:.0} us, {per_pair:.0} KiB of kernel memory per idle pair, {per_used:.0} KiB after an import and a READ on each; {}",
        p(&mut times, 0.5),
        p(&mut times, 0.99),
        line("with them", conns, &f)
    );
    println!("# an idle pair's memory: {parts}");
    println!("# a pair's first import and READ add: {used_parts}");
    let _ = write!(
        json,
        "\"connect_p50_us\": {:.0}, \"connect_p99_us\": {:.0}, \"kib_per_idle_pair\": {per_pair:.0}, \"kib_per_used_pair\": {per_used:.0}, ",
        p(&mut times, 0.5),
        p(&mut times, 0.99)
    );
    ensure(
        grown_idle == 0,
        format!("{grown_idle} idle queue pairs posted all their control receive buffers"),
    )?;
    ensure(
        grown_used == 2 * conns as u64,
        format!(
            "{grown_used} queue pairs posted the rest of their control receive buffers for {conns} first imports (2 each)"
        ),
    )
}
