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
