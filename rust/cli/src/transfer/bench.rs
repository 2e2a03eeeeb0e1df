// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma bench`: its options, its run over one or several queues, and its
//! result in perftest's terms.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use rrdma::Rrdma;

use super::control::{control_addr, exporter_work, settled_work};
use super::runner::{file_counts, file_counts_since, run_queue, run_shared, Gates, QueueRun};
use super::{open, Target};
use crate::stats::{latency, Latency};

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
    /// Writes complete once sent (`RRDMA_OP_F_SENT`); each queue ends its
    /// run with a fence, which the time includes.
    pub sent: bool,
    /// With `sent`, a fence after every this many writes of a queue too
    /// (0: only the one at the end).
    pub fence_every: u64,
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
    /// Whether the writes completed once sent (`--sent`).
    pub sent: bool,
    /// Fences the run asked for (`RRDMA_OP_FENCE`, with `--sent`): writes
    /// per fence is `iterations / fences`.
    pub fences: u64,
    /// Completion callbacks of the initiator's module during the run
    /// (fdinfo `rrdma-work-completions`): a poll of a send CQ hands its
    /// operations' completions over in one, so operations per callback
    /// is the completion batch.
    pub completion_callbacks: u64,
    /// Completions that synchronous operations' busy polls handled (fdinfo
    /// `rrdma-work-sync-polled`, theirs and others' on the same queue
    /// pair): with `--latency` on the ioctl path, the operations that ended
    /// without a wake-up.
    pub sync_polled: u64,
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
        total.counts.add(r.counts);
        total.depth = r.depth;
        total.fences += r.fences;
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
        write_fences: total.counts.write_fences,
        sent: a.sent && a.write,
        fences: total.fences,
        completion_callbacks: total.counts.completion_callbacks,
        sync_polled: total.counts.sync_polled,
        exporter_work,
    })
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
    if r.fences > 0 {
        println!(
            " writes completed once sent, and fences: {} ({:.1} writes per fence)",
            r.fences,
            r.iterations as f64 / r.fences as f64
        );
    }
    if r.completion_callbacks > 0 {
        println!(
            " completion callbacks during the run: {} ({:.1} operations per callback)",
            r.completion_callbacks,
            r.iterations as f64 / r.completion_callbacks as f64
        );
    }
    if r.sync_polled > 0 {
        println!(
            " completions handled by synchronous polls: {} of {}",
            r.sync_polled, r.iterations
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
