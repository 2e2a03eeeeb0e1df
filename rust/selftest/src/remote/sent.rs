// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Writes that complete once sent (`RRDMA_OP_F_SENT`) and the fences that
//! place them (`RRDMA_OP_FENCE`):
//! - a SUBMIT of sent writes and a fence: the fence completes last, and
//!   then the exporter's memory holds every write; on iWARP the writes
//!   posted no write fence of their own, the caller's fence one per queue
//!   pair they went on; a fence with nothing outstanding completes at once;
//! - threads streaming sent writes, each fencing and reading back through
//!   a second connection (another queue pair, which nothing orders after
//!   the first one's writes);
//! - a fence right behind a write waiting in its queue pair's open group
//!   completes after it;
//! - bad fences and flags are refused before anything is posted.

use rrdma::abi::errno::{EAGAIN, EINVAL, ENOENT};
use rrdma::abi::uapi::{Completion, Op, OP_FENCE, OP_F_SENT, OP_READ, OP_WRITE};
use rrdma::{RemoteRegion, Rrdma};

use super::common::{fnv, iwarp, pattern, per_thread, reap, write_fences};
use super::peer::{addr, control, T};
use crate::{ensure, expect_errno, Tap};

/// Blocks of the peer's read-write region these checks write (the last
/// 64 of its 256; the other checks' own blocks are below).
const FIRST: u64 = 192;
const WRITES: u64 = 16;

fn count(dev: &Rrdma, key: &str) -> u64 {
    dev.fdinfo_value(key).unwrap_or(0)
}

/// Submits `ops` in order, the rest again after completions when the
/// queues are full (a small NIC's send queue holds fewer), and returns
/// every completion in the order they came, and how many SUBMITs posted.
fn run_all(dev: &Rrdma, ops: &[Op]) -> Result<(Vec<Completion>, u64), String> {
    let (mut next, mut got, mut submits) = (0, Vec::new(), 0);
    while got.len() < ops.len() {
        if next < ops.len() {
            match dev.submit(&ops[next..]) {
                Ok(n) => {
                    next += n;
                    submits += u64::from(n > 0);
                }
                Err(e) if rrdma::errno(&e) == Some(EAGAIN.get()) && next > got.len() => {}
                Err(e) => return Err(format!("SUBMIT of operation {next}: {e}")),
            }
        }
        let want = if next < ops.len() {
            1
        } else {
            next - got.len()
        };
        let more = reap(dev, want).map_err(|e| e.to_string())?;
        if more.is_empty() {
            return Err(format!("{} of {} completions", got.len(), ops.len()));
        }
        got.extend(more);
    }
    Ok((got, submits))
}

pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw_token: u64, rw: &RemoteRegion<'_>) {
    batch_then_fence(dev, t, peer, rw);
    after_group(dev, t, rw);
    fence_cost(dev, t, rw);
    threads(dev, t, peer, rw_token, rw);
    bad_fences(dev, t, rw);
}

/// One SUBMIT: `WRITES` sent writes of one block each, then a fence.
fn batch_then_fence(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    let mut out = match dev.create_region(4096, WRITES) {
        Ok(r) => r,
        Err(e) => return t.check("sent: a local region", Err(e.to_string())),
    };
    pattern(out.as_mut_slice(), 0x5e47);
    let (fences0, op_fences0, now0) = (
        write_fences(dev),
        count(dev, "rrdma-op-fences"),
        count(dev, "rrdma-op-fences-at-once"),
    );
    let mut ops: Vec<Op> = (0..WRITES)
        .map(|i| rw.write_sent_op(&out, i, FIRST + i, 1, 100 + i))
        .collect();
    ops.push(rw.fence_op(999));
    let mut submits = 1;
    let res = run_all(dev, &ops).and_then(|(got, n)| {
        submits = n;
        let last = got.last().copied();
        ensure(
            got.len() == ops.len()
                && got.iter().all(|c| c.status == 0)
                && last.is_some_and(|c| c.user_data == 999 && c.opcode == OP_FENCE && c.bytes == 0),
            format!("{got:?}"),
        )
    });
    t.check(
        "sent: 16 sent writes and a fence in one SUBMIT complete, the fence last",
        res,
    );
    let bytes = WRITES as usize * 4096;
    let ours = format!("{:#x}", fnv(&out.as_slice()[..bytes]));
    t.check(
        "sent: ... and once the fence completed, the exporter's memory holds every write",
        control(peer, &format!("checksum {FIRST} {WRITES}"))
            .map_err(|e| e.to_string())
            .and_then(|theirs| ensure(theirs == ours, format!("peer {theirs}, ours {ours}"))),
    );
    let (fences, op_fences, now) = (
        write_fences(dev) - fences0,
        count(dev, "rrdma-op-fences") - op_fences0,
        count(dev, "rrdma-op-fences-at-once") - now0,
    );
    println!("# sent: 16 writes + fence: {fences} write fences, {op_fences} fences posted, {now} at once");
    // iWARP: the writes have no fence, the caller's is posted, on each
    // queue pair that holds some of them: one (a SUBMIT run goes on one),
    // or up to one per CPU where a small NIC's queue took them in several
    // SUBMITs, each from the CPU the thread was on. RoCE: the writes
    // complete once acknowledged, which may come before the fence is
    // submitted (then it completes at once).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let paths = submits.clamp(1, cpus);
    let want = if iwarp() {
        fences == 0 && (1..=paths).contains(&op_fences) && now == 0
    } else {
        fences == 0 && (1..=paths).contains(&(op_fences + now))
    };
    t.check(
        "sent: ... with no write fence of their own, and one fence per queue pair they went on",
        ensure(
            want,
            format!("{fences} write fences, {op_fences} posted, {now} at once"),
        ),
    );
    let (op_fences0, now0) = (
        count(dev, "rrdma-op-fences"),
        count(dev, "rrdma-op-fences-at-once"),
    );
    let again = rw.fence().map_err(|e| e.to_string());
    let (posted, now) = (
        count(dev, "rrdma-op-fences") - op_fences0,
        count(dev, "rrdma-op-fences-at-once") - now0,
    );
    t.check(
        "sent: a fence with nothing outstanding completes at once (no round trip)",
        again.and_then(|()| {
            ensure(
                posted == 0 && now == 1,
                format!("{posted} posted, {now} at once"),
            )
        }),
    );
}

/// A fence submitted right behind a write that joined its queue pair's
/// open group (a write's fence in flight: on iWARP the write waits,
/// unsignaled, for the group's fence): the fence completes after that
/// write, 20 times in a row.
fn after_group(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let Ok(out) = dev.create_region(4096, 2) else {
        return t.check(
            "sent: a region for the group check",
            Err("no region".into()),
        );
    };
    let res = (0..20u64).try_for_each(|i| -> Result<(), String> {
        let lone = [rw.op(OP_WRITE, &out, 0, FIRST, 1, 1)];
        let then = [rw.op(OP_WRITE, &out, 1, FIRST + 1, 1, 2), rw.fence_op(3)];
        let n = dev.submit(&lone).map_err(|e| e.to_string())?
            + match dev.submit(&then) {
                Ok(n) => n,
                Err(e) if rrdma::errno(&e) == Some(EAGAIN.get()) => 0,
                Err(e) => return Err(e.to_string()),
            };
        let got = reap(dev, n).map_err(|e| e.to_string())?;
        // A small NIC's queue may not take both at once: what was not
        // posted is not part of this round's check.
        if n < 3 {
            return Ok(());
        }
        let order: Vec<u64> = got.iter().map(|c| c.user_data).collect();
        let at = |ud| order.iter().position(|&u| u == ud);
        ensure(
            n == 3
                && got.len() == 3
                && got.iter().all(|c| c.status == 0)
                && at(2).is_some()
                && at(2) < at(3),
            format!("round {i}: completions in order {order:?}: {got:?}"),
        )
    });
    t.check(
        "sent: a fence right behind a write of an open group completes after it (20 rounds)",
        res,
    );
}

/// What a fence adds to a batch of 16 sent writes, beside one READ's
/// round trip: 15 alternated rounds of (writes; writes and a fence; a
/// READ), medians printed (measured, not asserted: the guests' times are
/// noise).
fn fence_cost(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let Ok(out) = dev.create_region(4096, WRITES) else {
        return t.check(
            "sent: a region for the fence's cost",
            Err("no region".into()),
        );
    };
    let writes: Vec<Op> = (0..WRITES)
        .map(|i| rw.write_sent_op(&out, i, FIRST + i, 1, i))
        .collect();
    let mut fenced = writes.clone();
    fenced.push(rw.fence_op(WRITES));
    let timed = |ops: &[Op]| -> Result<f64, String> {
        let t0 = std::time::Instant::now();
        let (got, _) = run_all(dev, ops)?;
        ensure(
            got.len() == ops.len() && got.iter().all(|c| c.status == 0),
            format!("{got:?}"),
        )?;
        Ok(t0.elapsed().as_secs_f64() * 1e6)
    };
    let read = [rw.op(OP_READ, &out, 0, FIRST, 1, 0)];
    let mut a = Vec::new();
    let mut b = Vec::new();
    let mut c = Vec::new();
    let res = (0..15).try_for_each(|_| -> Result<(), String> {
        a.push(timed(&writes)?);
        b.push(timed(&fenced)?);
        c.push(timed(&read)?);
        Ok(())
    });
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (ma, mb, mc) = (median(&mut a), median(&mut b), median(&mut c));
    println!(
        "# sent: 16 writes {ma:.0} us, with a fence {mb:.0} us (+{:.0} us), one READ {mc:.0} us: the fence adds {:.2} round trips",
        mb - ma,
        (mb - ma) / mc.max(1.0)
    );
    t.check(
        "sent: 15 rounds of 16 sent writes, with and without a fence, and a READ complete",
        res,
    );
}

/// Four threads, each on blocks of its own: rounds of sent writes, a
/// fence, and a read back through a second connection.
fn threads(dev: &Rrdma, t: &mut Tap, peer: &str, rw_token: u64, rw: &RemoteRegion<'_>) {
    let other = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => return t.check("sent: a second connection", Err(e.to_string())),
    };
    let rw2 = match other.import(rw_token, T) {
        Ok(r) => r,
        Err(e) => return t.check("sent: a second import", Err(e.to_string())),
    };
    let posted0 = count(dev, "rrdma-op-fences");
    let res = per_thread(dev, 4, 4, |k, out, back| {
        let rb = FIRST + 16 + k * 4;
        for i in 0..20u64 {
            pattern(out.as_mut_slice(), k * 7919 + i);
            for b in 0..4 {
                let w = rw.write_sent_op(out, b, rb + b, 1, 0);
                dev.rw_sync(&w).map_err(|e| format!("sent write: {e}"))?;
            }
            rw.fence().map_err(|e| format!("fence: {e}"))?;
            rw2.read(back, 0, rb, 4).map_err(|e| format!("read: {e}"))?;
            if out.as_slice() != back.as_slice() {
                return Err(format!(
                    "round {i}: blocks {rb}..{} read through the other connection differ",
                    rb + 4
                ));
            }
        }
        Ok(())
    });
    // A fence goes to every queue pair with writes not known placed:
    // more than one per fence when the threads' CPUs' lanes had some.
    println!(
        "# sent: 80 fences from 4 threads posted on {} queue pairs in all",
        count(dev, "rrdma-op-fences") - posted0
    );
    for (k, r) in res.into_iter().enumerate() {
        t.check(
            &format!("sent: thread {k}: 20 rounds of 4 sent writes and a fence, read back through another connection"),
            r,
        );
    }
}

/// Fences and flags the module refuses (`EINVAL`, `ENOENT`).
fn bad_fences(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let local = match dev.create_region(4096, 1) {
        Ok(r) => r,
        Err(e) => return t.check("sent: a region", Err(e.to_string())),
    };
    let fence = rw.fence_op(0);
    for (what, op) in [
        ("with a count", Op { count: 1, ..fence }),
        (
            "with a local region",
            Op {
                local: local.handle(),
                ..fence
            },
        ),
        (
            "with a remote block",
            Op {
                remote_block: 1,
                ..fence
            },
        ),
        (
            "with a local block",
            Op {
                local_block: 1,
                ..fence
            },
        ),
        (
            "with OP_F_SENT",
            Op {
                flags: OP_F_SENT,
                ..fence
            },
        ),
        (
            "with reserved set",
            Op {
                reserved: 1,
                ..fence
            },
        ),
    ] {
        t.check(
            &format!("sent: a fence {what}: EINVAL"),
            expect_errno(dev.rw_sync(&op), EINVAL),
        );
    }
    t.check(
        "sent: a fence on no import: ENOENT",
        expect_errno(
            dev.rw_sync(&Op {
                remote: 0xdead,
                ..fence
            }),
            ENOENT,
        ),
    );
    let read = rw.op(OP_READ, &local, 0, 0, 1, 0);
    t.check(
        "sent: OP_F_SENT on a read: EINVAL",
        expect_errno(
            dev.rw_sync(&Op {
                flags: OP_F_SENT,
                ..read
            }),
            EINVAL,
        ),
    );
    let write = rw.op(OP_WRITE, &local, 0, FIRST, 1, 0);
    t.check(
        "sent: an unknown op flag on a write: EINVAL",
        expect_errno(dev.rw_sync(&Op { flags: 2, ..write }), EINVAL),
    );
    // Refused in a SUBMIT: nothing of it is posted.
    let sub = dev.submit(&[
        Op {
            flags: OP_F_SENT,
            ..write
        },
        Op { count: 1, ..fence },
    ]);
    t.check(
        "sent: a SUBMIT with a bad fence posts nothing: EINVAL",
        super::common::expect_errno_any(sub, EINVAL).and_then(|()| super::common::quiet(dev, 200)),
    );
}
