// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A connection's data lanes: none before the connection's first
//! operation (an idle connection holds one queue pair), then as many as
//! the `queue_pairs` module parameter says, and operations from several
//! CPUs go on them.

use rrdma::abi::uapi::OP_READ;
use rrdma::abi::wire::qps_wanted;
use rrdma::{RemoteRegion, Rrdma};

use crate::param::ModParam;
use crate::{ensure, Tap};

/// Data lanes each file's connection should have: one per queue pair of
/// the `queue_pairs` module parameter (0: one per online CPU) beside the
/// connection's own small one (`wire::qps_wanted`), none with 1; at most
/// 16 queue pairs in all.
pub(crate) fn lanes_expected() -> u64 {
    let param = ModParam::get("queue_pairs")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    let qps = if param == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
    } else {
        param
    };
    u64::from(qps_wanted(qps.clamp(1, 16) as u16, true)) - 1
}

/// The connection's data lanes: none while no operation went on it; after
/// one (a READ of `rw`), they come up (both guests load the module with
/// the same `queue_pairs`, so the peer grants all that this side offers).
/// Returns how many are expected.
pub(super) fn lanes_up_checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) -> u64 {
    let want = lanes_expected();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let idle = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
    t.check(
        "no data lane before the connection's first operation",
        ensure(idle == 0, format!("{idle} up")),
    );
    let first = dev
        .create_region(4096, 1)
        .and_then(|local| dev.rw_sync(&rw.op(OP_READ, &local, 0, 0, 1, 0)));
    t.check(
        "the connection's first operation (a READ on its own queue pair)",
        first.map_err(|e| e.to_string()),
    );
    let start = std::time::Instant::now();
    let mut up = 0;
    while start.elapsed() < std::time::Duration::from_secs(10) {
        up = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
        if up >= want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!(
        "# data lanes: {up} up of {want} after {} ms",
        start.elapsed().as_millis()
    );
    t.check(
        &format!("the connection's {want} data lanes come up"),
        ensure(up == want, format!("{up} up")),
    );
    want
}

/// Operations submitted from several CPUs went on the data lanes too.
pub(super) fn lane_ops_checks(dev: &Rrdma, t: &mut Tap, lanes: u64, before: u64) {
    let ops = dev.fdinfo_value("rrdma-lane-ops").unwrap_or(0) - before;
    println!("# operations posted on data lanes by the thread checks: {ops}");
    if lanes == 0 {
        return;
    }
    t.check(
        "threads on several CPUs post on the data lanes",
        ensure(ops > 0, "none"),
    );
}

/// How a fresh file posts its first operation ([`first_large_checks`]).
#[derive(Clone, Copy)]
enum Via {
    Submit,
    Sync,
    Uring,
}

/// A fresh connection whose first operation is as large as its import
/// allows (`max_op_blocks`), more than the connection's small own queue
/// pair takes: it waits for the data lanes (`Conn::wait_lane`), goes on
/// one, and its bytes land in the peer's memory, through `SUBMIT`,
/// `RW_SYNC` and io_uring alike. Where `rw`'s whole region is one such
/// operation, it fits the own queue pair (1 MiB in 1 MiB chunks): the
/// small NIC's run (4 KiB chunks) and `passive_lanes` check it.
pub(super) fn first_large_checks(t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>, rw_token: u64) {
    if lanes_expected() == 0 || u64::from(rw.max_op_blocks()) >= rw.nblocks() {
        println!(
            "# first large operation: not run ({} lanes, max_op_blocks {} of {})",
            lanes_expected(),
            rw.max_op_blocks(),
            rw.nblocks()
        );
        return;
    }
    for (via, what) in [
        (Via::Submit, "SUBMIT"),
        (Via::Sync, "RW_SYNC"),
        (Via::Uring, "io_uring"),
    ] {
        let res = first_large(peer, rw_token, via, 11 + via as u64);
        t.check(
            &format!(
                "lanes: a new connection's first operation, of max_op_blocks ({what}), waits for a lane and lands"
            ),
            res,
        );
    }
}

fn first_large(peer: &str, rw_token: u64, via: Via, seed: u64) -> Result<(), String> {
    use crate::remote::{addr, control, fnv, pattern, reap, T};
    let e = |what: &'static str| move |err: std::io::Error| format!("{what}: {err}");
    let dev = Rrdma::open().map_err(e("open"))?;
    let conn = dev.connect(addr(peer, 7471), T).map_err(e("connect"))?;
    let rw = conn.import(rw_token, T).map_err(e("import"))?;
    let n = rw.max_op_blocks();
    let mut local = dev.create_region(4096, u64::from(n)).map_err(e("region"))?;
    pattern(local.as_mut_slice(), seed);
    let op = rw.op(rrdma::abi::uapi::OP_WRITE, &local, 0, 0, n, seed);
    match via {
        Via::Submit => {
            let k = dev.submit(&[op]).map_err(e("SUBMIT"))?;
            ensure(k == 1, format!("SUBMIT posted {k}"))?;
            let c = reap(&dev, 1).map_err(e("completion"))?;
            ensure(
                c.len() == 1 && c[0].status == 0,
                format!(
                    "completions {:?}",
                    c.iter().map(|c| c.status).collect::<Vec<_>>()
                ),
            )?;
        }
        Via::Sync => dev.rw_sync(&op).map_err(e("RW_SYNC"))?,
        Via::Uring => {
            let mut eng = rrdma::UringEngine::new(&dev, 8).map_err(e("ring"))?;
            let res = crate::uring::one(&mut eng, &op)?;
            let bytes = i64::from(n) * 4096;
            ensure(
                i64::from(res) == bytes,
                format!("CQE res {res}, not {bytes}"),
            )?;
        }
    }
    let on_lanes = dev.fdinfo_value("rrdma-lane-ops").unwrap_or(0);
    ensure(
        on_lanes == 1,
        format!("{on_lanes} operations on data lanes"),
    )?;
    let theirs = control(peer, &format!("checksum 0 {n}")).map_err(e("checksum"))?;
    let ours = format!("{:#x}", fnv(local.as_slice()));
    println!("# first large operation: {n} blocks, on a lane");
    ensure(theirs == ours, format!("peer {theirs}, ours {ours}"))
}
