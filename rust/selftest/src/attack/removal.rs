// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The exporter's RDMA device removed under this side's write loads, and
//! re-added: every operation completes once, the loss is reported.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrdma::Rrdma;

use super::load::{exactly_once, uring_load, write_load};
use super::peer::{agent_cmd, fresh_import};
use crate::remote::{addr, T};
use crate::uring::Ring;
use crate::{ensure, Tap};

/// Item 1b: the exporter's RDMA device goes away while this side writes.
pub(super) fn exporter_device_removal(dev: &Rrdma, t: &mut Tap, peer: &str) {
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
