// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `attack PEER_IP SELF_IP PROVIDER [quick]`: the faults of an outside attack run,
//! against a peer running
//! `rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 24576 --access rw --access ro`
//! and `rrdma-selftest agent 7469 DEV PROVIDER` (which removes and re-adds
//! the peer's RDMA device on request).
//!
//! Every posted operation must complete exactly once, whatever the exporter
//! does (UNEXPORT, device removal); a refused call does nothing; a copy
//! stalled on a userfaultfd page holds up nothing else; handles, exports
//! restricted to a connection and protection domains reach only what they
//! should; a peer cut off is noticed by keepalive on both sides, and a
//! connection that asked for it reconnects.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrdma::abi::errno::{E2BIG, ECONNREFUSED, EFAULT, ENOENT};
use rrdma::abi::uapi::{Completion, Submit, ACCESS_READ, IOCTL_SUBMIT, OP_READ, OP_WRITE};
use rrdma::abi::uapi::{Export as ExportArg, Op};
use rrdma::{stamp, Connection, RemoteRegion, Rrdma};

use crate::remote::{addr, control, expect_errno_any, fnv, pattern, quiet, reap, token, T};
use crate::uring::Ring;
use crate::{ensure, expect_errno, expect_ok, Tap};

const BS: u64 = 4096;

/// A fresh export of the peer's region (`rw` or `ro`), imported over `conn`.
pub(crate) fn fresh_import<'a>(
    peer: &str,
    conn: &Connection<'a>,
    which: &str,
) -> Result<(u64, RemoteRegion<'a>), String> {
    let line = control(peer, &format!("export {which}")).map_err(|e| e.to_string())?;
    let tok = u64::from_str_radix(line.trim_start_matches("0x"), 16)
        .map_err(|_| format!("export {which}: '{line}'"))?;
    let r = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    Ok((tok, r))
}

/// What a load thread saw: operations posted, completions by user data.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) posted: u64,
    completed: u64,
    dup: u64,
    errors: u64,
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
                }
                // Full send queue with operations in flight: flow control.
                Err(e) if rrdma::errno(&e) == Some(libc::EAGAIN) && t.posted > t.completed => {}
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
fn uring_load(
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

/// Item 1b: the exporter's RDMA device goes away while this side writes.
fn exporter_device_removal(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let conn = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => return t.check("exporter device removal: connect", Err(e.to_string())),
    };
    let (_, rw) = match fresh_import(peer, &conn, "rw") {
        Ok(x) => x,
        Err(e) => return t.check("exporter device removal: import", Err(e)),
    };
    let stop = AtomicBool::new(false);
    let progress = AtomicU64::new(0);
    let (tally, rings, agent) = std::thread::scope(|s| {
        let h = s.spawn(|| write_load(dev, &rw, &stop, &progress, Duration::from_secs(30)));
        let rings: Vec<_> = [Ring::Plain, Ring::Iopoll, Ring::Sqpoll]
            .into_iter()
            .map(|ring| {
                let (rw, stop) = (&rw, &stop);
                (
                    ring,
                    s.spawn(move || uring_load(dev, rw, stop, Duration::from_secs(30), ring)),
                )
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        let agent = agent_cmd(peer, "linkdel");
        // The load goes on until SUBMIT is refused (or 10 s pass).
        let start = Instant::now();
        while !h.is_finished() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        let rings: Vec<_> = rings
            .into_iter()
            .map(|(ring, u)| (ring, u.join().unwrap_or_default()))
            .collect();
        (h.join().unwrap_or_default(), rings, agent)
    });
    t.check(
        "the peer removes its RDMA device under this side's write load",
        agent,
    );
    t.check(
        "exporter's device removed under write load: every posted operation completes exactly once",
        exactly_once(&tally),
    );
    t.check(
        "... and the loss is reported (failed completions or a refused SUBMIT)",
        ensure(
            tally.errors > 0 || tally.refused.is_some(),
            "nothing failed",
        ),
    );
    for (ring, uring) in &rings {
        t.check(
            &format!(
                "exporter's device removed under io_uring write load on {}: every SQE taken gets exactly one CQE",
                ring.name()
            ),
            exactly_once(uring),
        );
        t.check(
            "... and the loss is reported in its CQEs",
            ensure(uring.errors > 0, "no CQE failed"),
        );
    }
    drop(rw);
    drop(conn);
    t.check("the peer re-adds its device", agent_cmd(peer, "linkadd"));
    let start = Instant::now();
    let res = loop {
        let r = (|| -> Result<(), String> {
            let c = dev
                .connect(addr(peer, 7471), T)
                .map_err(|e| e.to_string())?;
            let (_, rw) = fresh_import(peer, &c, "rw")?;
            let local = dev.create_region(4096, 1).map_err(|e| e.to_string())?;
            rw.write(&local, 0, 0, 1).map_err(|e| e.to_string())
        })();
        if r.is_ok() || start.elapsed() > Duration::from_secs(20) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    t.check("a new connection works once the peer's device is back", res);
}

pub(crate) fn agent_cmd(peer: &str, cmd: &str) -> Result<(), String> {
    let v = agent_query(peer, cmd)?;
    ensure(v.is_empty(), format!("ok {v}"))
}

/// Runs `cmd` on the peer's agent: the value of its `ok VALUE` answer
/// (empty for a bare `ok`), or why it failed.
pub(crate) fn agent_query(peer: &str, cmd: &str) -> Result<String, String> {
    use std::io::{BufRead, BufReader, Write};
    let s =
        std::net::TcpStream::connect_timeout(&addr(peer, 7469), T).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    writeln!(&s, "{cmd}").map_err(|e| e.to_string())?;
    let mut out = String::new();
    BufReader::new(s)
        .read_line(&mut out)
        .map_err(|e| e.to_string())?;
    match out.trim() {
        "ok" => Ok(String::new()),
        a => a
            .strip_prefix("ok ")
            .map(str::to_string)
            .ok_or_else(|| a.to_string()),
    }
}

/// Items 2-4: refused calls do nothing; sizes past the send queue.
fn refusal_checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>, quick: bool) {
    let page = rrdma::page_size() as usize;
    let local = dev.create_region(4096, 64).expect("region");
    let ops: Vec<u8> = (0..16)
        .flat_map(|i| rw.op(OP_READ, &local, i, i, 1, i).encode())
        .collect();
    let arg = crate::map_anon(page, libc::PROT_READ | libc::PROT_WRITE);
    let sub = Submit {
        ops: ops.as_ptr() as u64,
        count: 16,
        op_size: Op::SIZE as u32,
        ..Submit::zeroed()
    }
    .encode();
    // SAFETY: our page, then made read-only.
    unsafe {
        std::ptr::copy_nonoverlapping(sub.as_ptr(), arg as *mut u8, sub.len());
        libc::mprotect(arg as *mut libc::c_void, page, libc::PROT_READ);
    }
    // SAFETY: a read-only page: the kernel cannot write its answer back.
    t.check(
        "SUBMIT with its argument in read-only memory: EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(IOCTL_SUBMIT, arg) }, EFAULT),
    );
    t.check("... and posts nothing", quiet(dev, 500));

    let max = rw.max_op_blocks();
    t.check(
        "IMPORT reports the largest operation, below the region's size",
        ensure(
            max > 0 && u64::from(max) < rw.nblocks(),
            format!("max_op_blocks {max} of {}", rw.nblocks()),
        ),
    );
    let n = (rw.nblocks() - 8) as u32;
    let mut big = match dev.create_region(4096, u64::from(n) + 8) {
        Ok(r) => r,
        Err(e) => return t.check("a local region as large as the peer's", Err(e.to_string())),
    };
    let over = rw.op(OP_WRITE, &big, 3, 5, max + 1, 1);
    t.check(
        "an operation of max_op_blocks + 1 blocks: E2BIG",
        expect_errno_any(dev.submit(&[over]), E2BIG),
    );
    t.check("... and posts nothing", quiet(dev, 300));
    t.check(
        "... and the registration it touched first still works",
        expect_ok(rw.write(&big, 3, 5, 1)),
    );
    // Quick mode (debug kernels, where siw moves a few MB/s under TCG):
    // transfers of 8 MiB instead of the whole region.
    let (exact, n) = if quick {
        (max.min(2048), n.min(2048))
    } else {
        (max, n)
    };
    t.check(
        &format!("an operation of {exact} blocks (max_op_blocks {max})"),
        expect_ok(dev.rw_sync(&rw.op(OP_WRITE, &big, 3, 5, exact, 0))),
    );
    // Fill the send queue: SUBMIT posts what fits and says how many.
    let res = (|| -> Result<(), String> {
        let mut posted = 0usize;
        let mut refused = false;
        for round in 0..64u64 {
            let ops: Vec<Op> = (0..64)
                .map(|i| rw.op(OP_READ, &local, i % 64, i, 1, round * 64 + i))
                .collect();
            match dev.submit(&ops) {
                Ok(k) if k == ops.len() => posted += k,
                Ok(k) => {
                    posted += k;
                    refused = true;
                    break;
                }
                Err(e) if rrdma::errno(&e) == Some(libc::EAGAIN) => {
                    refused = true;
                    break;
                }
                Err(e) => return Err(format!("SUBMIT: {e}")),
            }
        }
        let got = reap(dev, posted).map_err(|e| e.to_string())?;
        ensure(
            got.len() == posted && got.iter().all(|c| c.status == 0),
            format!("{} of {posted} completed", got.len()),
        )?;
        ensure(refused, "the queue never filled")?;
        rw.read(&local, 0, 0, 1).map_err(|e| format!("after: {e}"))
    })();
    t.check(
        "a full send queue refuses with EAGAIN; all posted complete; nothing is poisoned",
        res,
    );
    // A large misaligned write, split by the library, lands bit-exact.
    pattern(big.as_mut_slice(), 7);
    let res = (|| -> Result<(), String> {
        let start = Instant::now();
        rw.write(&big, 3, 5, n).map_err(|e| format!("write: {e}"))?;
        let el = start.elapsed();
        let theirs = control(peer, &format!("checksum 5 {n}")).map_err(|e| e.to_string())?;
        let ours = format!(
            "{:#x}",
            fnv(&big.as_slice()[3 * BS as usize..(3 + u64::from(n)) as usize * BS as usize])
        );
        println!("# {} MiB write in {el:?}", (u64::from(n) * BS) >> 20);
        ensure(theirs == ours, format!("peer {theirs}, ours {ours}"))
    })();
    t.check(
        &format!(
            "a {} MiB misaligned write (split if over max_op_blocks) lands bit-exact in the peer's memory",
            (u64::from(n) * BS) >> 20
        ),
        res,
    );
}

/// Items 6, 10, 14: on this guest, a listener and dialers to it.
fn loopback_checks(dev: &Rrdma, t: &mut Tap, me: &str) {
    let dialer = Rrdma::open().expect("open");
    // 6: LISTEN's error path while a connection of that listener lives.
    let res = (|| -> Result<(), String> {
        let l = dev
            .listen(addr("0.0.0.0", 7482), 0)
            .map_err(|e| e.to_string())?;
        let h = std::thread::scope(|s| {
            let c = s.spawn(|| dialer.connect(addr(me, 7482), T));
            let a = l.accept(Some(T));
            (c.join(), a)
        });
        let (Ok(Ok(c)), Ok(Some(a))) = h else {
            return Err("loopback connect/accept failed".into());
        };
        let again = expect_errno_any(dev.listen(addr("0.0.0.0", 7482), 0), libc::EADDRNOTAVAIL);
        drop((c, a, l));
        again
    })();
    t.check(
        "listen twice while the first listener has a connection: EADDRNOTAVAIL",
        res,
    );
    // 14: an export restricted to one connection; serials are not reused.
    let res = (|| -> Result<(), String> {
        let l = dev
            .listen(addr("0.0.0.0", 7483), 0)
            .map_err(|e| e.to_string())?;
        let pair = || -> Result<_, String> {
            std::thread::scope(|s| {
                let c = s.spawn(|| dialer.connect(addr(me, 7483), T));
                let a = l
                    .accept(Some(T))
                    .map_err(|e| e.to_string())?
                    .ok_or("no accept")?;
                let c = c.join().map_err(|_| "panic")?.map_err(|e| e.to_string())?;
                Ok((c, a))
            })
        };
        let region = dev.create_region(4096, 4).map_err(|e| e.to_string())?;
        let (c1, a1) = pair()?;
        let (c2, a2) = pair()?;
        let e = dev
            .export_raw(&ExportArg {
                region: region.handle(),
                access: ACCESS_READ,
                conn: a1.handle(),
                ..ExportArg::zeroed()
            })
            .map_err(|e| e.to_string())?;
        c1.import(e.token, T)
            .map_err(|e| format!("import over the named connection: {e}"))?;
        expect_errno(c2.import(e.token, T), ENOENT)
            .map_err(|e| format!("other connection: {e}"))?;
        drop((c1, a1, c2, a2));
        for i in 0..4 {
            let (c, _a) = pair()?;
            expect_errno(c.import(e.token, T), ENOENT)
                .map_err(|e| format!("new connection {i}: {e}"))?;
        }
        dev.unexport_raw(e.token, 0).map_err(|e| e.to_string())
    })();
    t.check(
        "an export restricted to a connection: other and later connections get ENOENT",
        res,
    );
    // 10: UNLISTEN while dialers flood the listener.
    let res = (|| -> Result<(), String> {
        let live0 = dev
            .fdinfo_value("rrdma-connections-live")
            .map_err(|e| e.to_string())?;
        let handles0 = dev
            .fdinfo_value("rrdma-connections")
            .map_err(|e| e.to_string())?;
        let l = dev
            .listen(addr("0.0.0.0", 7484), 4)
            .map_err(|e| e.to_string())?;
        let stop = AtomicBool::new(false);
        // The dialers keep what they got, so that the accepted connection's
        // peer stays up: every connection of this file alive then is one
        // it accepted, or one without a handle.
        let held = std::sync::Mutex::new(Vec::new());
        let kept = std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(c) = dialer.connect(addr(me, 7484), Duration::from_secs(2)) {
                            held.lock().unwrap_or_else(|e| e.into_inner()).push(c);
                        }
                    }
                });
            }
            let kept = l.accept(Some(T));
            std::thread::sleep(Duration::from_millis(1500));
            drop(l);
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, Ordering::Relaxed);
            kept
        });
        let kept = kept.map_err(|e| e.to_string())?.ok_or("nothing accepted")?;
        std::thread::sleep(Duration::from_millis(1000));
        let live = dev
            .fdinfo_value("rrdma-connections-live")
            .map_err(|e| e.to_string())?;
        let handles = dev
            .fdinfo_value("rrdma-connections")
            .map_err(|e| e.to_string())?;
        let dialed = held.lock().map_or(0, |v| v.len());
        drop(kept);
        drop(held);
        std::thread::sleep(Duration::from_millis(500));
        let after = dev
            .fdinfo_value("rrdma-connections-live")
            .map_err(|e| e.to_string())?;
        println!("# UNLISTEN flood: {dialed} connections established by the dialers");
        ensure(
            handles == handles0 + 1 && live == live0 + 1 && after == live0,
            format!(
                "before: {live0} live, {handles0} handles; after UNLISTEN: {live} live, \
                 {handles} handles; after closing the accepted one: {after} live"
            ),
        )
    })();
    t.check(
        "UNLISTEN during a connect flood: only accepted connections remain",
        res,
    );
}

/// Items 11-13: concurrency on the peer.
fn concurrency_checks(dev: &Rrdma, t: &mut Tap, peer: &str, conn: &Connection<'_>, rw_token: u64) {
    let res: Vec<io::Result<RemoteRegion<'_>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..48)
            .map(|_| s.spawn(|| conn.import(rw_token, Duration::from_secs(30))))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("panic"))))
            .collect()
    });
    let failed: Vec<String> = res
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    t.check(
        "48 concurrent IMPORTs on one connection all succeed",
        ensure(
            failed.is_empty(),
            format!("{} failed: {:?}", failed.len(), failed.first()),
        ),
    );
    drop(res);

    // 4 connections, a writer thread on each, reading back through the next.
    let res = (|| -> Result<(), String> {
        let conns: Vec<Connection<'_>> = (0..4)
            .map(|_| dev.connect(addr(peer, 7471), T))
            .collect::<io::Result<_>>()
            .map_err(|e| e.to_string())?;
        let imps: Vec<RemoteRegion<'_>> = conns
            .iter()
            .map(|c| c.import(rw_token, T))
            .collect::<io::Result<_>>()
            .map_err(|e| e.to_string())?;
        let errs: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4usize)
                .map(|k| {
                    let imps = &imps;
                    s.spawn(move || -> Result<(), String> {
                        let mut out = dev.create_region(4096, 64).map_err(|e| e.to_string())?;
                        let back = dev.create_region(4096, 64).map_err(|e| e.to_string())?;
                        for i in 0..30u64 {
                            let n = 1 + ((i * 7 + k as u64) % 64) as u32;
                            let rb = 2048 + k as u64 * 64;
                            let bytes = n as usize * 4096;
                            pattern(&mut out.as_mut_slice()[..bytes], (k as u64) << 32 | i);
                            imps[k]
                                .write(&out, 0, rb, n)
                                .map_err(|e| format!("write {k}/{i}: {e}"))?;
                            imps[(k + 1) % 4]
                                .read(&back, 0, rb, n)
                                .map_err(|e| format!("read {k}/{i}: {e}"))?;
                            if out.as_slice()[..bytes] != back.as_slice()[..bytes] {
                                return Err(format!("thread {k} iteration {i}: data differs"));
                            }
                        }
                        // The peer's memory holds the last write.
                        let n = 1 + ((29 * 7 + k as u64) % 64) as u32;
                        let rb = 2048 + k as u64 * 64;
                        let theirs = control(peer, &format!("checksum {rb} {n}"))
                            .map_err(|e| e.to_string())?;
                        let ours = format!("{:#x}", fnv(&out.as_slice()[..n as usize * 4096]));
                        ensure(
                            theirs == ours,
                            format!("thread {k}: peer {theirs}, ours {ours}"),
                        )
                    })
                })
                .collect();
            hs.into_iter()
                .filter_map(|h| h.join().unwrap_or(Err("panic".into())).err())
                .collect()
        });
        ensure(errs.is_empty(), errs.join("; "))
    })();
    t.check(
        "4 threads write checksummed blocks over 4 connections and read back through another",
        res,
    );

    let res = (|| -> Result<(), String> {
        let local = dev.create_region(4096, 1).map_err(|e| e.to_string())?;
        let mut slowest = Duration::ZERO;
        for i in 0..20 {
            let c = dev
                .connect(addr(peer, 7471), T)
                .map_err(|e| format!("connect {i}: {e}"))?;
            let start = Instant::now();
            let r = c
                .import(rw_token, T)
                .map_err(|e| format!("import {i} after {:?}: {e}", start.elapsed()))?;
            slowest = slowest.max(start.elapsed());
            r.write(&local, 0, 3000 + i, 1)
                .map_err(|e| format!("write {i}: {e}"))?;
            drop(r);
            c.disconnect().map_err(|e| format!("disconnect {i}: {e}"))?;
        }
        println!("# 20 rounds: slowest IMPORT {} ms", slowest.as_millis());
        Ok(())
    })();
    t.check("20 rounds of connect, import, write, disconnect", res);
}

/// Item 14: one protection domain per connection (`rdma res show pd`).
fn pd_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let count = || -> Result<usize, String> {
        let out = std::process::Command::new("rdma")
            .args(["res", "show", "pd"])
            .output()
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("rrdma"))
            .count())
    };
    let res = (|| -> Result<(), String> {
        let before = count()?;
        let conns: Vec<_> = (0..3)
            .map(|_| dev.connect(addr(peer, 7471), T))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| e.to_string())?;
        let during = count()?;
        drop(conns);
        std::thread::sleep(Duration::from_millis(500));
        let after = count()?;
        ensure(
            during == before + 3 && after == before,
            format!(
                "PDs of rrdma: {before} before, {during} with 3 more connections, {after} after"
            ),
        )
    })();
    t.check("one protection domain per connection, freed with it", res);
}

/// Item 15: CONNECT to a closed port; local TCP ports exhausted (siw).
fn connect_errno_checks(dev: &Rrdma, t: &mut Tap, peer: &str, prov: &str) {
    let res = (|| -> Result<(), String> {
        for i in 0..20 {
            expect_errno(dev.connect(addr(peer, 7999), T), ECONNREFUSED)
                .map_err(|e| format!("try {i}: {e}"))?;
        }
        Ok(())
    })();
    t.check("20 CONNECTs to a closed port: ECONNREFUSED each time", res);
    if prov != "siw" {
        return;
    }
    let range = "/proc/sys/net/ipv4/ip_local_port_range";
    let old = std::fs::read_to_string(range).unwrap_or_default();
    let res = (|| -> Result<(), String> {
        std::fs::write(range, "40000 40003").map_err(|e| e.to_string())?;
        let _busy: Vec<_> = (40000..=40003)
            .map(|p| std::net::TcpListener::bind(("0.0.0.0", p)))
            .collect::<io::Result<_>>()
            .map_err(|e| e.to_string())?;
        expect_errno(dev.connect(addr(peer, 7471), T), libc::EADDRNOTAVAIL)
    })();
    let _ = std::fs::write(range, old.trim());
    t.check(
        "CONNECT with every local TCP port taken (siw): EADDRNOTAVAIL",
        res,
    );
    t.check(
        "... and CONNECT works once ports are free",
        dev.connect(addr(peer, 7471), T)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    );
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, me: &str, prov: &str, quick: bool) {
    let rw_token = match token(peer, "rw") {
        Ok(x) => x,
        Err(e) => return t.check("the peer hands out its tokens", Err(e.to_string())),
    };
    let conn = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => return t.check("connect", Err(e.to_string())),
    };
    let rw = match conn.import(rw_token, T) {
        Ok(r) => r,
        Err(e) => return t.check("import", Err(e.to_string())),
    };
    connect_errno_checks(dev, t, peer, prov);
    crate::hostile::checks(dev, t, peer, prov);
    refusal_checks(dev, t, peer, &rw, quick);
    crate::stalled_copies::checks(dev, t, peer, &rw);
    concurrency_checks(dev, t, peer, &conn, rw_token);
    pd_checks(dev, t, peer);
    loopback_checks(dev, t, me);
    drop(rw);
    crate::unexport::checks(dev, t, peer, &conn);
    drop(conn);
    crate::keepalive::checks(dev, t, peer, quick);
    crate::stall::checks(dev, t, peer, prov);
    crate::reconnect::checks(dev, t, peer, quick);
    exporter_device_removal(dev, t, peer);
    let counts = dev.fdinfo().unwrap_or_default();
    t.check(
        "after everything, no operation in flight and no completion left",
        ensure(
            counts
                .iter()
                .filter(|(k, _)| k == "rrdma-ops-in-flight" || k == "rrdma-completions")
                .all(|(_, v)| *v == 0),
            format!("{counts:?}"),
        ),
    );
}
