// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma read`, `write`, `verify` and `bench`: an importer's commands.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, IsTerminal, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{EAGAIN, ECONNRESET};
use rrdma::abi::uapi::{Completion, Op, OP_READ, OP_WRITE};
use rrdma::{ConnectOptions, Connection, Keepalive, Region, RemoteRegion, Rrdma, UringEngine};

use crate::serve;
use crate::stats::{checksum, fill_pattern, latency, Latency};

/// Largest local staging region of read/write/verify, in bytes.
const STAGE_BYTES: u64 = 8 << 20;

/// Where to find the export.
pub struct Target {
    pub peer: SocketAddr,
    pub token: String,
    pub timeout: Duration,
    pub keepalive: Keepalive,
    /// Reconnect, and retry what a reconnect interrupted.
    pub reconnect: bool,
}

/// How long an operation is retried while its connection reconnects.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(120);

/// Runs `op`; with `--reconnect`, runs it again while it fails because
/// the connection is reconnecting (`ECONNRESET` for an operation the
/// failure interrupted, `EAGAIN` until the connection and its import are
/// back). Block reads and writes can be repeated: the same blocks get the
/// same bytes.
fn retrying<T>(t: &Target, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let start = Instant::now();
    let mut told = false;
    loop {
        match op() {
            Err(e)
                if t.reconnect
                    && e.raw_os_error()
                        .is_some_and(|n| n == ECONNRESET.get() || n == EAGAIN.get())
                    && start.elapsed() < RECONNECT_PATIENCE =>
            {
                if !told {
                    eprintln!("rrdma: connection interrupted ({e}); waiting for the reconnect");
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// With `--reconnect`, tells how often the connection came back.
fn report_reconnects(dev: &Rrdma, t: &Target) {
    if !t.reconnect {
        return;
    }
    let n = dev.fdinfo_value("rrdma-reconnects").unwrap_or(0);
    let attempts = dev.fdinfo_value("rrdma-reconnect-attempts").unwrap_or(0);
    if n > 0 || attempts > 0 {
        eprintln!("rrdma: reconnected {n} times ({attempts} attempts)");
    }
}

/// A `@HOST:PORT[/ro|/rw]` token argument: the `serve --control` endpoint
/// and the access asked for (`rw` when not given).
fn control_spec(spec: &str) -> Option<(&str, &str)> {
    let rest = spec.strip_prefix('@')?;
    Some(rest.split_once('/').unwrap_or((rest, "rw")))
}

/// Resolves a token argument: hex (`0x...`), or `@HOST:PORT[/ro|/rw]` to
/// ask a `serve --control` endpoint.
pub fn resolve_token(spec: &str) -> io::Result<u64> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("bad token '{spec}'"));
    if let Some((addr, want)) = control_spec(spec) {
        let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
        let line = serve::control(addr, "tokens")?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let tok = words
            .chunks(2)
            .find(|w| w.len() == 2 && w[0] == want)
            .map(|w| w[1])
            .ok_or_else(bad)?;
        return resolve_token(tok);
    }
    let hex = spec.strip_prefix("0x").unwrap_or(spec);
    u64::from_str_radix(hex, 16).map_err(|_| bad())
}

/// The `serve --control` endpoint named by a `@HOST:PORT[/ro|/rw]` token.
fn control_addr(spec: &str) -> Option<SocketAddr> {
    control_spec(spec)?.0.parse().ok()
}

/// The exporter's work counts (its fdinfo's `rrdma-work-*`, see the
/// module's `work.rs`), asked of its control endpoint.
fn exporter_work(addr: SocketAddr) -> io::Result<BTreeMap<String, u64>> {
    let line = serve::control(addr, "fdinfo")?;
    Ok(line
        .split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.strip_prefix("rrdma-work-")?.to_string(), v.parse().ok()?))
        })
        .collect())
}

/// The exporter's work counts once they stand still for 100 ms (at most
/// 2 s of asking).
fn settled_work(addr: SocketAddr) -> io::Result<BTreeMap<String, u64>> {
    let mut last = exporter_work(addr)?;
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = exporter_work(addr)?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(last)
}

/// Connects and imports.
pub fn open<'a>(dev: &'a Rrdma, t: &Target) -> io::Result<(Connection<'a>, RemoteRegion<'a>)> {
    let ctx = |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let token = resolve_token(&t.token)?;
    let conn = dev
        .connect_opts(
            t.peer,
            t.timeout,
            ConnectOptions {
                keepalive: t.keepalive,
                reconnect: t.reconnect,
            },
        )
        .map_err(ctx(format!("connect to {}", t.peer)))?;
    let remote = conn
        .import(token, t.timeout)
        .map_err(ctx(format!("import {token:#x}")))?;
    Ok((conn, remote))
}

/// A progress bar on stderr, drawn at most ten times a second.
pub struct Progress {
    total: u64,
    done: u64,
    start: Instant,
    last: Instant,
    on: bool,
}

impl Progress {
    /// A bar for `total` bytes; drawn if `force` or stderr is a terminal.
    pub fn new(total: u64, force: bool) -> Self {
        let now = Instant::now();
        Self {
            total,
            done: 0,
            start: now,
            last: now,
            on: force || io::stderr().is_terminal(),
        }
    }

    /// Adds `n` bytes.
    pub fn add(&mut self, n: u64) {
        self.done += n;
        if self.on && (self.last.elapsed() >= Duration::from_millis(100) || self.done >= self.total)
        {
            self.last = Instant::now();
            let frac = if self.total == 0 {
                1.0
            } else {
                self.done as f64 / self.total as f64
            };
            let width = 30;
            let fill = (frac * width as f64) as usize;
            let secs = self.start.elapsed().as_secs_f64().max(1e-9);
            eprint!(
                "\r[{}{}] {:5.1}% {:>10} bytes {:8.2} MB/s",
                "#".repeat(fill.min(width)),
                " ".repeat(width - fill.min(width)),
                frac * 100.0,
                self.done,
                self.done as f64 / secs / 1e6
            );
            if self.done >= self.total {
                eprintln!();
            }
        }
    }
}

fn stage_blocks(bs: u32, count: u64) -> u64 {
    (STAGE_BYTES / u64::from(bs)).clamp(1, count.max(1))
}

/// `read`: remote blocks to `out`.
pub fn read(
    dev: &Rrdma,
    t: &Target,
    first: u64,
    count: Option<u64>,
    out: &mut dyn Write,
    progress: bool,
) -> io::Result<u64> {
    let (_conn, remote) = open(dev, t)?;
    let count = count.unwrap_or(remote.nblocks().saturating_sub(first));
    let bs = remote.block_size();
    let stage = stage_blocks(bs, count);
    let local = dev.create_region(bs, stage)?;
    let mut bar = Progress::new(count * u64::from(bs), progress);
    let mut done = 0;
    while done < count {
        let n = (count - done).min(stage);
        retrying(t, || remote.read(&local, 0, first + done, n as u32))?;
        let bytes = (n * u64::from(bs)) as usize;
        out.write_all(&local.as_slice()[..bytes])?;
        bar.add(bytes as u64);
        done += n;
    }
    out.flush()?;
    report_reconnects(dev, t);
    Ok(count)
}

/// `write`: `input` to remote blocks from `first`; the last block is padded
/// with zeros. Returns blocks written.
pub fn write(
    dev: &Rrdma,
    t: &Target,
    first: u64,
    input: &mut dyn Read,
    progress: bool,
) -> io::Result<u64> {
    let (_conn, remote) = open(dev, t)?;
    let bs = remote.block_size();
    let stage = stage_blocks(bs, remote.nblocks());
    let mut local = dev.create_region(bs, stage)?;
    let mut bar = Progress::new(0, progress);
    let mut block = first;
    loop {
        let buf = local.as_mut_slice();
        let cap = buf.len();
        let mut filled = 0;
        while filled < cap {
            match input.read(&mut buf[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            break;
        }
        let n = (filled as u64).div_ceil(u64::from(bs));
        buf[filled..(n * u64::from(bs)) as usize].fill(0);
        if block + n > remote.nblocks() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "input is larger than the remote region",
            ));
        }
        retrying(t, || remote.write(&local, 0, block, n as u32))?;
        bar.total += filled as u64;
        bar.add(filled as u64);
        block += n;
        if filled < cap {
            break;
        }
    }
    report_reconnects(dev, t);
    Ok(block - first)
}

/// What `verify` found.
#[derive(serde::Serialize)]
pub struct Verified {
    pub blocks: u64,
    pub block_size: u32,
    pub bytes: u64,
    pub written_checksum: String,
    pub read_checksum: String,
    pub ok: bool,
}

/// `verify`: writes a pattern to `count` blocks from `first`, reads them
/// back into other pages and compares.
pub fn verify(
    dev: &Rrdma,
    t: &Target,
    first: u64,
    count: Option<u64>,
    seed: u64,
    progress: bool,
) -> io::Result<Verified> {
    let (_conn, remote) = open(dev, t)?;
    let count = count
        .unwrap_or(remote.nblocks().saturating_sub(first))
        .min(remote.nblocks().saturating_sub(first));
    let bs = remote.block_size();
    let stage = stage_blocks(bs, count);
    let mut out = dev.create_region(bs, stage)?;
    let back = dev.create_region(bs, stage)?;
    let mut bar = Progress::new(2 * count * u64::from(bs), progress);
    let (mut w_sum, mut r_sum, mut same) = (Vec::new(), Vec::new(), true);
    let mut done = 0;
    while done < count {
        let n = (count - done).min(stage);
        let bytes = (n * u64::from(bs)) as usize;
        fill_pattern(&mut out.as_mut_slice()[..bytes], seed ^ (first + done));
        retrying(t, || remote.write(&out, 0, first + done, n as u32))?;
        bar.add(bytes as u64);
        retrying(t, || remote.read(&back, 0, first + done, n as u32))?;
        bar.add(bytes as u64);
        let (a, b) = (&out.as_slice()[..bytes], &back.as_slice()[..bytes]);
        w_sum.extend_from_slice(&checksum(a).to_le_bytes());
        r_sum.extend_from_slice(&checksum(b).to_le_bytes());
        same &= a == b;
        done += n;
    }
    let (w, r) = (checksum(&w_sum), checksum(&r_sum));
    Ok(Verified {
        blocks: count,
        block_size: bs,
        bytes: count * u64::from(bs),
        written_checksum: format!("{w:#018x}"),
        read_checksum: format!("{r:#018x}"),
        ok: same && w == r,
    })
}

/// Options of `bench`.
pub struct BenchArgs {
    pub write: bool,
    pub size: u64,
    pub depth: u32,
    pub duration: Duration,
    pub iters: Option<u64>,
    pub latency: bool,
    pub engine: Engine,
    /// Queue pairs (connections), each driven by its own thread.
    pub queues: u32,
    /// Threads sharing one connection (its data lanes: a queue pair per
    /// CPU), each with its own io_uring ring and local region.
    pub threads: u32,
}

/// How `bench` hands operations to the kernel.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// `SUBMIT` ioctls, completions by read(2).
    Ioctl,
    /// io_uring commands on a ring of 128-byte SQEs.
    Uring,
    /// io_uring commands on a ring set up with `IORING_SETUP_IOPOLL`:
    /// waiting for completions polls for them.
    #[serde(rename = "uring-iopoll")]
    UringIopoll,
    /// io_uring commands on a ring set up with `IORING_SETUP_SQPOLL`: the
    /// kernel's SQ thread issues them.
    #[serde(rename = "uring-sqpoll")]
    UringSqpoll,
}

/// One `bench` result, in perftest's terms.
#[derive(serde::Serialize)]
pub struct BenchResult {
    pub op: &'static str,
    pub engine: Engine,
    pub bytes: u64,
    pub iterations: u64,
    pub depth: u32,
    /// Queue pairs (connections) the operations went through.
    pub queues: u32,
    /// Threads that shared one connection (1: one per queue).
    pub threads: u32,
    pub seconds: f64,
    pub bw_peak_mbps: f64,
    pub bw_avg_mbps: f64,
    pub msg_rate_mpps: f64,
    pub latency_usec: Option<Latency>,
    /// iWARP write fences (one-byte READs that make the writes before
    /// them placed) posted during the run: how many writes share one.
    pub write_fences: u64,
    /// Completion callbacks of the initiator's module during the run
    /// (fdinfo `rrdma-work-completions`): a poll of a send CQ hands its
    /// operations' completions over in one, so operations per callback
    /// is the completion batch.
    pub completion_callbacks: u64,
    /// How much the exporter's module counts grew during the timed run
    /// (by key, without `rrdma-work-`), when the token named its control
    /// endpoint. One-sided operations cost it nothing: expected all 0 but
    /// keepalive's control messages (a pong per interval of the exporter's
    /// keepalive).
    pub exporter_work: Option<BTreeMap<String, u64>>,
}

/// `bench`: operations of `size` bytes, `depth` in flight, for a duration
/// or a number of iterations, timed with CLOCK_MONOTONIC (`Instant`).
/// With `latency`, one operation at a time, each timed (`RW_SYNC`, or one
/// io_uring command with an io_uring engine). With
/// `queues` above 1, that many threads run at once, each with its own
/// file of `device`, connection and local region (one queue pair each,
/// as perftest's `-q`); the figures are their sum over the wall time.
pub fn bench(device: &Path, dev: &Rrdma, t: &Target, a: &BenchArgs) -> io::Result<BenchResult> {
    if a.queues > 1 && a.latency {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--latency runs one queue",
        ));
    }
    if a.threads > 1 && (a.queues > 1 || a.engine == Engine::Ioctl) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--threads share one connection and file: one queue, an io_uring engine",
        ));
    }
    // Threads that share one connection share its import too.
    let shared = if a.threads > 1 {
        Some(open(dev, t)?)
    } else {
        None
    };
    let shared = shared.as_ref().map(|(_, remote)| remote);
    // Read outside the timed run: each is a round trip to the exporter.
    // The import's registrations complete on the exporter a little after
    // its answer: start once its counts stood still for 100 ms (2 s at
    // most), once every queue is imported; read them again once every
    // queue has finished, before any connection closes.
    let control = control_addr(&t.token);
    let queues = a.queues.max(1) as usize;
    let runners = if shared.is_some() {
        a.threads as usize
    } else {
        queues
    };
    let gates = Gates::new(runners + 1);
    let (work, wall, shared_counts, runs) = std::thread::scope(|s| {
        let gates = &gates;
        let threads: Vec<_> = (1..runners)
            .map(|_| {
                s.spawn(move || match shared {
                    Some(remote) => run_shared(dev, remote, a, gates),
                    None => match Rrdma::open_path(device) {
                        Ok(dev) => run_queue(&dev, t, a, gates),
                        Err(e) => gates.pass(Err(e)),
                    },
                })
            })
            .collect();
        let first = s.spawn(move || match shared {
            Some(remote) => run_shared(dev, remote, a, gates),
            None => run_queue(dev, t, a, gates),
        });
        gates.ready.wait();
        let before = control.map(settled_work).transpose();
        let counts0 = shared.map(|_| file_counts(dev));
        let start = Instant::now();
        gates.go.wait();
        gates.done.wait();
        let wall = start.elapsed().as_secs_f64().max(1e-9);
        let shared_counts = counts0.map(|c0| file_counts_since(dev, c0));
        let work = match (control, before) {
            (Some(addr), Ok(Some(before))) => exporter_work(addr).map(|after| {
                Some(
                    after
                        .into_iter()
                        .map(|(k, v)| {
                            let d = v.saturating_sub(before.get(&k).copied().unwrap_or(0));
                            (k, d)
                        })
                        .collect::<BTreeMap<String, u64>>(),
                )
            }),
            (_, Err(e)) => Err(e),
            _ => Ok(None),
        };
        gates.release.wait();
        let mut runs = vec![first.join()];
        runs.extend(threads.into_iter().map(|h| h.join()));
        (work, wall, shared_counts, runs)
    });
    let mut total = QueueRun::default();
    for r in runs {
        let r = r.map_err(|_| io::Error::other("a bench thread panicked"))??;
        total.completed += r.completed;
        total.peak_mbps += r.peak_mbps;
        total.samples.extend(r.samples);
        total.secs = total.secs.max(r.secs);
        total.counts.0 += r.counts.0;
        total.counts.1 += r.counts.1;
        total.depth = r.depth;
    }
    if let Some(c) = shared_counts {
        // The threads share one file: each saw all of its counts.
        total.counts = c;
    }
    let exporter_work = work?;
    // One queue: its own clock, which starts after the go; several: the
    // wall time of them all.
    let secs = if runners == 1 { total.secs } else { wall };
    let completed = total.completed;
    let avg = completed as f64 * a.size as f64 / secs.max(1e-9) / 1e6;
    Ok(BenchResult {
        op: if a.write { "write" } else { "read" },
        engine: a.engine,
        bytes: a.size,
        iterations: completed,
        depth: total.depth as u32,
        queues: queues as u32,
        threads: a.threads.max(1),
        seconds: secs,
        bw_peak_mbps: total.peak_mbps.max(avg),
        bw_avg_mbps: avg,
        msg_rate_mpps: completed as f64 / secs.max(1e-9) / 1e6,
        latency_usec: latency(&mut total.samples),
        write_fences: total.counts.0,
        completion_callbacks: total.counts.1,
        exporter_work,
    })
}

/// What one queue of `bench` did.
#[derive(Default)]
struct QueueRun {
    completed: u64,
    secs: f64,
    /// Highest bandwidth over a 100 ms window, MB/s (with several queues,
    /// the sum of theirs: an upper bound).
    peak_mbps: f64,
    samples: Vec<f64>,
    depth: u64,
    /// Its file's write fences and completion callbacks during the run
    /// ([`file_counts`]).
    counts: (u64, u64),
}

/// A file's iWARP write fences and completion callbacks so far (fdinfo).
fn file_counts(dev: &Rrdma) -> (u64, u64) {
    (
        dev.fdinfo_value("rrdma-write-fences").unwrap_or(0),
        dev.fdinfo_value("rrdma-work-completions").unwrap_or(0),
    )
}

/// How much a file's [`file_counts`] grew since `then`.
fn file_counts_since(dev: &Rrdma, then: (u64, u64)) -> (u64, u64) {
    let now = file_counts(dev);
    (now.0.saturating_sub(then.0), now.1.saturating_sub(then.1))
}

/// Where the threads of `bench` wait for each other: every queue set up
/// (`ready`), the clock started (`go`), every queue finished (`done`), the
/// exporter's counts read (`release`: only then do the connections close).
struct Gates {
    ready: Barrier,
    go: Barrier,
    done: Barrier,
    release: Barrier,
}

impl Gates {
    fn new(n: usize) -> Self {
        Self {
            ready: Barrier::new(n),
            go: Barrier::new(n),
            done: Barrier::new(n),
            release: Barrier::new(n),
        }
    }

    /// Passes every gate (a queue that could not run), returning `r`.
    fn pass<T>(&self, r: T) -> T {
        self.ready.wait();
        self.go.wait();
        self.done.wait();
        self.release.wait();
        r
    }
}

/// One queue of `bench` on `dev`: connects, imports and sets up, runs
/// between the gates, and closes its connection once released. Passes
/// every gate whatever happens, so that the others never wait forever.
fn run_queue(dev: &Rrdma, t: &Target, a: &BenchArgs, gates: &Gates) -> io::Result<QueueRun> {
    let set_up = open(dev, t).and_then(|(conn, remote)| {
        let (local, depth) = local_for(dev, &remote, a)?;
        Ok((conn, remote, local, depth))
    });
    match set_up {
        Ok((_conn, remote, local, depth)) => {
            gated(gates, || run_set_up(dev, a, &remote, &local, depth))
        }
        Err(e) => gates.pass(Err(e)),
    }
}

/// One thread of `bench --threads` on the shared connection's `remote`:
/// its own local region and io_uring ring, run between the gates.
fn run_shared(
    dev: &Rrdma,
    remote: &RemoteRegion<'_>,
    a: &BenchArgs,
    gates: &Gates,
) -> io::Result<QueueRun> {
    match local_for(dev, remote, a) {
        Ok((local, depth)) => gated(gates, || run_set_up(dev, a, remote, &local, depth)),
        Err(e) => gates.pass(Err(e)),
    }
}

/// Runs `run` between the gates, set up already.
fn gated<T>(gates: &Gates, run: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    gates.ready.wait();
    gates.go.wait();
    let r = run();
    gates.done.wait();
    gates.release.wait();
    r
}

/// The timed run of one queue of `bench`, from `local` (`depth` slots) to
/// or from `remote`.
fn run_set_up(
    dev: &Rrdma,
    a: &BenchArgs,
    remote: &RemoteRegion<'_>,
    local: &Region<'_>,
    depth: u64,
) -> io::Result<QueueRun> {
    let bs = u64::from(remote.block_size());
    let count = a.size / bs;
    let slots = remote.nblocks() / count;
    let opcode = if a.write { OP_WRITE } else { OP_READ };
    let mk = |i: u64| -> Op {
        remote.op(
            opcode,
            local,
            (i % depth) * count,
            (i % slots) * count,
            count as u32,
            i % depth,
        )
    };
    let done_when = |n: u64, start: Instant| match a.iters {
        Some(it) => n >= it,
        None => start.elapsed() >= a.duration,
    };
    let mut samples = Vec::new();
    let counts0 = file_counts(dev);
    let start = Instant::now();
    let mut completed: u64 = 0;
    let mut peak: f64 = 0.0;
    let mut window = (Instant::now(), 0u64);
    if a.latency && a.engine == Engine::Ioctl {
        while !done_when(completed, start) {
            let t0 = Instant::now();
            dev.rw_sync(&mk(completed))?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
            completed += 1;
        }
    } else if a.latency {
        // One io_uring command at a time, submitted and waited for in one
        // io_uring_enter (an IOPOLL ring polls for it).
        let mut queue = Queue::new(dev, a.engine, 1)?;
        let mut done = Vec::with_capacity(1);
        while !done_when(completed, start) {
            let t0 = Instant::now();
            if queue.post(dev, &[mk(completed)], 0)? != 1 {
                return Err(io::Error::other("io_uring submission queue full"));
            }
            done.clear();
            queue.reap(dev, &mut done)?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
            if let Some(&(_, status)) = done.iter().find(|d| d.1 < 0) {
                return Err(io::Error::from_raw_os_error(-status));
            }
            completed += 1;
        }
    } else {
        // Operations the queues had no room for wait in `pending` and go
        // again after the next completions: a full send queue (EAGAIN with
        // operations in flight) is flow control, not an error.
        let mut next = depth.min(a.iters.unwrap_or(u64::MAX));
        let mut pending: VecDeque<Op> = (0..next).map(&mk).collect();
        let mut in_flight: u64 = 0;
        let mut queue = Queue::new(dev, a.engine, depth)?;
        let mut done = Vec::with_capacity(depth as usize);
        loop {
            if !pending.is_empty() {
                let n = queue.post(dev, pending.make_contiguous(), in_flight)?;
                pending.drain(..n);
                in_flight += n as u64;
            }
            if in_flight == 0 {
                break;
            }
            done.clear();
            queue.reap(dev, &mut done)?;
            for &(user_data, status) in &done {
                if status < 0 {
                    return Err(io::Error::from_raw_os_error(-status));
                }
                completed += 1;
                in_flight -= 1;
                if !done_when(completed, start) && next < a.iters.unwrap_or(u64::MAX) {
                    // Reuse the completed slot (user_data).
                    let mut op = mk(next);
                    op.local_block = user_data * count;
                    op.user_data = user_data;
                    pending.push_back(op);
                    next += 1;
                }
            }
            if done_when(completed, start) {
                // The run is over: what has not gone yet never goes.
                pending.clear();
            }
            let el = window.0.elapsed().as_secs_f64();
            if el >= 0.1 {
                peak = peak.max((completed - window.1) as f64 * a.size as f64 / el / 1e6);
                window = (Instant::now(), completed);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    Ok(QueueRun {
        completed,
        secs,
        peak_mbps: peak,
        samples,
        depth,
        counts: file_counts_since(dev, counts0),
    })
}

/// A queue's local region for operations of `a.size` on `remote`, and its
/// depth.
fn local_for<'a>(
    dev: &'a Rrdma,
    remote: &RemoteRegion<'_>,
    a: &BenchArgs,
) -> io::Result<(Region<'a>, u64)> {
    let bs = u64::from(remote.block_size());
    if a.size == 0 || !a.size.is_multiple_of(bs) || a.size / bs > remote.nblocks() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "size {} is not a multiple of the block size {bs} within the region",
                a.size
            ),
        ));
    }
    let count = a.size / bs;
    let slots = remote.nblocks() / count;
    let depth = if a.latency {
        1
    } else {
        u64::from(a.depth.max(1)).min(slots.max(1)).min(1024)
    };
    let local = dev.create_region(bs as u32, depth * count)?;
    Ok((local, depth))
}

/// How long the SQ thread of `--engine uring-sqpoll` stays awake without
/// SQEs (it spins meanwhile): long enough for the gaps of one run.
const SQPOLL_IDLE: Duration = Duration::from_millis(100);

/// Where `bench` posts operations and reaps their completions.
enum Queue {
    /// `SUBMIT`, and completions by read(2).
    Ioctl(Vec<Completion>),
    /// io_uring commands.
    Uring(Box<UringEngine>),
}

impl Queue {
    fn new(dev: &Rrdma, engine: Engine, depth: u64) -> io::Result<Self> {
        Ok(match engine {
            Engine::Ioctl => Queue::Ioctl(vec![Completion::zeroed(); depth as usize]),
            Engine::Uring => Queue::Uring(Box::new(UringEngine::new(
                dev,
                depth.next_power_of_two() as u32,
            )?)),
            Engine::UringIopoll => Queue::Uring(Box::new(UringEngine::with_iopoll(
                dev,
                depth.next_power_of_two() as u32,
            )?)),
            Engine::UringSqpoll => Queue::Uring(Box::new(UringEngine::with_sqpoll(
                dev,
                depth.next_power_of_two() as u32,
                SQPOLL_IDLE,
            )?)),
        })
    }

    /// Posts what it can of `ops`, front first; returns how many.
    fn post(&mut self, dev: &Rrdma, ops: &[Op], in_flight: u64) -> io::Result<usize> {
        match self {
            Queue::Ioctl(_) => match dev.submit(ops) {
                Err(e) if in_flight > 0 && rrdma::errno(&e) == Some(EAGAIN.get()) => Ok(0),
                r => r,
            },
            // Queued in the submission ring; `reap` submits them.
            Queue::Uring(eng) => Ok(eng.push(ops)),
        }
    }

    /// Waits (10 s at most) for completions and appends them to `out`
    /// as (user_data, 0 or -errno).
    fn reap(&mut self, dev: &Rrdma, out: &mut Vec<(u64, i32)>) -> io::Result<()> {
        let timeout = Duration::from_secs(10);
        match self {
            Queue::Ioctl(comps) => {
                let n = dev.completions(comps, Some(timeout))?;
                out.extend(comps[..n].iter().map(|c| (c.user_data, c.status)));
            }
            Queue::Uring(eng) => {
                eng.submit(1, timeout)?;
                let mut cs = Vec::new();
                eng.reap(&mut cs);
                out.extend(cs.iter().map(|c| (c.user_data, c.res.min(0))));
            }
        }
        if out.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no completion within 10 s",
            ));
        }
        Ok(())
    }
}

/// Prints a result with perftest's column names.
pub fn print_bench(r: &BenchResult) {
    if let Some(l) = &r.latency_usec {
        println!(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
        );
        println!(
            " {:<6} {:<10} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
            r.bytes, l.iterations, l.t_min, l.t_max, l.p50, l.t_avg, l.t_stdev, l.p99, l.p99_9
        );
    } else {
        println!(
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
        );
        println!(
            " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
            r.bytes, r.iterations, r.bw_peak_mbps, r.bw_avg_mbps, r.msg_rate_mpps
        );
    }
    if r.write_fences > 0 {
        println!(
            " write fences during the run: {} ({:.1} operations per fence)",
            r.write_fences,
            r.iterations as f64 / r.write_fences as f64
        );
    }
    if r.completion_callbacks > 0 {
        println!(
            " completion callbacks during the run: {} ({:.1} operations per callback)",
            r.completion_callbacks,
            r.iterations as f64 / r.completion_callbacks as f64
        );
    }
    if let Some(w) = &r.exporter_work {
        let parts: Vec<String> = w.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(
            " exporter's module work during the run: {}",
            parts.join(", ")
        );
    }
}
