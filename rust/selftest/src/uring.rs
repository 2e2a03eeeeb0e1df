// SPDX-License-Identifier: GPL-2.0

//! Checks of the io_uring commands (`RRDMA_URING_CMD_OP`): blocks moved
//! through io_uring land in the peer's memory and read back bit-exact;
//! on iWARP they share write fences; every bad operation gets the errno
//! SUBMIT gives it, in the CQE; a ring of 64-byte SQEs and another
//! `cmd_op` are refused, an IOPOLL ring too on 6.12 (served unpolled on
//! later kernels); a ring closed with operations in flight leaves the
//! connection working.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use rrdma::abi::errno::{EINVAL, ENOTTY, EOPNOTSUPP};
use rrdma::abi::uapi::{Op, FEATURE_URING, OP_READ, OP_WRITE, URING_CMD_OP};
use rrdma::{RemoteRegion, Rrdma, UringCompletion, UringEngine};

use crate::remote::{control, fnv, iwarp, pattern, write_fences};
use crate::{ensure, expect_ok, Tap};

/// Runs `ops` through `eng` and waits for all their CQEs (10 s at most).
pub(crate) fn run(eng: &mut UringEngine, ops: &[Op]) -> Result<Vec<UringCompletion>, String> {
    let mut out = Vec::new();
    let mut next = 0;
    let start = Instant::now();
    while out.len() < ops.len() {
        next += eng.push(&ops[next..]);
        eng.submit(1, Duration::from_secs(1))
            .map_err(|e| format!("io_uring_enter: {e}"))?;
        eng.reap(&mut out);
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!("{} of {} CQEs in 10 s", out.len(), ops.len()));
        }
    }
    Ok(out)
}

/// The CQE result of one operation.
pub(crate) fn one(eng: &mut UringEngine, op: &Op) -> Result<i32, String> {
    Ok(run(eng, std::slice::from_ref(op))?[0].res)
}

/// The CQE result of `sqe` on a fresh ring built by `ring`.
fn raw<S: squeue::EntryMarker>(
    ring: std::io::Result<IoUring<S, cqueue::Entry>>,
    sqe: S,
) -> Result<i32, String> {
    let mut ring = ring.map_err(|e| format!("io_uring_setup: {e}"))?;
    // SAFETY: the SQE refers to no user memory.
    unsafe { ring.submission().push(&sqe) }.map_err(|_| "submission queue full".to_string())?;
    ring.submit().map_err(|e| e.to_string())?;
    // An IOPOLL ring's io_uring_enter polls without waiting for task
    // work: ask again until the CQE is there.
    let start = Instant::now();
    loop {
        if let Some(c) = ring.completion().next() {
            return Ok(c.result());
        }
        if start.elapsed() > Duration::from_secs(5) {
            return Err("no CQE in 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
        ring.submit().map_err(|e| e.to_string())?;
    }
}

fn want_res(res: Result<i32, String>, want: i32) -> Result<(), String> {
    let res = res?;
    ensure(res == want, format!("res {res}, want {want}"))
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    let features = dev.info().map(|i| i.features).unwrap_or(0);
    t.check(
        "GET_INFO reports io_uring commands",
        ensure(
            features & FEATURE_URING != 0,
            format!("features {features:#x}"),
        ),
    );
    let mut eng = match UringEngine::new(dev, 64) {
        Ok(e) => e,
        Err(e) => return t.check("io_uring ring of 128-byte SQEs", Err(e.to_string())),
    };
    // 16 one-block writes, then 16 reads back, as io_uring commands.
    let mut out = expect_ok(dev.create_region(4096, 16)).expect("region");
    let back = expect_ok(dev.create_region(4096, 16)).expect("region");
    pattern(out.as_mut_slice(), 0xfeed);
    let writes: Vec<Op> = (0..16)
        .map(|i| rw.op(OP_WRITE, &out, i, 200 + i, 1, 1000 + i))
        .collect();
    let reads: Vec<Op> = (0..16)
        .map(|i| rw.op(OP_READ, &back, i, 200 + i, 1, 2000 + i))
        .collect();
    let all_done = |cs: Result<Vec<UringCompletion>, String>, base: u64| {
        let cs = cs?;
        let ids: HashSet<u64> = cs.iter().map(|c| c.user_data).collect();
        ensure(
            cs.len() == 16
                && ids == (base..base + 16).collect()
                && cs.iter().all(|c| c.res == 4096),
            format!("{cs:?}"),
        )
    };
    let fences0 = write_fences(dev);
    t.check(
        "io_uring: 16 writes complete once each with res 4096 and their user_data",
        all_done(run(&mut eng, &writes), 1000),
    );
    // iWARP (siw): the writes of one submission share the fence its plug's
    // end posts (two if the task slept while submitting: the plug then
    // closes early); with small queues some wait for room and go one by
    // one from io_uring's workers, sharing fences by group commit.
    // Elsewhere no fence is sent.
    let sent = write_fences(dev) - fences0;
    let small_nic = std::env::var("RRDMA_MAX_OP_BLOCKS").is_ok();
    t.check(
        &format!("io_uring: 16 writes submitted at once share their write fences ({sent})"),
        ensure(
            match (iwarp(), small_nic) {
                (true, false) => (1..=2).contains(&sent),
                (true, true) => (1..16).contains(&sent),
                (false, _) => sent == 0,
            },
            format!("{sent} fences"),
        ),
    );
    t.check(
        "io_uring: 16 reads complete once each with res 4096 and their user_data",
        all_done(run(&mut eng, &reads), 2000),
    );
    t.check(
        "io_uring: read-back and the peer's memory match what was written",
        (|| {
            ensure(out.as_slice() == back.as_slice(), "read back differs")?;
            let theirs = control(peer, "checksum 200 16").map_err(|e| e.to_string())?;
            let ours = format!("{:#x}", fnv(out.as_slice()));
            ensure(theirs == ours, format!("peer {theirs}, ours {ours}"))
        })(),
    );
    let fd = dev.raw_fd();
    let good = rw.op(OP_READ, &back, 0, 0, 1, 7);
    t.check(
        "io_uring: a ring of 64-byte SQEs gets EINVAL",
        want_res(
            raw(
                IoUring::<squeue::Entry, cqueue::Entry>::new(4),
                opcode::UringCmd16::new(types::Fd(fd), URING_CMD_OP).build(),
            ),
            -EINVAL.get(),
        ),
    );
    t.check(
        "io_uring: another cmd_op gets ENOTTY",
        want_res(
            raw(
                IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(4),
                opcode::UringCmd80::new(types::Fd(fd), URING_CMD_OP + 1).build(),
            ),
            -ENOTTY.get(),
        ),
    );
    // rrdma has no ->uring_cmd_iopoll: 6.12's io_uring refuses the command
    // on an IOPOLL ring, later kernels issue it without polling.
    t.check(
        "io_uring: an IOPOLL ring: EOPNOTSUPP (6.12) or served unpolled",
        raw(
            IoUring::<squeue::Entry128, cqueue::Entry>::builder()
                .setup_iopoll()
                .build(4),
            UringEngine::entry(fd, &good),
        )
        .and_then(|r| ensure(r == -EOPNOTSUPP.get() || r == 4096, format!("res {r}"))),
    );
    // A ring closed with 64 operations in flight: io_uring waits for their
    // completions; the connection goes on.
    let res = (|| {
        let mut doomed = UringEngine::new(dev, 64).map_err(|e| e.to_string())?;
        let ops: Vec<Op> = (0..64)
            .map(|i| rw.op(OP_WRITE, &out, i % 16, i, 1, i))
            .collect();
        let n = doomed.push(&ops);
        doomed
            .submit(0, Duration::ZERO)
            .map_err(|e| e.to_string())?;
        drop(doomed);
        ensure(n == 64, format!("{n} queued"))?;
        let r = one(&mut eng, &good)?;
        ensure(r == 4096, format!("next read: res {r}"))
    })();
    t.check(
        "io_uring: a ring closed with 64 operations in flight; the next works",
        res,
    );
}
