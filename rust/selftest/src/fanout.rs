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
//! turn; the median of 5 rounds that each measure every size in turn, and
//! its ratio to one exporter, as `# ` lines (measured, never asserted),
//! with the waits for completions (poll and read) a batch took: each
//! connection's completions come on queues of their own, and each may
//! wake the waiter. The checks: every call succeeds,
//! and every write lands in the exporter it was meant for: exporter `k`
//! gets only the initiator's block `k`, filled with byte `k + 1`, so its
//! region (read through its own mapping) holds no other byte.

use std::net::SocketAddr;
use std::time::Instant;

use rrdma::abi::uapi::OP_WRITE;
use rrdma::{Access, Connection, Export, Listener, Region, RemoteRegion, Rrdma};

use crate::scale::{p, run_ops, T};
use crate::{ensure, Tap};

/// Blocks of each exporter's region.
const BLOCKS: u64 = 64;
/// Rounds over the sizes.
const ROUNDS: usize = 5;

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
#[derive(Clone, Copy)]
struct Figures {
    /// WRITEs per second.
    rate: f64,
    /// Waits for completions (poll and read) per batch of 32.
    waits: f64,
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
) -> Result<Figures, String> {
    let k = imports.len();
    let t = Instant::now();
    let mut writes = 0u64;
    let mut waits = 0u64;
    for round in 0..20u64 {
        let ops: Vec<_> = (0..32u64)
            .map(|i| {
                let to = i as usize % k;
                imports[to].op(OP_WRITE, local, to as u64, (i + round) % BLOCKS, 1, i)
            })
            .collect();
        let (done, w) = run_ops(dev, &ops)?;
        writes += done;
        waits += w;
    }
    let rate = writes as f64 / t.elapsed().as_secs_f64();
    let scratch = local.nblocks() - 1;
    let mut reads = Vec::with_capacity(200);
    for i in 0..200u64 {
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
        waits: waits as f64 / 20.0,
        read_us: p(&mut reads, 0.5),
    })
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, me: &str, peers: usize) {
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
        // Rounds over every size in turn; each size's median is reported.
        let mut runs: Vec<Vec<Figures>> = vec![Vec::new(); sizes.len()];
        for _ in 0..ROUNDS {
            for (i, &k) in sizes.iter().enumerate() {
                runs[i].push(figures(dev, &local, &imports[..k], &exporters)?);
            }
        }
        let median = |v: &[Figures], f: fn(&Figures) -> f64| {
            let mut x: Vec<f64> = v.iter().map(f).collect();
            x.sort_by(f64::total_cmp);
            x[x.len() / 2]
        };
        let (rate1, read1) = (
            median(&runs[0], |r| r.rate),
            median(&runs[0], |r| r.read_us),
        );
        for (k, r) in sizes.iter().zip(&runs) {
            let (rate, read) = (median(r, |r| r.rate), median(r, |r| r.read_us));
            println!(
                "# fanout {k} exporters: write {rate:.0} ops/s ({:.2}x of 1; {:.1} waits for completions per batch of 32), read p50 {read:.1} us ({:.2}x of 1); medians of {ROUNDS} alternated rounds",
                rate / rate1,
                median(r, |r| r.waits),
                read / read1
            );
        }
        Ok(())
    })();
    t.check(
        &format!("fanout: WRITEs and READs spread over 1 to {peers} exporters succeed, each write in its own exporter"),
        res,
    );
}
