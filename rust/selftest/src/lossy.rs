// SPDX-License-Identifier: GPL-2.0 OR MIT

//! READs through lost packets, a check of `remote` (the importing guest).
//!
//! This guest's egress drops a tenth of its packets (netem on eth0) while
//! batches of READs are in flight, each READ into a region of its own: so
//! each sits behind a fresh registration of its sink on the send queue.
//! A lost READ request (or, on iWARP, segment) makes the transport resend
//! from it, past registrations that already ran. rxe ran them again and
//! failed the queue pair: the connection ended with only flushes to show
//! (scripts/kpatch/*/0010). The check: every READ completes once,
//! successfully, with the bytes the peer holds, and netem did drop
//! packets (else it proved nothing).

use std::io;
use std::time::Instant;

use rrdma::abi::uapi::{Completion, Op, OP_READ};
use rrdma::{Region, RemoteRegion, Rrdma};

use crate::faults::{netem_counts, netem_here_on, qdisc_here_reset};
use crate::remote::{addr, pattern, reap, T};
use crate::{ensure, Tap};

/// Batches, READs per batch, blocks per READ.
const ROUNDS: u64 = 4;
const OPS: u64 = 16;
const BLOCKS: u32 = 4;
const BLOCK: usize = 4096;

/// netem on this guest's eth0 while it lives.
struct Netem;

impl Netem {
    fn start(args: &str) -> Result<Self, String> {
        netem_here_on(args)?;
        Ok(Netem)
    }
}

impl Drop for Netem {
    fn drop(&mut self) {
        let _ = qdisc_here_reset();
    }
}

/// Posts `ops` (in parts on a small NIC's queue: `SUBMIT` takes what
/// fits, or says `EAGAIN`, and room comes back as operations complete)
/// and reaps as many completions. Whatever was posted is reaped before
/// it returns, an error too: no completion is left for the next check.
pub(crate) fn submit_all(dev: &Rrdma, ops: &[Op]) -> Result<Vec<Completion>, String> {
    let mut comps = Vec::new();
    let mut posted = 0;
    let mut err = None;
    while posted < ops.len() {
        match dev.submit(&ops[posted..]) {
            Ok(n) => posted += n,
            // (The library's error carries the operation's index: no raw errno.)
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && posted > comps.len() => {}
            Err(e) => {
                err = Some(format!("submit: {e} ({posted} of {} posted)", ops.len()));
                break;
            }
        }
        if posted < ops.len() {
            match reap(dev, 1) {
                Ok(got) if !got.is_empty() => comps.extend(got),
                Ok(_) => {
                    err = Some(format!(
                        "{posted} of {} posted, then nothing completed",
                        ops.len()
                    ));
                    break;
                }
                Err(e) => {
                    err = Some(format!("reap: {e}"));
                    break;
                }
            }
        }
    }
    let left = posted.saturating_sub(comps.len());
    comps.extend(reap(dev, left).map_err(|e| format!("reap: {e}"))?);
    match err {
        Some(e) => Err(e),
        None => Ok(comps),
    }
}

/// One batch: `OPS` READs of `BLOCKS` blocks from remote block 0 on, each
/// into a new region; each must bring back its part of `src`.
fn round(dev: &Rrdma, rw: &RemoteRegion<'_>, src: &Region<'_>, r: u64) -> Result<(), String> {
    let sinks: Vec<Region<'_>> = (0..OPS)
        .map(|_| dev.create_region(BLOCK as u32, BLOCKS as u64))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("create_region: {e}"))?;
    let ops: Vec<Op> = sinks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let i = i as u64;
            rw.op(OP_READ, s, 0, i * BLOCKS as u64, BLOCKS, r * 1000 + i)
        })
        .collect();
    let comps = submit_all(dev, &ops)?;
    let mut uds: Vec<u64> = comps.iter().map(|c| c.user_data).collect();
    uds.sort_unstable();
    let want: Vec<u64> = (0..OPS).map(|i| r * 1000 + i).collect();
    ensure(
        uds == want,
        format!("{} completions of {OPS}, user_data {uds:?}", comps.len()),
    )?;
    if let Some(c) = comps.iter().find(|c| c.status != 0) {
        return Err(format!(
            "READ {} ended with errno {}",
            c.user_data, -c.status
        ));
    }
    let len = BLOCKS as usize * BLOCK;
    for (i, s) in sinks.iter().enumerate() {
        let want = &src.as_slice()[i * len..(i + 1) * len];
        ensure(
            s.as_slice()[..len] == *want,
            format!("READ {i} of round {r} holds other bytes than the peer's"),
        )?;
    }
    Ok(())
}

/// On a connection of its own: a failure here must not end the
/// connection the other checks use.
pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw_token: u64) {
    let nblocks = OPS * BLOCKS as u64;
    let res = (|| -> Result<(u64, u64, u128), String> {
        let conn = dev
            .connect(addr(peer, 7471), T)
            .map_err(|e| format!("connect: {e}"))?;
        let rw = conn
            .import(rw_token, T)
            .map_err(|e| format!("import: {e}"))?;
        let mut src = dev
            .create_region(BLOCK as u32, nblocks)
            .map_err(|e| format!("create_region: {e}"))?;
        pattern(src.as_mut_slice(), 0x105e_d0c5);
        rw.write(&src, 0, 0, nblocks as u32)
            .map_err(|e| format!("write: {e}"))?;
        let start = Instant::now();
        let netem = Netem::start("loss 10%")?;
        for r in 0..ROUNDS {
            round(dev, &rw, &src, r)?;
        }
        let (pkt, dropped) = netem_counts().unwrap_or((0, 0));
        drop(netem);
        ensure(
            dropped > 0,
            format!("netem dropped nothing of {pkt} packets"),
        )?;
        Ok((pkt, dropped, start.elapsed().as_millis()))
    })();
    if let Ok((pkt, dropped, ms)) = &res {
        println!(
            "# lossy reads: {ROUNDS} x {OPS} READs in {ms} ms, netem dropped {dropped} of {pkt} packets"
        );
    }
    t.check(
        "READs behind fresh registrations complete intact while a tenth of our packets are lost",
        res.map(|_| ()),
    );
}
