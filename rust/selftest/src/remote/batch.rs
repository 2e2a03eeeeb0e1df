// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Batches of operations and how their completions come back: SUBMIT's
//! partial posting, completions in softirq, write fences and sinks,
//! poll(2) and read(2) of the file.

use std::io;

use rrdma::abi::errno::{EAGAIN, EINVAL};
use rrdma::abi::uapi::{Op, OP_READ, OP_WRITE};
use rrdma::{Region, RemoteRegion, Rrdma};

use super::common::{iwarp, op, quiet, reap, write_fences};
use crate::param::ModParam;
use crate::{ensure, expect_ok, Tap};

/// Send CQs are polled in softirq (module parameter `cq_softirq`, on by
/// default): 64 READs posted at once complete there (fdinfo
/// `rrdma-work-softirq` counts the batches), in no more calls into the
/// module than operations (`rrdma-work-completions`; a control message
/// completed meanwhile adds one). A poll hands all it found over in one
/// call: siw's come several per poll, rxe's one at a time, since each
/// event runs the poll at once. With it off they complete on the work
/// queue, as before, none in softirq, and the work item's later start
/// batches them on both providers: fewer calls than operations.
fn softirq_check(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>, local: &Region<'_>) {
    let batches = || dev.fdinfo_value("rrdma-work-softirq").unwrap_or(0);
    let calls = || dev.fdinfo_value("rrdma-work-completions").unwrap_or(0);
    for (on, value) in [(true, "Y"), (false, "N"), (true, "Y")] {
        let res = (|| {
            let param = ModParam::set("cq_softirq", value)?;
            let ops: Vec<Op> = (0..64)
                .map(|i| op(rw, local, OP_READ, i, i, 1, 2000 + i))
                .collect();
            let (batches0, calls0) = (batches(), calls());
            let comps = crate::lossy::submit_all(dev, &ops)?;
            let (n, c) = (batches() - batches0, calls() - calls0);
            println!("# cq_softirq={value}: 64 READs in {c} completion calls, {n} in softirq");
            ensure(
                comps.len() == 64 && comps.iter().all(|c| c.status == 0),
                format!("{} completions, or one failed", comps.len()),
            )?;
            ensure(
                (n > 0) == on,
                format!("{n} calls in softirq with cq_softirq={value}"),
            )?;
            let most = if on { 65 } else { 63 };
            ensure(c <= most, format!("{c} completion calls for 64 READs"))?;
            param.restore()
        })();
        t.check(
            &format!(
                "cq_softirq={value}: 64 READs complete, in softirq only when on, in {} calls than operations",
                if on { "no more" } else { "fewer" }
            ),
            res,
        );
    }
}

pub(super) fn batch_checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let local = expect_ok(dev.create_region(4096, 64)).expect("region");
    let ops: Vec<Op> = (0..64)
        .map(|i| op(rw, &local, OP_WRITE, i, i, 1, 1000 + i))
        .collect();
    // A small NIC's queue (the guests' limit_* parameters) takes part of
    // the batch: SUBMIT says how much, and the rest goes in as operations
    // complete.
    let small_nic = std::env::var("RRDMA_MAX_OP_BLOCKS").is_ok();
    let fences0 = write_fences(dev);
    let mut comps = Vec::new();
    let first = dev.submit(&ops);
    let mut posted = *first.as_ref().unwrap_or(&0);
    let mut submits = 1;
    for _ in 0..1000 {
        if posted >= ops.len() {
            break;
        }
        comps.extend(reap(dev, 1).unwrap_or_default());
        posted += dev.submit(&ops[posted..]).unwrap_or(0);
        submits += 1;
    }
    t.check(
        if small_nic {
            "a batch of 64 writes on a small queue: posted in parts, all of it"
        } else {
            "a batch of 64 writes is posted whole"
        },
        match first {
            Ok(64) if !small_nic => Ok(()),
            Ok(n) if small_nic && n > 0 && n < 64 && posted == 64 => Ok(()),
            Ok(n) => Err(format!("{n} posted at first, {posted} in all")),
            Err(e) => Err(e.to_string()),
        },
    );
    let left = 64 - comps.len();
    comps.extend(reap(dev, left).unwrap_or_default());
    let mut uds: Vec<u64> = comps.iter().map(|c| c.user_data).collect();
    uds.sort_unstable();
    t.check(
        "64 completions, each user_data once, all successful",
        if comps.len() == 64
            && uds == (1000..1064).collect::<Vec<_>>()
            && comps
                .iter()
                .all(|c| c.status == 0 && c.bytes == 4096 && c.opcode == OP_WRITE)
        {
            Ok(())
        } else {
            Err(format!(
                "{} completions: {:?}",
                comps.len(),
                comps.iter().take(3).collect::<Vec<_>>()
            ))
        },
    );
    t.check("no completion beyond the batch", quiet(dev, 200));
    softirq_check(dev, t, rw, &local);
    // iWARP (siw): the writes of one SUBMIT share one fence; elsewhere
    // no fence is sent.
    let iwarp = iwarp();
    let sent = write_fences(dev) - fences0;
    t.check(
        &format!("the batch's writes take at most one write fence per SUBMIT ({submits})"),
        ensure(
            // (A SUBMIT that found the queue full posted nothing.)
            if iwarp {
                sent >= 1 && sent <= submits
            } else {
                sent == 0
            },
            format!("{sent} fences for {submits} SUBMITs (iWARP: {iwarp})"),
        ),
    );
    // iWARP: a queue pair's READ and fence sinks come with its first
    // operation (these writes'); elsewhere there are none.
    let allocs = dev.fdinfo_value("rrdma-sink-allocs").unwrap_or(0);
    t.check(
        &format!("queue pairs allocate their sinks at their first operation ({allocs} did)"),
        ensure(
            if iwarp { allocs >= 1 } else { allocs == 0 },
            format!("{allocs} (iWARP: {iwarp})"),
        ),
    );
    // poll(2) readiness, then a read of exactly one record.
    let _ = dev.submit(&[op(rw, &local, OP_READ, 0, 0, 1, 7)]);
    let mut pfd = libc::pollfd {
        fd: dev.raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    t.check(
        "poll reports POLLIN once a completion is pending",
        if r == 1 && pfd.revents & libc::POLLIN != 0 {
            Ok(())
        } else {
            Err(format!("poll {r} revents {:#x}", pfd.revents))
        },
    );
    let mut small = [0u8; 23];
    // SAFETY: `small` is valid for its length.
    let n = unsafe { libc::read(dev.raw_fd(), small.as_mut_ptr().cast(), small.len()) };
    t.check(
        "read with a buffer shorter than a record: EINVAL",
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(EINVAL.get()) {
            Ok(())
        } else {
            Err(format!("read {n}"))
        },
    );
    let got = reap(dev, 1).unwrap_or_default();
    t.check(
        "the pending completion is the read's",
        if got.len() == 1 && got[0].user_data == 7 && got[0].status == 0 {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        },
    );
    // SAFETY: F_GETFL/F_SETFL on our own descriptor.
    unsafe {
        let fl = libc::fcntl(dev.raw_fd(), libc::F_GETFL);
        libc::fcntl(dev.raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    let mut rec = [0u8; 24];
    // SAFETY: `rec` is valid for its length.
    let n = unsafe { libc::read(dev.raw_fd(), rec.as_mut_ptr().cast(), rec.len()) };
    t.check(
        "non-blocking read with nothing pending: EAGAIN",
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(EAGAIN.get()) {
            Ok(())
        } else {
            Err(format!("read {n}"))
        },
    );
    // SAFETY: as above.
    unsafe {
        let fl = libc::fcntl(dev.raw_fd(), libc::F_GETFL);
        libc::fcntl(dev.raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    // More than the queues hold: a prefix is posted, every posted op completes.
    let many: Vec<Op> = (0..1024)
        .map(|i| op(rw, &local, OP_READ, i % 64, i % 256, 1, i))
        .collect();
    let res = dev.submit(&many);
    let posted = *res.as_ref().unwrap_or(&0);
    t.check(
        "a 1024-op batch posts a prefix",
        match res {
            Ok(n) if n > 0 && n <= 1024 => Ok(()),
            Ok(n) => Err(format!("{n} posted")),
            Err(e) => Err(e.to_string()),
        },
    );
    let comps = reap(dev, posted).unwrap_or_default();
    t.check(
        "every posted operation of the big batch completes once",
        if comps.len() == posted && comps.iter().all(|c| c.status == 0) {
            Ok(())
        } else {
            Err(format!("{} of {posted}", comps.len()))
        },
    );
}
