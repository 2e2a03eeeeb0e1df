// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `faults-load STATE PEER CONNS THREADS BLOCKS INTERVAL_MS`: the fault
//! suite's workload, a process of its own so that a fault can kill it.
//!
//! `CONNS` connections to `rrdma serve` on `PEER`, each with
//! `RRDMA_CONNECT_RECONNECT` and a keepalive of `INTERVAL_MS` x 4, each
//! carrying `THREADS` threads. A thread owns `BLOCKS` blocks of the
//! exporter's region and loops: write the next of its blocks (a new
//! generation, or the unacknowledged one again after a failure), then read
//! another back and judge it against the journal (`block.rs`). Everything
//! is counted in the shared record (`state.rs`) as it happens.
//!
//! A failure with `EAGAIN` (reconnecting) or `ECONNRESET` (in flight at a
//! failure) is retried on the same connection; any other ends it, and the
//! thread that sees it first connects and imports afresh (with the
//! exporter's current token) for all. Runs until the record's `stop`.

use std::io;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::RwLock;
use std::thread::sleep;
use std::time::Duration;

use rrdma::abi::errno::{EAGAIN, ECONNRESET};
use rrdma::{ConnectOptions, Connection, Keepalive, Region, RemoteRegion, Rrdma};

use super::block::{fill, judge, next_gen, Verdict, BLOCK};
use super::state::{now_ns, State, Thread, ERRNOS};
use crate::keepalive::MISSES;
use crate::remote::{addr, token, T};

/// What the workload runs.
pub(crate) struct Load {
    pub peer: String,
    pub conns: usize,
    pub threads: usize,
    pub blocks: u64,
    pub interval: Duration,
}

/// A connection and the import the threads use.
struct Link<'a> {
    rw: RemoteRegion<'a>,
    conn: Connection<'a>,
    token: u64,
}

/// One connection's slot: its link, and how often it was replaced.
struct Slot<'a> {
    link: RwLock<Option<Link<'a>>>,
    epoch: AtomicU64,
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

pub(crate) fn run(path: &Path, l: &Load) -> io::Result<()> {
    let st = State::open(path, false)?;
    let dev = Rrdma::open()?;
    let slots: Vec<Slot<'_>> = (0..l.conns)
        .map(|_| Slot {
            link: RwLock::new(None),
            epoch: AtomicU64::new(0),
        })
        .collect();
    std::thread::scope(|s| {
        for (c, slot) in slots.iter().enumerate() {
            for t in 0..l.threads {
                let (dev, st) = (&dev, &st);
                s.spawn(move || worker(dev, st, slot, c * l.threads + t, l));
            }
        }
    });
    for slot in slots {
        if let Ok(Some(link)) = slot.link.into_inner() {
            drop(link.rw);
            let _ = link.conn.disconnect();
        }
    }
    Ok(())
}

fn build<'a>(dev: &'a Rrdma, l: &Load) -> io::Result<Link<'a>> {
    let token = token(&l.peer, "rw")?;
    let opts = ConnectOptions {
        keepalive: Keepalive::Every {
            interval: l.interval,
            misses: MISSES,
        },
        reconnect: true,
    };
    let conn = dev.connect_opts(addr(&l.peer, 7471), T, opts)?;
    let rw = conn.import(token, T)?;
    Ok(Link { rw, conn, token })
}

fn failed(st: &State, th: &Thread, e: i32) {
    let i = usize::try_from(e).unwrap_or(0).min(ERRNOS - 1);
    st.errnos[i].fetch_add(1, SeqCst);
    th.errors.fetch_add(1, SeqCst);
}

fn worker<'a>(dev: &'a Rrdma, st: &State, slot: &Slot<'a>, idx: usize, l: &Load) {
    let th = &st.threads[idx];
    let first = idx as u64 * l.blocks;
    let mut local = match dev.create_region(BLOCK as u32, 2) {
        Ok(r) => r,
        Err(e) => return failed(st, th, errno(&e)),
    };
    let mut next = 0u64;
    while st.stop.load(SeqCst) == 0 {
        let seen = slot.epoch.load(SeqCst);
        if let Some(link) = slot.link.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let before = th.token.swap(link.token, SeqCst);
            if before != 0 && before != link.token {
                // A new exporter: its region starts afresh, and what the
                // old one held went with it.
                for b in &st.blocks[first as usize..(first + l.blocks) as usize] {
                    b.acked.store(0, SeqCst);
                    b.pending.store(0, SeqCst);
                }
            }
            match step(st, th, link, &mut local, first, l.blocks, &mut next) {
                Ok(()) => continue,
                Err(e) => {
                    failed(st, th, e);
                    if e == EAGAIN.get() || e == ECONNRESET.get() {
                        sleep(Duration::from_millis(5));
                        continue;
                    }
                }
            }
        }
        // No link, or it ended: replace it, unless another thread just did.
        let mut g = slot.link.write().unwrap_or_else(|e| e.into_inner());
        if slot.epoch.load(SeqCst) != seen || st.stop.load(SeqCst) != 0 {
            continue;
        }
        if let Some(old) = g.take() {
            drop(old.rw);
            let _ = old.conn.disconnect();
        }
        match build(dev, l) {
            Ok(link) => {
                *g = Some(link);
                st.connects.fetch_add(1, SeqCst);
            }
            Err(e) => {
                st.setup_failures.fetch_add(1, SeqCst);
                st.setup_errno.store(errno(&e) as u64, SeqCst);
                drop(g);
                sleep(Duration::from_millis(100));
            }
        }
        slot.epoch.fetch_add(1, SeqCst);
    }
}

/// Writes the next block, then reads another back and judges it.
fn step(
    st: &State,
    th: &Thread,
    link: &Link<'_>,
    local: &mut Region<'_>,
    first: u64,
    n: u64,
    next: &mut u64,
) -> Result<(), i32> {
    let k = first + *next;
    let b = &st.blocks[k as usize];
    let gen = next_gen(b.acked.load(SeqCst), b.pending.load(SeqCst));
    fill(&mut local.as_mut_slice()[..BLOCK], k, gen);
    b.pending.store(gen, SeqCst);
    link.rw.write(local, 0, k, 1).map_err(|e| errno(&e))?;
    b.acked.store(gen, SeqCst);
    th.ok.fetch_add(1, SeqCst);
    th.last_ok_ns.store(now_ns(), SeqCst);
    let j = first + (*next + n / 2) % n;
    *next = (*next + 1) % n;
    link.rw.read(local, 1, j, 1).map_err(|e| errno(&e))?;
    let jb = &st.blocks[j as usize];
    let (acked, pending) = (jb.acked.load(SeqCst), jb.pending.load(SeqCst));
    let v = judge(&local.as_slice()[BLOCK..2 * BLOCK], j, acked, pending);
    if matches!(v, Verdict::Lost | Verdict::Damaged) {
        th.mismatches.fetch_add(1, SeqCst);
        eprintln!("# load: block {j} read {v:?} (acked {acked}, pending {pending})");
    }
    th.ok.fetch_add(1, SeqCst);
    th.last_ok_ns.store(now_ns(), SeqCst);
    Ok(())
}
