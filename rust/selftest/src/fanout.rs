// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest fanout SELF PEERS`: one initiator with imports on
//! several exporters (issue 47's fan-out), in one guest. Each exporter is
//! a file of its own, as a peer host's would be, with its own listener
//! (port 7500 + k) and a 64-block export; the initiator's one file
//! connects to each and imports its export.
//!
//! With 1, 2, 4, ... PEERS exporters (every connection's lanes open
//! first): the rate of 4 KiB WRITEs in batches of 32 spread round robin
//! over the imports, and the p50 of synchronous 4 KiB READs from each in
//! turn; the median of 5 rounds that each measure every size in turn (one
//! round of fewer samples with `quick`, on debug kernels), and
//! its ratio to one exporter, as `# ` lines (measured, never asserted),
//! with the waits for completions (poll and read) a batch took: each
//! connection's completions come on queues of their own, and each may
//! wake the waiter. The writes run twice, completing once placed (the
//! default: on iWARP a fence per connection) and once sent
//! (`RRDMA_OP_F_SENT`, as perftest's), each with read(2)'s gathering
//! (`read_gather`, `abi::gather`) and without, in turn, alternated
//! between rounds, and the ratios are printed too. The checks:
//! every call succeeds, every operation completes exactly once, a
//! SUBMIT's writes take at most one placement fence per connection
//! (iWARP; a fence per connection's run would be two or more), and
//! every write lands in the exporter it was meant for: exporter `k` gets
//! only the initiator's block `k`, filled with byte `k + 1`, so its
//! region (read through its own mapping) holds no other byte. Last, with
//! a fixed gathering window (`read_gather_us=1000`), reads must gather
//! records of the largest fan-out, 2 exporters or more (fdinfo
//! `rrdma-work-read-gathered` grows), each still delivered once; where
//! one READ takes more than half that window (debug kernels) the count
//! is printed, not asserted.

use std::net::SocketAddr;
use std::time::Instant;

use rrdma::abi::uapi::{OP_F_SENT, OP_WRITE};
use rrdma::{Access, Connection, Export, Listener, Region, RemoteRegion, Rrdma};

use crate::param::ModParam;
use crate::scale::{p, run_ops, T};
use crate::{ensure, Tap};

/// Blocks of each exporter's region.
const BLOCKS: u64 = 64;
/// The fixed gathering window of the last check, in µs: the largest the
/// module takes (`abi::poll::WINDOW_MAX_NS`).
const GATHER_WINDOW_US: u64 = 1000;
/// How much each measurement takes: batches of 32 WRITEs, synchronous
/// READs, and rounds over the sizes.
#[derive(Clone, Copy)]
struct Samples {
    batches: u64,
    reads: u64,
    rounds: usize,
}

/// The figures' samples.
const FULL: Samples = Samples {
    batches: 20,
    reads: 200,
    rounds: 5,
};
/// `quick` (debug kernels, where a 4 KiB READ takes 10 ms): the calls and
/// checks once, not figures (5 rounds of the full samples took 345 s of a
/// debug guest's 500).
const QUICK: Samples = Samples {
    batches: 4,
    reads: 20,
    rounds: 1,
};

/// One exporter's side: its listener, region and export.
struct Exporter<'a> {
    _listener: Listener<'a>,
    region: Region<'a>,
    export: Export<'a>,
}

fn exporter<'a>(file: &'a Rrdma, addr: SocketAddr) -> Result<Exporter<'a>, String> {
    let listener = file.listen(addr, 16).map_err(|e| format!("listen: {e}"))?;
    let region = file
        .create_region(4096, BLOCKS)
        .map_err(|e| format!("region: {e}"))?;
    let export = file
        .export(&region, Access::ReadWrite, None)
        .map_err(|e| format!("export: {e}"))?;
    Ok(Exporter {
        _listener: listener,
        region,
        export,
    })
}

/// One size's figures.
#[derive(Clone, Copy, Default)]
struct Figures {
    /// WRITEs per second.
    rate: f64,
    /// Waits for completions (poll and read) per batch of 32.
    waits: f64,
    /// Placement fences per batch of 32 (iWARP: a READ per connection).
    fences: f64,
    /// The guest's CPUs' busy share while the WRITEs ran (0 to 1).
    busy: f64,
    /// READ p50 (µs).
    read_us: f64,
}

/// The figures over the first `k` imports; then whether each of those
/// exporters holds only its own byte.
fn figures(
    dev: &Rrdma,
    local: &Region<'_>,
    imports: &[RemoteRegion<'_>],
    exporters: &[Exporter<'_>],
    sent: bool,
    n: Samples,
) -> Result<Figures, String> {
    let k = imports.len();
    let fences = || dev.fdinfo_value("rrdma-write-fences").unwrap_or(0);
    let (fences0, cpu0) = (fences(), cpu());
    let t = Instant::now();
    let (mut writes, mut waits, mut submits) = (0u64, 0u64, 0u64);
    for round in 0..n.batches {
        let ops: Vec<_> = (0..32u64)
            .map(|i| {
                let to = i as usize % k;
                let mut op = imports[to].op(OP_WRITE, local, to as u64, (i + round) % BLOCKS, 1, i);
                if sent {
                    op.flags = OP_F_SENT;
                }
                op
            })
            .collect();
        let ran = run_ops(dev, &ops)?;
        writes += ran.done;
        waits += ran.waits;
        submits += ran.submits;
    }
    let rate = writes as f64 / t.elapsed().as_secs_f64();
    let (fences1, cpu1) = (fences(), cpu());
    // iWARP: a SUBMIT's placed writes share one fence per connection (a
    // batch that found the queues full took more than one SUBMIT).
    ensure(
        fences1.saturating_sub(fences0) <= submits * k as u64,
        format!(
            "{} write fences for {submits} SUBMITs of {} batches of 32 writes over {k} connections: more than one per connection",
            fences1.saturating_sub(fences0),
            n.batches
        ),
    )?;
    let busy =
        cpu1.0.saturating_sub(cpu0.0) as f64 / (cpu1.1.saturating_sub(cpu0.1) as f64).max(1.0);
    let scratch = local.nblocks() - 1;
    // READs once per size and round: with the placed writes.
    let mut reads = Vec::with_capacity(n.reads as usize);
    for i in 0..if sent { 0 } else { n.reads } {
        let t = Instant::now();
        imports[i as usize % k]
            .read(local, scratch, i % BLOCKS, 1)
            .map_err(|e| format!("read: {e}"))?;
        reads.push(t.elapsed());
    }
    for (j, e) in exporters[..k].iter().enumerate() {
        let own = (j + 1) as u8;
        let bytes = e.region.as_slice();
        ensure(
            bytes.iter().all(|&b| b == 0 || b == own) && bytes.contains(&own),
            format!("exporter {j} of {k} holds bytes other than its own {own}, or none"),
        )?;
    }
    Ok(Figures {
        rate,
        waits: waits as f64 / n.batches as f64,
        fences: fences1.saturating_sub(fences0) as f64 / n.batches as f64,
        busy,
        read_us: if reads.is_empty() {
            0.0
        } else {
            p(&mut reads, 0.5)
        },
    })
}

/// The guest's CPU time so far, busy and all, in ticks (`/proc/stat`).
fn cpu() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    let all: u64 = ticks.iter().take(8).sum();
    (all.saturating_sub(idle), all)
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, me: &str, peers: usize, quick: bool) {
    let n = if quick { QUICK } else { FULL };
    let addr = |k: usize| -> SocketAddr { format!("{me}:{}", 7500 + k).parse().expect("address") };
    let files: Vec<Rrdma> = match (0..peers).map(|_| Rrdma::open()).collect() {
        Ok(f) => f,
        Err(e) => return t.check("fanout: open the exporters' files", Err(e.to_string())),
    };
    let res = (|| {
        let exporters = files
            .iter()
            .enumerate()
            .map(|(k, f)| exporter(f, addr(k)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut local = dev
            .create_region(4096, peers as u64 + 1)
            .map_err(|e| format!("region: {e}"))?;
        for (k, block) in local.as_mut_slice().chunks_mut(4096).enumerate() {
            block.fill((k + 1) as u8);
        }
        let conns: Vec<Connection<'_>> = (0..peers)
            .map(|k| dev.connect(addr(k), T))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("connect: {e}"))?;
        let imports: Vec<RemoteRegion<'_>> = conns
            .iter()
            .zip(&exporters)
            .map(|(c, e)| c.import(e.export.token(), T))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("import: {e}"))?;
        // Each connection's first operation opens its data lanes: all
        // open before anything is measured.
        for (k, r) in imports.iter().enumerate() {
            r.write(&local, k as u64, 0, 1)
                .map_err(|e| format!("first write: {e}"))?;
        }
        crate::scale::settle_lanes(dev);
        let mut sizes = vec![1];
        while sizes[sizes.len() - 1] < peers {
            sizes.push((sizes[sizes.len() - 1] * 2).min(peers));
        }
        // Rounds over every size in turn: writes completing once placed,
        // then once sent, each with read(2)'s gathering and without (in
        // alternating order); each median is reported. Run `v`: sent
        // `v / 2`, gathering `v % 2 == 0`.
        let gather = ModParam::set("read_gather", "Y")?;
        let mut runs: Vec<[Vec<Figures>; 4]> = vec![Default::default(); sizes.len()];
        for round in 0..n.rounds {
            for (i, &k) in sizes.iter().enumerate() {
                let g = round % 2;
                for v in [g, 1 - g, 2 + g, 3 - g] {
                    ModParam::write("read_gather", if v % 2 == 0 { "Y" } else { "N" })?;
                    let f = figures(dev, &local, &imports[..k], &exporters, v >= 2, n)?;
                    runs[i][v].push(f);
                }
            }
        }
        gather.restore()?;
        let median = |v: &[Figures], f: fn(&Figures) -> f64| {
            let mut x: Vec<f64> = v.iter().map(f).collect();
            x.sort_by(f64::total_cmp);
            x[x.len() / 2]
        };
        let (rate1, read1, sent1) = (
            median(&runs[0][0], |r| r.rate),
            median(&runs[0][0], |r| r.read_us),
            median(&runs[0][2], |r| r.rate),
        );
        for (k, [on, off, sent_on, sent_off]) in sizes.iter().zip(&runs) {
            let (rate, read) = (median(on, |r| r.rate), median(on, |r| r.read_us));
            let rate_off = median(off, |r| r.rate);
            println!(
                "# fanout {k} exporters: write {rate:.0} ops/s ({:.2}x of 1; {:.1} waits for completions per batch of 32), read p50 {read:.1} us ({:.2}x of 1); {:.1} fences per batch, CPUs {:.0}% busy; without gathering: write {rate_off:.0} ops/s, {:.1} waits, CPUs {:.0}% busy (gathering {:.2}x); medians of {} alternated rounds",
                rate / rate1,
                median(on, |r| r.waits),
                read / read1,
                median(on, |r| r.fences),
                100.0 * median(on, |r| r.busy),
                median(off, |r| r.waits),
                100.0 * median(off, |r| r.busy),
                rate / rate_off,
                n.rounds
            );
            let (rate, rate_off) = (median(sent_on, |r| r.rate), median(sent_off, |r| r.rate));
            println!(
                "# fanout {k} exporters, writes completing once sent: {rate:.0} ops/s ({:.2}x of 1; {:.1} waits per batch), CPUs {:.0}% busy; without gathering: {rate_off:.0} ops/s, {:.1} waits, CPUs {:.0}% busy (gathering {:.2}x)",
                rate / sent1,
                median(sent_on, |r| r.waits),
                100.0 * median(sent_on, |r| r.busy),
                median(sent_off, |r| r.waits),
                100.0 * median(sent_off, |r| r.busy),
                rate / rate_off
            );
        }
        // With a fixed window every read that finds records while more
        // are in flight waits for more: some must come from a later look.
        // The window, and the whole gathering, are bounded by 1 ms
        // (`abi::gather::GATHER_MAX_NS`): where one READ takes longer than
        // half of that (debug kernels, READ p50 12 ms on rxe under KASAN)
        // completions come further apart than any read waits, and whether
        // one is gathered is chance (0 and 62 in two runs of 2026-12-01):
        // only counted there, not asserted. Where it is, a read waits only
        // if it found fewer than half of what was pending: a run whose
        // completions all came before the reads looked gathers none (one
        // run on 7.3 siw, 2026-12-02, at 1.8 waits per batch; three others
        // gathered 212-256 at 3.3-3.9): up to three runs.
        let asserted = peers >= 2 && 2.0 * read1 <= GATHER_WINDOW_US as f64;
        let on = ModParam::set("read_gather", "Y")?;
        let fixed = ModParam::set("read_gather_us", &GATHER_WINDOW_US.to_string())?;
        let gathered = || dev.fdinfo_value("rrdma-work-read-gathered").unwrap_or(0);
        let mut tries = 0;
        let (f, records) = loop {
            tries += 1;
            let before = gathered();
            let f = figures(dev, &local, &imports, &exporters, false, n)?;
            let records = gathered().saturating_sub(before);
            if records > 0 || !asserted || tries == 3 {
                break (f, records);
            }
            println!(
                "# fanout: no record gathered in run {tries} ({:.1} waits per batch): again",
                f.waits
            );
        };
        fixed.restore()?;
        on.restore()?;
        println!(
            "# fanout {peers} exporters, read_gather_us={GATHER_WINDOW_US}: {records} records gathered, {:.1} waits per batch of 32{}",
            f.waits,
            if asserted {
                String::new()
            } else {
                format!(" (not asserted: one READ takes {read1:.0} us, more than half the window, or one exporter)")
            }
        );
        // One exporter's writes may all come in one trip (siw's batch).
        ensure(
            records > 0 || !asserted,
            format!(
                "read(2) gathered no record over {peers} exporters with read_gather_us={GATHER_WINDOW_US} (one READ p50 {read1:.0} us)"
            ),
        )
    })();
    t.check(
        &format!("fanout: WRITEs and READs spread over 1 to {peers} exporters succeed, each once and each write in its own exporter; read(2) gathers"),
        res,
    );
}
