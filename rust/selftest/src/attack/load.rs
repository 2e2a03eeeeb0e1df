// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The write loads of the run, through SUBMIT and io_uring, and what each
//! saw: every posted operation must complete exactly once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrdma::abi::uapi::{Completion, Op, OP_WRITE};
use rrdma::{stamp, RemoteRegion, Rrdma};

use crate::ensure;
use crate::remote::pattern;
use crate::uring::Ring;

/// What a load thread saw: operations posted, completions by user data.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) posted: u64,
    completed: u64,
    dup: u64,
    pub(super) errors: u64,
    first_error: Option<i32>,
    /// The SUBMIT refusal that ended the load, if one did.
    pub(crate) refused: Option<i32>,
    /// The user data of the operations that completed without error.
    pub(crate) ok: HashSet<u64>,
    /// The number (user data) of the load's first operation.
    pub(crate) first: u64,
}

impl Tally {
    /// One completion of `user_data` with `status` (0 or a negative errno).
    fn saw(&mut self, seen: &mut HashSet<u64>, user_data: u64, status: i32) {
        self.completed += 1;
        if !seen.insert(user_data) {
            self.dup += 1;
        }
        if status < 0 {
            self.errors += 1;
            self.first_error.get_or_insert(status);
        } else {
            self.ok.insert(user_data);
        }
    }
}

/// The io_uring load's next 16 one-block WRITEs, from `local` blocks
/// `0..64` to `rw` blocks `0..1024`, numbered from `next`.
fn write_batch(rw: &RemoteRegion<'_>, local: &rrdma::Region<'_>, next: u64) -> Vec<Op> {
    (0..16)
        .map(|i| {
            let n = next + i;
            rw.op(OP_WRITE, local, n % 64, n % 1024, 1, n)
        })
        .collect()
}

/// Local blocks of [`write_load`]: one per operation in flight (at most
/// 256 and a batch).
const LOAD_SLOTS: u64 = 512;

/// [`write_load`]'s local blocks. Each is stamped with its operation's
/// number (`rrdma::stamp`) just before that operation is posted, and only
/// once the block's previous operation completed: every write carries
/// bytes no other write carries, so a write that lands late always
/// changes the peer's memory.
struct Slots {
    free: Vec<u64>,
    /// The local block of each operation posted and not completed.
    busy: HashMap<u64, u64>,
}

impl Slots {
    fn new() -> Self {
        Self {
            free: (0..LOAD_SLOTS).rev().collect(),
            busy: HashMap::new(),
        }
    }

    /// The load's next (up to) 16 one-block WRITEs to `rw` blocks
    /// `0..1024`, numbered from `next`, their local blocks stamped.
    fn batch(
        &mut self,
        rw: &RemoteRegion<'_>,
        local: &mut rrdma::Region<'_>,
        next: u64,
    ) -> Vec<Op> {
        let bs = local.block_size() as usize;
        let mut ops = Vec::with_capacity(16);
        for n in next..next + 16 {
            let Some(slot) = self.free.pop() else { break };
            let at = slot as usize * bs;
            stamp::stamp(&mut local.as_mut_slice()[at..at + bs], n);
            self.busy.insert(n, slot);
            ops.push(rw.op(OP_WRITE, local, slot, n % 1024, 1, n));
        }
        ops
    }

    /// Operation `n` completed, or was not posted: its block is free.
    fn done(&mut self, n: u64) {
        if let Some(slot) = self.busy.remove(&n) {
            self.free.push(slot);
        }
    }
}

/// Each load's operations are numbered from a base of their own: a load
/// that rewrote a block with a former load's number would write the same
/// bytes, and a late write of it would go unseen.
static LOADS: AtomicU64 = AtomicU64::new(0);

/// Posts WRITE batches of 16 one-block operations, numbered from a base of
/// the load's own ([`LOADS`], in [`Tally::first`]) and stamped with their
/// numbers ([`Slots`]), to `rw` blocks `0..1024` until
/// `stop` (or the first refused SUBMIT), then reaps until every posted
/// operation completed or `drain` passed. `progress` follows the count
/// posted.
pub(crate) fn write_load(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    stop: &AtomicBool,
    progress: &AtomicU64,
    drain: Duration,
) -> Tally {
    let mut local = dev.create_region(4096, LOAD_SLOTS).expect("region");
    let mut slots = Slots::new();
    // The process, then the load: bits 40.. and 32..40.
    let first = u64::from(std::process::id()) << 40 | LOADS.fetch_add(1, Ordering::Relaxed) << 32;
    let mut t = Tally {
        first,
        ..Tally::default()
    };
    let mut seen = HashSet::new();
    let mut next = first;
    let mut buf = vec![Completion::zeroed(); 64];
    let mut take = |t: &mut Tally, slots: &mut Slots, seen: &mut HashSet<u64>, wait: u64| {
        let n = dev
            .completions(&mut buf, Some(Duration::from_millis(wait)))
            .unwrap_or(0);
        for c in &buf[..n] {
            t.saw(seen, c.user_data, c.status);
            slots.done(c.user_data);
        }
    };
    // Since the last SUBMIT that posted something: a full send queue
    // that never drains is a refusal.
    let mut moved = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if t.posted - t.completed < 256 {
            let ops = slots.batch(rw, &mut local, next);
            let res = dev.submit(&ops);
            let posted = *res.as_ref().unwrap_or(&0);
            for op in &ops[posted..] {
                slots.done(op.user_data);
            }
            match res {
                Ok(n) => {
                    t.posted += n as u64;
                    next += n as u64;
                    progress.store(t.posted, Ordering::Relaxed);
                    moved = Instant::now();
                }
                // Full send queue with operations in flight: flow control.
                Err(e) if rrdma::errno(&e) == Some(libc::EAGAIN) && t.posted > t.completed => {}
                // Full with another load's (before the lanes are up, the
                // connection's own small queue pair takes them all).
                Err(e)
                    if rrdma::errno(&e) == Some(libc::EAGAIN)
                        && moved.elapsed() < Duration::from_secs(10) =>
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => {
                    t.refused = Some(rrdma::errno(&e).unwrap_or(-1));
                    break;
                }
            }
        }
        take(&mut t, &mut slots, &mut seen, 0);
    }
    let start = Instant::now();
    while t.completed < t.posted && start.elapsed() < drain {
        take(&mut t, &mut slots, &mut seen, 200);
    }
    t
}

/// `write_load` through io_uring commands on a ring of kind `ring`:
/// batches of 16 one-block writes (at most 128 in flight)
/// until `stop` or a failed `io_uring_enter`; `posted` counts the SQEs the
/// kernel took, each of which must end in exactly one CQE.
pub(super) fn uring_load(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    stop: &AtomicBool,
    drain: Duration,
    ring: Ring,
) -> Tally {
    let mut t = Tally::default();
    let mut eng = match ring.engine(dev, 256) {
        Ok(e) => e,
        Err(e) => {
            t.refused = Some(e.raw_os_error().unwrap_or(-1));
            return t;
        }
    };
    let mut local = dev.create_region(4096, 64).expect("region");
    pattern(local.as_mut_slice(), 98);
    let mut seen = HashSet::new();
    let mut next = 0u64;
    let mut cs = Vec::new();
    let mut take = |t: &mut Tally, cs: &mut Vec<rrdma::UringCompletion>| {
        for c in cs.drain(..) {
            t.saw(&mut seen, c.user_data, c.res.min(0));
        }
    };
    while !stop.load(Ordering::Relaxed) {
        if t.posted - t.completed < 128 {
            let ops = write_batch(rw, &local, next);
            next += eng.push(&ops) as u64;
        }
        match eng.submit(1, Duration::from_millis(10)) {
            Ok(k) => t.posted += k as u64,
            Err(e) => {
                t.refused = Some(e.raw_os_error().unwrap_or(-1));
                break;
            }
        }
        eng.reap(&mut cs);
        take(&mut t, &mut cs);
    }
    let start = Instant::now();
    while t.completed < t.posted && start.elapsed() < drain {
        match eng.submit(1, Duration::from_millis(200)) {
            Ok(k) => t.posted += k as u64,
            Err(_) => break,
        }
        eng.reap(&mut cs);
        take(&mut t, &mut cs);
    }
    t
}

pub(crate) fn exactly_once(t: &Tally) -> Result<(), String> {
    println!(
        "# load: posted {}, completed {}, failed {} (first {:?}), SUBMIT refused {:?}",
        t.posted, t.completed, t.errors, t.first_error, t.refused
    );
    ensure(
        t.posted > 0 && t.completed == t.posted && t.dup == 0,
        format!(
            "posted {}, completed {}, duplicates {}, errors {} (first {:?})",
            t.posted, t.completed, t.dup, t.errors, t.first_error
        ),
    )
}
