// SPDX-License-Identifier: GPL-2.0

//! `rrdma-selftest scale SELF MAX CONNS`: how the cost of the calls that
//! reach a file's tables grows with what the file holds (issue 47), in one
//! guest, over a connection to its own address (both sides in one file:
//! an import of its own export goes through the exporter's tables):
//! - regions held: 1 up to MAX (4 KiB each);
//! - exports held: 1 up to the file's cap (`max_file_exports`, 4096 by
//!   default), then the cap's ENOSPC;
//! - imports held: 1 up to MAX / 10;
//! - connections: up to CONNS pairs (each connect accepted by the same
//!   file), with the connect time and the kernel memory per pair.
//!
//! At each size: the p50 of a synchronous 4 KiB READ, the rate of 4 KiB
//! WRITEs in batches of 32, the p50 of EXPORT and IMPORT, and the p50 of
//! REGION_DESTROY of a region never exported. Every call
//! must succeed (the checks); the figures and their ratio to size 1 are
//! `# ` lines and one JSON line (`# scale-json {...}`), measured, never
//! asserted. Last, with the file closed, STATUS shows nothing of it left.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrdma::abi::status::{Status, STATUS_CONNS, STATUS_EXPORTS, STATUS_IMPORTS};
use rrdma::abi::uapi::OP_WRITE;
use rrdma::{Access, Connection, Region, RemoteRegion, Rrdma};

use crate::{ensure, Tap};

mod pairs;

pub(crate) const T: Duration = Duration::from_secs(10);
const ENOSPC: i32 = 28;

pub(crate) fn p(samples: &mut [Duration], q: f64) -> f64 {
    samples.sort();
    let i = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[i].as_secs_f64() * 1e6
}

/// One size's figures: READ p50 (µs), WRITE rate (ops/s), EXPORT and
/// IMPORT p50 (µs).
#[derive(Clone, Copy, Debug)]
struct Figures {
    read_us: f64,
    write_ops: f64,
    export_us: f64,
    import_us: f64,
    /// IMPORT's p10 and p90 (µs): its spread.
    import_spread: (f64, f64),
    /// REGION_DESTROY p50 (µs) of a region that was never exported,
    /// with the file's exports all of another region.
    destroy_us: f64,
}

/// What every measurement uses: the loopback connection, an import of a
/// 64-block export, a local region.
struct Rig<'a> {
    dev: &'a Rrdma,
    /// A tenth of the samples (`quick`, debug kernels): their run checks
    /// that every call succeeds and nothing leaks, not the figures.
    quick: bool,
    conn: Connection<'a>,
    remote: RemoteRegion<'a>,
    local: Region<'a>,
    target: Region<'a>,
}

impl Rig<'_> {
    fn figures(&self) -> Result<Figures, String> {
        let n = |full: u64| crate::quick::fewer(self.quick, full, 10);
        let mut reads = Vec::with_capacity(200);
        for i in 0..n(200) {
            let t = Instant::now();
            self.remote
                .read(&self.local, 0, i % 64, 1)
                .map_err(|e| format!("read: {e}"))?;
            reads.push(t.elapsed());
        }
        let t = Instant::now();
        let mut writes = 0u64;
        for round in 0..n(20) {
            let ops: Vec<_> = (0..32u64)
                .map(|i| {
                    self.remote
                        .op(OP_WRITE, &self.local, i, (i + round) % 64, 1, i)
                })
                .collect();
            writes += self.run(&ops)?;
        }
        let write_ops = writes as f64 / t.elapsed().as_secs_f64();
        let mut exports = Vec::with_capacity(20);
        let mut imports = Vec::with_capacity(20);
        for _ in 0..n(20) {
            let t = Instant::now();
            let e = self
                .dev
                .export(&self.target, Access::ReadWrite, None)
                .map_err(|e| format!("export: {e}"))?;
            exports.push(t.elapsed());
            let t = Instant::now();
            let i = self
                .conn
                .import(e.token(), T)
                .map_err(|e| format!("import: {e}"))?;
            imports.push(t.elapsed());
            drop(i);
            e.revoke().map_err(|e| format!("unexport: {e}"))?;
        }
        let mut destroys = Vec::with_capacity(20);
        for _ in 0..n(20) {
            let r = self
                .dev
                .create_region(4096, 1)
                .map_err(|e| format!("create a region: {e}"))?;
            let t = Instant::now();
            r.destroy()
                .map_err(|(_, e)| format!("destroy a region: {e}"))?;
            destroys.push(t.elapsed());
        }
        Ok(Figures {
            read_us: p(&mut reads, 0.5),
            write_ops,
            export_us: p(&mut exports, 0.5),
            import_us: p(&mut imports, 0.5),
            import_spread: (p(&mut imports, 0.1), p(&mut imports, 0.9)),
            destroy_us: p(&mut destroys, 0.5),
        })
    }

    /// Submits `ops` and waits for their completions: how many ended well.
    fn run(&self, ops: &[rrdma::abi::uapi::Op]) -> Result<u64, String> {
        run_ops(self.dev, ops).map(|r| r.done)
    }
}

/// What [`run_ops`] took.
pub(crate) struct Ran {
    /// Operations that ended well (each exactly once).
    pub(crate) done: u64,
    /// Waits for completions (each a poll(2) and a read(2)).
    pub(crate) waits: u64,
    /// `SUBMIT` calls that posted something (more than one when the queues
    /// were full).
    pub(crate) submits: u64,
}

/// Submits `ops` (operation `i` with `user_data` `i`) on `dev` and waits
/// for their completions, submitting what is left before each wait.
pub(crate) fn run_ops(dev: &Rrdma, ops: &[rrdma::abi::uapi::Op]) -> Result<Ran, String> {
    let (mut posted, mut done, mut waits, mut submits) = (0, 0, 0, 0);
    let mut seen = vec![false; ops.len()];
    while done < ops.len() {
        if posted < ops.len() {
            let n = dev
                .submit(&ops[posted..])
                .map_err(|e| format!("submit: {e}"))?;
            submits += u64::from(n > 0);
            posted += n;
        }
        let mut c = [rrdma::abi::uapi::Completion::zeroed(); 32];
        waits += 1;
        let n = dev
            .completions(&mut c, Some(T))
            .map_err(|e| format!("completions: {e}"))?;
        ensure(n > 0, "no completion in 10 s")?;
        for x in &c[..n] {
            ensure(x.status == 0, format!("completion status {}", x.status))?;
            let i = x.user_data as usize;
            ensure(i < ops.len(), format!("a stray completion {i}"))?;
            ensure(!seen[i], format!("operation {i} completed twice"))?;
            seen[i] = true;
        }
        done += n;
    }
    Ok(Ran {
        done: done as u64,
        waits,
        submits,
    })
}

fn line(what: &str, n: usize, f: &Figures) -> String {
    format!(
        "{what} {n}: read p50 {:.1} us, write {:.0} ops/s, export p50 {:.1} us, import p50 {:.1} us (p10 {:.0}, p90 {:.0}), destroy p50 {:.1} us",
        f.read_us,
        f.write_ops,
        f.export_us,
        f.import_us,
        f.import_spread.0,
        f.import_spread.1,
        f.destroy_us
    )
}

fn ratios(what: &str, first: &Figures, last: &Figures, n: usize) -> String {
    format!(
        "{what} {n} vs 1: read {:.2}x, write rate {:.2}x, export {:.2}x, import {:.2}x, destroy {:.2}x",
        last.read_us / first.read_us,
        last.write_ops / first.write_ops,
        last.export_us / first.export_us,
        last.import_us / first.import_us,
        last.destroy_us / first.destroy_us
    )
}

/// The exports a file may hold: the module parameter `max_file_exports`
/// (0: the most, 2^20).
fn export_cap() -> usize {
    let v = std::fs::read_to_string("/sys/module/rrdma/parameters/max_file_exports")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(4096);
    if v == 0 || v > 1 << 20 {
        1 << 20
    } else {
        v.max(3)
    }
}

/// A region READ into is in the connection's registration cache: its
/// destroy drops them at once. On one CPU (one path), after a READ that
/// allocated the path's sinks' registrations if it had none.
fn destroy_forgets(rig: &Rig<'_>) -> Result<(), String> {
    let read = |r: &Region<'_>| {
        rig.remote
            .read(r, 0, 0, 1)
            .map_err(|e| format!("read: {e}"))
    };
    read(&rig.local)?;
    let before = crate::measure::rrdma_mrs()?;
    let r = rig
        .dev
        .create_region(4096, 64)
        .map_err(|e| format!("region: {e}"))?;
    read(&r)?;
    let used = crate::measure::rrdma_mrs()?;
    ensure(used > before, format!("{before} MRs, {used} after a READ"))?;
    r.destroy().map_err(|(_, e)| format!("destroy: {e}"))?;
    let after = crate::measure::rrdma_mrs()?;
    ensure(
        after == before,
        format!("{before} MRs, {used} after a READ into a new region, {after} after its destroy"),
    )
}

fn sizes(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [1, 10, 100, 1000, 10000, 100000]
        .into_iter()
        .filter(|&n| n < max)
        .collect();
    v.push(max);
    v
}

/// Grows a table with `add` to each size, measuring at each.
fn grow(
    t: &mut Tap,
    json: &mut String,
    rig: &Rig<'_>,
    what: &str,
    max: usize,
    mut add: impl FnMut() -> Result<(), String>,
) {
    let mut held = 0;
    let mut first = None;
    let res = (|| {
        for n in sizes(max) {
            while held < n {
                add()?;
                held += 1;
            }
            let f = rig.figures()?;
            println!("# {}", line(what, n, &f));
            let _ = write!(
                json,
                "\"{what}_{n}\": [{:.1}, {:.0}, {:.1}, {:.1}, {:.1}], ",
                f.read_us, f.write_ops, f.export_us, f.import_us, f.destroy_us
            );
            let f1 = *first.get_or_insert(f);
            if n == max {
                println!("# {}", ratios(what, &f1, &f, n));
            }
        }
        Ok(())
    })();
    t.check(
        &format!("scale: {what} to {max}, every call succeeded"),
        res,
    );
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, me: &str, max: usize, conns: usize, quick: bool) {
    let me: SocketAddr = format!("{me}:7490").parse().expect("address");
    let setup = (|| {
        let listener = dev.listen(me, 256).map_err(|e| format!("listen: {e}"))?;
        let conn = dev.connect(me, T).map_err(|e| format!("connect: {e}"))?;
        let accepted = listener
            .accept(Some(T))
            .map_err(|e| format!("accept: {e}"))?
            .ok_or("accept: none")?;
        let region = dev
            .create_region(4096, 64)
            .map_err(|e| format!("region: {e}"))?;
        let export = dev
            .export(&region, Access::ReadWrite, None)
            .map_err(|e| format!("export: {e}"))?;
        let remote = conn
            .import(export.token(), T)
            .map_err(|e| format!("import: {e}"))?;
        let local = dev
            .create_region(4096, 64)
            .map_err(|e| format!("region: {e}"))?;
        let target = dev
            .create_region(4096, 1)
            .map_err(|e| format!("region: {e}"))?;
        Ok::<_, String>((
            listener,
            accepted,
            region,
            export,
            Rig {
                dev,
                quick,
                conn,
                remote,
                local,
                target,
            },
        ))
    })();
    let (listener, accepted, _region, export, rig) = match setup {
        Ok(s) => s,
        Err(e) => {
            t.check("scale: a connection to this host's own address", Err(e));
            return;
        }
    };
    let mut json = String::new();

    let mut regions = Vec::new();
    grow(t, &mut json, &rig, "regions", max, || {
        regions.push(
            dev.create_region(4096, 1)
                .map_err(|e| format!("region: {e}"))?,
        );
        Ok(())
    });
    drop(regions);

    // The file's cap (module parameter max_file_exports); the rig's own
    // export is one of them, and each size's figures export one more for
    // a moment.
    let cap = export_cap();
    let mut exports = Vec::new();
    grow(t, &mut json, &rig, "exports", cap - 2, || {
        exports.push(
            dev.export(&rig.target, Access::ReadOnly, None)
                .map_err(|e| format!("export: {e}"))?,
        );
        Ok(())
    });
    let full = (|| {
        exports.push(
            dev.export(&rig.target, Access::ReadOnly, None)
                .map_err(|e| e.to_string())?,
        );
        let over = dev.export(&rig.target, Access::ReadOnly, None);
        ensure(
            over.as_ref().err().and_then(rrdma::errno) == Some(ENOSPC),
            format!("export {}: {:?}", cap + 1, over.map(|e| e.token())),
        )
    })();
    t.check("scale: exports stop at the file's cap with ENOSPC", full);
    drop(exports);
    let all = crate::affinity::cpus();
    let res = crate::affinity::pin(all[0]).and_then(|()| destroy_forgets(&rig));
    t.check(
        "scale: REGION_DESTROY of a region READ into drops its registrations at once",
        res.and(crate::affinity::pin_to(&all)),
    );

    let mut imports = Vec::new();
    grow(t, &mut json, &rig, "imports", (max / 10).max(10), || {
        imports.push(
            rig.conn
                .import(export.token(), T)
                .map_err(|e| format!("import: {e}"))?,
        );
        Ok(())
    });
    drop(imports);

    // Connections: pairs, each connect accepted here (`pairs.rs`).
    let res = match conns {
        0 => Ok(()),
        _ => pairs::pairs(dev, me, &listener, &rig, export.token(), conns, &mut json),
    };
    t.check(
        &format!(
            "scale: {conns} connection pairs, every connect succeeded, their control buffers grown at their first import only"
        ),
        res,
    );
    println!("# scale-json {{{}\"max\": {max}}}", json);
    drop((rig, accepted, listener, export));
}

/// Waits until the file's count of data lanes up stood still for 300 ms
/// (10 s at most): the lanes the first operations asked for are up.
pub(crate) fn settle_lanes(dev: &Rrdma) {
    let start = Instant::now();
    let mut last = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
    let mut still = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        let now = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
        if now != last {
            last = now;
            still = Instant::now();
        } else if still.elapsed() >= Duration::from_millis(300) {
            return;
        }
    }
}

/// After the scale file closed: STATUS (the caller is root: it sees every
/// file's) shows no connection, export or import, that is, the file's
/// release ran to its end. Leaks of what it held are kmemleak's to find
/// (the debug kernel's run).
pub(crate) fn nothing_left(probe: &Rrdma) -> Result<(), String> {
    for (kind, what) in [
        (STATUS_CONNS, "connections"),
        (STATUS_EXPORTS, "exports"),
        (STATUS_IMPORTS, "imports"),
    ] {
        let mut left = u32::MAX;
        for _ in 0..50 {
            left = probe
                .status_raw(&Status {
                    kind,
                    ..Status::zeroed()
                })
                .map_err(|e| e.to_string())?
                .count;
            if left == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        ensure(left == 0, format!("{left} {what} left after the close"))?;
    }
    Ok(())
}
