// SPDX-License-Identifier: GPL-2.0 OR MIT

//! One queue of `rrdma bench`: its set-up, its timed run between the gates
//! every queue waits at, and what it counts.

use std::collections::VecDeque;
use std::io;
use std::sync::Barrier;
use std::time::Instant;

use rrdma::abi::uapi::{Op, OP_READ, OP_WRITE};
use rrdma::{Region, RemoteRegion, Rrdma};

use super::bench::{BenchArgs, Engine};
use super::queue::Queue;
use super::{open, Target};

/// What one queue of `bench` did.
#[derive(Default)]
pub(super) struct QueueRun {
    pub(super) completed: u64,
    pub(super) secs: f64,
    /// Highest bandwidth over a 100 ms window, MB/s (with several queues,
    /// the sum of theirs: an upper bound).
    pub(super) peak_mbps: f64,
    pub(super) samples: Vec<f64>,
    pub(super) depth: u64,
    /// Its file's work counts during the run ([`file_counts`]).
    pub(super) counts: FileCounts,
    /// Fences it asked for (`--sent`).
    pub(super) fences: u64,
}

/// The user_data of a fence `bench` asks for (a slot's is below `depth`).
const FENCE: u64 = u64::MAX;

/// What a file's module did during a run (fdinfo counts, or their growth).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct FileCounts {
    /// iWARP write fences posted.
    pub(super) write_fences: u64,
    /// Completion callbacks (one per poll of a send CQ that found some).
    pub(super) completion_callbacks: u64,
    /// Completions that a synchronous operation's busy poll handled.
    pub(super) sync_polled: u64,
}

impl FileCounts {
    /// Each count grown by `o`'s.
    pub(super) fn add(&mut self, o: FileCounts) {
        self.write_fences += o.write_fences;
        self.completion_callbacks += o.completion_callbacks;
        self.sync_polled += o.sync_polled;
    }
}

/// A file's [`FileCounts`] so far (fdinfo).
pub(super) fn file_counts(dev: &Rrdma) -> FileCounts {
    // One read of /proc for the three keys; a key that is absent counts 0.
    let info = dev.fdinfo().unwrap_or_default();
    let v = |key: &str| info.iter().find(|(k, _)| k == key).map_or(0, |(_, n)| *n);
    FileCounts {
        write_fences: v("rrdma-write-fences"),
        completion_callbacks: v("rrdma-work-completions"),
        sync_polled: v("rrdma-work-sync-polled"),
    }
}

/// How much a file's [`file_counts`] grew since `then`.
pub(super) fn file_counts_since(dev: &Rrdma, then: FileCounts) -> FileCounts {
    let now = file_counts(dev);
    FileCounts {
        write_fences: now.write_fences.saturating_sub(then.write_fences),
        completion_callbacks: now
            .completion_callbacks
            .saturating_sub(then.completion_callbacks),
        sync_polled: now.sync_polled.saturating_sub(then.sync_polled),
    }
}

/// Where the threads of `bench` wait for each other: every queue set up
/// (`ready`), the clock started (`go`), every queue finished (`done`), the
/// exporter's counts read (`release`: only then do the connections close).
pub(super) struct Gates {
    pub(super) ready: Barrier,
    pub(super) go: Barrier,
    pub(super) done: Barrier,
    pub(super) release: Barrier,
}

impl Gates {
    pub(super) fn new(n: usize) -> Self {
        Self {
            ready: Barrier::new(n),
            go: Barrier::new(n),
            done: Barrier::new(n),
            release: Barrier::new(n),
        }
    }

    /// Passes every gate (a queue that could not run), returning `r`.
    pub(super) fn pass<T>(&self, r: T) -> T {
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
pub(super) fn run_queue(
    dev: &Rrdma,
    t: &Target,
    a: &BenchArgs,
    gates: &Gates,
) -> io::Result<QueueRun> {
    let set_up = open(dev, t).and_then(|(conn, remote)| {
        let (local, depth) = local_for(dev, &remote, a)?;
        warm_up(dev, &remote, &local)?;
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
pub(super) fn run_shared(
    dev: &Rrdma,
    remote: &RemoteRegion<'_>,
    a: &BenchArgs,
    gates: &Gates,
) -> io::Result<QueueRun> {
    match local_for(dev, remote, a).and_then(|(local, depth)| {
        warm_up(dev, remote, &local)?;
        Ok((local, depth))
    }) {
        Ok((local, depth)) => gated(gates, || run_set_up(dev, a, remote, &local, depth)),
        Err(e) => gates.pass(Err(e)),
    }
}

/// Data lanes a file's connection of this host offers: one per queue pair
/// of the module parameter `queue_pairs` (0: one per online CPU, as the
/// kernel counts them) beside its own small one, none with 1
/// (`wire::qps_wanted`), at most 16 queue pairs in all.
fn lanes_offered() -> u64 {
    let param = std::fs::read_to_string("/sys/module/rrdma/parameters/queue_pairs")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let qps = if param == 0 { online_cpus() } else { param };
    u64::from(rrdma::abi::wire::qps_wanted(qps.clamp(1, 16) as u16, true)) - 1
}

/// CPUs online (`/sys/devices/system/cpu/online`: ranges such as
/// `0-3,5`), which the kernel's `num_online_cpus()` counts whatever this
/// task's affinity; 1 if it cannot be read.
fn online_cpus() -> u64 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let n: u64 = text
        .trim()
        .split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((a, b)) => Some(b.parse::<u64>().ok()? + 1 - a.parse::<u64>().ok()?),
            None => r.parse::<u64>().ok().map(|_| 1),
        })
        .sum();
    n.max(1)
}

/// One READ of block 0 before the timed run. A connection opens its data
/// lanes with its first operation: the run then measures them, and the
/// exporter's work of setting them up comes before the run. Waits until
/// the lanes this side offers are up in `dev`'s file (a peer that grants
/// fewer: 2 s at most).
fn warm_up(dev: &Rrdma, remote: &RemoteRegion<'_>, local: &Region<'_>) -> io::Result<()> {
    dev.rw_sync(&remote.op(OP_READ, local, 0, 0, 1, 0))?;
    let want = lanes_offered();
    let start = Instant::now();
    while dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0) < want
        && start.elapsed() < std::time::Duration::from_secs(2)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
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
    let sent = a.write && a.sent;
    let mk = |i: u64| -> Op {
        let (lb, rb, ud) = ((i % depth) * count, (i % slots) * count, i % depth);
        if sent {
            remote.write_sent_op(local, lb, rb, count as u32, ud)
        } else {
            remote.op(opcode, local, lb, rb, count as u32, ud)
        }
    };
    let mut fences = 0u64;
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
        // Writes queued since the last fence, and whether the run ended.
        let mut unfenced = pending.len() as u64;
        let mut ended = false;
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
                in_flight -= 1;
                if user_data == FENCE {
                    fences += 1;
                    continue;
                }
                completed += 1;
                if !done_when(completed, start) && next < a.iters.unwrap_or(u64::MAX) {
                    // Reuse the completed slot (user_data).
                    let mut op = mk(next);
                    op.local_block = user_data * count;
                    op.user_data = user_data;
                    pending.push_back(op);
                    next += 1;
                    unfenced += 1;
                    if sent && a.fence_every > 0 && unfenced >= a.fence_every {
                        pending.push_back(remote.fence_op(FENCE));
                        unfenced = 0;
                    }
                }
            }
            if done_when(completed, start) && !ended {
                // The run is over: what has not gone yet never goes, but
                // sent writes end with a fence, which the time includes.
                pending.clear();
                ended = true;
                if sent {
                    pending.push_back(remote.fence_op(FENCE));
                }
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
        fences,
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
