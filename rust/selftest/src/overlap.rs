// SPDX-License-Identifier: GPL-2.0

//! Overlapping operations, checked exactly as the UAPI header (`struct
//! rrdma_op`) and Documentation/rrdma.rst ("Overlapping operations") state
//! them. Operations in flight at the same time are not atomic with respect
//! to each other: two writes of the same blocks from threads pinned to
//! different CPUs (different queue pairs: data lanes) may leave a block
//! with bytes of both, and a read beside them may return any mix, but each
//! byte afterwards is one that a write wrote, and each byte of the read
//! one that the block held or a write wrote (nothing else: no stale or
//! foreign data). Ordering comes only from completions: a write whose
//! completion a thread has seen is seen in full by any later operation of
//! a thread that learned of it, and a later write replaces it in full,
//! every round, the two threads taking turns.

use std::sync::{mpsc, Barrier};

use rrdma::{Region, RemoteRegion, Rrdma};

use crate::affinity::{cpus, pin};
use crate::remote::pattern;
use crate::{ensure, expect_ok, Tap};

/// The remote blocks written.
const FIRST: u64 = 64;
const BLOCKS: u32 = 16;
const BYTES: usize = BLOCKS as usize * 4096;

/// Two CPUs to pin the two threads to (the same one twice on a single
/// CPU).
fn two_cpus() -> [usize; 2] {
    let c = cpus();
    [c[0], *c.get(1).unwrap_or(&c[0])]
}

/// Every thread's error, not only the first (which may be a thread that
/// stopped because another one failed).
fn all_ok(res: Vec<Result<(), String>>) -> Result<(), String> {
    let errs: Vec<String> = res.into_iter().filter_map(Result::err).collect();
    ensure(errs.is_empty(), errs.join("; "))
}

/// The first byte of `got` that is none of `allowed`'s at its offset.
fn foreign(got: &[u8], allowed: &[&[u8]]) -> Option<usize> {
    (0..got.len()).find(|&i| allowed.iter().all(|a| a[i] != got[i]))
}

/// Blocks of `got` with bytes of both `a` and `b` (where they differ).
fn torn(got: &[u8], a: &[u8], b: &[u8]) -> usize {
    (0..got.len() / 4096)
        .filter(|k| {
            let r = k * 4096..(k + 1) * 4096;
            let mixed = |x: &[u8]| r.clone().any(|i| got[i] != x[i]);
            mixed(a) && mixed(b)
        })
        .count()
}

/// (a) `rounds` rounds of two writes of the same blocks at once (threads
/// on `cpus`) and a read of them beside: every byte written is one of the
/// writes', every byte read one of those or what the blocks held.
fn concurrent(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    cpus: [usize; 2],
    rounds: u64,
) -> Result<(), String> {
    let new = || expect_ok(dev.create_region(4096, u64::from(BLOCKS)));
    let (mut a, mut b, mut old, snap, back) = (new()?, new()?, new()?, new()?, new()?);
    rw.read(&old, 0, FIRST, BLOCKS)
        .map_err(|e| format!("read: {e}"))?;
    let (mut torn_blocks, mut read_mixed) = (0, 0);
    for round in 0..rounds {
        // (`pattern` ignores a seed's bit 0.)
        pattern(a.as_mut_slice(), 0xa000 + round * 2);
        pattern(b.as_mut_slice(), 0xb000 + round * 2);
        let start = Barrier::new(3);
        let res: Vec<Result<(), String>> = std::thread::scope(|s| {
            let start = &start;
            let mut hs = Vec::new();
            for (cpu, out) in [(cpus[0], &a), (cpus[1], &b)] {
                hs.push(s.spawn(move || {
                    pin(cpu)?;
                    start.wait();
                    rw.write(out, 0, FIRST, BLOCKS)
                        .map_err(|e| format!("write: {e}"))
                }));
            }
            hs.push(s.spawn(|| {
                start.wait();
                rw.read(&snap, 0, FIRST, BLOCKS)
                    .map_err(|e| format!("read: {e}"))
            }));
            hs.into_iter()
                .map(|h| h.join().unwrap_or(Err("panicked".into())))
                .collect()
        });
        all_ok(res)?;
        rw.read(&back, 0, FIRST, BLOCKS)
            .map_err(|e| format!("read: {e}"))?;
        let (got, seen) = (back.as_slice(), snap.as_slice());
        if let Some(i) = foreign(got, &[a.as_slice(), b.as_slice()]) {
            return Err(format!(
                "round {round}: byte {i} (block {}) is {:#x}, written {:#x} and {:#x}",
                FIRST + (i / 4096) as u64,
                got[i],
                a.as_slice()[i],
                b.as_slice()[i]
            ));
        }
        if let Some(i) = foreign(seen, &[old.as_slice(), a.as_slice(), b.as_slice()]) {
            return Err(format!(
                "round {round}: the read beside the writes got {:#x} at byte {i}, none of old {:#x}, {:#x}, {:#x}",
                seen[i],
                old.as_slice()[i],
                a.as_slice()[i],
                b.as_slice()[i]
            ));
        }
        torn_blocks += torn(got, a.as_slice(), b.as_slice());
        read_mixed +=
            usize::from(seen != old.as_slice() && seen != a.as_slice() && seen != b.as_slice());
        old.as_mut_slice().copy_from_slice(got);
    }
    println!(
        "# overlapping writes on CPUs {cpus:?}: {torn_blocks} of {} blocks hold bytes of both; {read_mixed} of {rounds} reads beside them got a mix",
        rounds * u64::from(BLOCKS)
    );
    Ok(())
}

/// The first byte of `back` that is not `want`'s, as an error of `what`.
fn in_full(back: &Region<'_>, want: &[u8], what: String) -> Result<(), String> {
    match foreign(back.as_slice(), &[want]) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what} read {:#x} at byte {i} (block {}), want {:#x}",
            back.as_slice()[i],
            FIRST + (i / 4096) as u64,
            want[i]
        )),
    }
}

/// (b) `rounds` rounds between two threads on `cpus`, taking turns: one
/// writes and tells the other once its write completed; the other reads
/// (the first write in full), writes another pattern, reads back (that one
/// in full) and tells the first, which reads back (that one in full too)
/// and tells the other that the round is over.
fn ordered(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    cpus: [usize; 2],
    rounds: u64,
) -> Result<(), String> {
    // Each thread's baton: a message says the other's write completed (or
    // the first writer's read back did).
    let (tx0, rx0) = mpsc::channel::<()>();
    let (tx1, rx1) = mpsc::channel::<()>();
    let res: Vec<Result<(), String>> = std::thread::scope(|s| {
        let side = |me: u64, tx: mpsc::Sender<()>, rx: mpsc::Receiver<()>| {
            let cpu = cpus[me as usize];
            s.spawn(move || -> Result<(), String> {
                pin(cpu)?;
                let region = || expect_ok(dev.create_region(4096, u64::from(BLOCKS)));
                let (mut out, back) = (region()?, region()?);
                let (mut first, mut second) = (vec![0u8; BYTES], vec![0u8; BYTES]);
                let lost = "the other thread stopped".to_string();
                let read = |want: &[u8], what: &str| {
                    rw.read(&back, 0, FIRST, BLOCKS)
                        .map_err(|e| format!("read: {e}"))?;
                    in_full(&back, want, format!("thread {me}: {what}"))
                };
                for round in 0..rounds {
                    // (`pattern` ignores a seed's bit 0.)
                    pattern(&mut first, 0xc000 + round * 4);
                    pattern(&mut second, 0xc000 + round * 4 + 2);
                    let writes_first = round % 2 == me;
                    let pat = if writes_first { &first } else { &second };
                    if !writes_first {
                        rx.recv().map_err(|_| lost.clone())?;
                        read(&first, &format!("round {round}, before its write:"))?;
                    }
                    out.as_mut_slice().copy_from_slice(pat);
                    rw.write(&out, 0, FIRST, BLOCKS)
                        .map_err(|e| format!("write: {e}"))?;
                    if writes_first {
                        tx.send(()).map_err(|_| lost.clone())?;
                        rx.recv().map_err(|_| lost.clone())?;
                        read(&second, &format!("round {round}, after the other's write:"))?;
                        tx.send(()).map_err(|_| lost.clone())?;
                    } else {
                        read(&second, &format!("round {round}, after its write:"))?;
                        tx.send(()).map_err(|_| lost.clone())?;
                        // The next round's write waits for the first
                        // writer's read.
                        rx.recv().map_err(|_| lost.clone())?;
                    }
                }
                Ok(())
            })
        };
        let hs = [side(0, tx1, rx0), side(1, tx0, rx1)];
        hs.map(|h| h.join().unwrap_or(Err("panicked".into())))
            .into()
    });
    all_ok(res)
}

/// (a) with `concurrent_rounds` rounds, (b) with `ordered_rounds`.
pub(crate) fn checks(
    dev: &Rrdma,
    t: &mut Tap,
    rw: &RemoteRegion<'_>,
    concurrent_rounds: u64,
    ordered_rounds: u64,
) {
    let cpus = two_cpus();
    t.check(
        &format!(
            "overlapping writes from CPUs {} and {} at once, {concurrent_rounds} rounds of {BLOCKS} blocks: each byte is one a write wrote, each byte read beside them one the block held or a write wrote",
            cpus[0], cpus[1]
        ),
        concurrent(dev, rw, cpus, concurrent_rounds),
    );
    t.check(
        &format!(
            "writes ordered by their completions, CPUs {} and {} taking turns, {ordered_rounds} rounds: each completed write is read in full by the other thread, and the later write replaces it in full",
            cpus[0], cpus[1]
        ),
        ordered(dev, rw, cpus, ordered_rounds),
    );
}
