// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `remote PEER_IP`: checks of connections, export/import and block
//! operations against a peer running
//! `rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 256 --access rw --access ro`.
//!
//! The serving side's memory is checked through its control channel
//! (`checksum FIRST COUNT`), so integrity is end to end: what this side
//! wrote is what the peer's region holds, and what it reads back. The
//! revocation check runs last: it unexports the read-write token.
//!
//! The checks by concern: connection, listener, import and export
//! arguments (`setup.rs`); blocks moved and read back (`data.rs`); batches
//! and completion delivery (`batch.rs`); bad operations (`bad_ops.rs`);
//! data lanes (`lanes.rs`); many connections, limits, close and revoke
//! (`connections.rs`); a destroyed region's memory given back
//! (`release.rs`); the process's own memory as the local side
//! (`registered.rs`); writes that complete once sent, and fences
//! (`sent.rs`). `peer.rs` and `common.rs` hold what the other
//! test programs share.

mod bad_ops;
mod batch;
mod common;
mod connections;
mod data;
mod lanes;
mod peer;
mod registered;
mod release;
mod sent;
mod setup;
mod signals;

use rrdma::abi::errno::ENOENT;
use rrdma::abi::uapi::{Op, OP_READ};
use rrdma::Rrdma;

pub(crate) use common::{expect_errno_any, fnv, iwarp, pattern, quiet, reap, write_fences};
pub(crate) use peer::{addr, control, peer_count, token, T};

use bad_ops::bad_op_checks;
use batch::batch_checks;
use common::op;
use connections::{close_in_flight, many_connections, mr_limit_checks, revoke_checks};
use data::{fence_visibility_checks, integrity_checks, thread_checks};
pub(crate) use lanes::lanes_expected;
use lanes::{first_large_checks, lane_ops_checks, lanes_up_checks};
use setup::{connect_checks, export_checks, import_checks, listen_checks};

use crate::{ensure, expect_errno, expect_ok, Tap};

/// Runs the checks against the serving peer at `peer` (an IPv4 address).
/// `quick` (debug kernels): the threads' and the overlap checks take a
/// fifth of their rounds (the full ones took 265 s of a debug siw run's
/// 507, 2026-12-01).
pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, quick: bool) {
    let fifth = |n: u64| crate::quick::fewer(quick, n, 5);
    let (rw_token, ro_token) = match (token(peer, "rw"), token(peer, "ro")) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            t.check("the peer hands out its tokens", Err(format!("{a:?} {b:?}")));
            return;
        }
    };
    connect_checks(dev, t, peer);
    listen_checks(dev, t);
    let conn = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => {
            t.check("connect", Err(e.to_string()));
            return;
        }
    };
    t.check("connect", Ok(()));
    let region = expect_ok(dev.create_region(4096, 1)).expect("region");
    import_checks(dev, t, &conn, rw_token, &region);
    let rw = conn.import(rw_token, T);
    t.check(
        "import read-write: geometry and access",
        match &rw {
            Ok(r) if r.block_size() == 4096 && r.nblocks() == 256 && r.writable() => Ok(()),
            Ok(r) => Err(format!(
                "{} x {} writable {}",
                r.block_size(),
                r.nblocks(),
                r.writable()
            )),
            Err(e) => Err(e.to_string()),
        },
    );
    let ro = conn.import(ro_token, T);
    t.check(
        "import read-only: not writable",
        match &ro {
            Ok(r) if !r.writable() => Ok(()),
            Ok(_) => Err("writable".into()),
            Err(e) => Err(e.to_string()),
        },
    );
    let (Ok(rw), Ok(ro)) = (rw, ro) else { return };
    println!("# rw import: max_op_blocks {}", rw.max_op_blocks());
    let lanes = lanes_up_checks(dev, t, &rw);
    first_large_checks(t, peer, &rw, rw_token);
    // A guest emulating a small NIC (module limit_* parameters) says what
    // its queues and page lists allow.
    if let Ok(want) = std::env::var("RRDMA_MAX_OP_BLOCKS") {
        t.check(
            "max_op_blocks as the device limits allow",
            ensure(
                want.parse() == Ok(rw.max_op_blocks()),
                format!("{} (want {want})", rw.max_op_blocks()),
            ),
        );
    }
    integrity_checks(dev, t, peer, &rw);
    release::checks(dev, t, &rw);
    registered::checks(dev, t, peer, &rw);
    batch_checks(dev, t, &rw);
    signals::checks(dev, t, &rw);
    crate::lossy::checks(dev, t, peer, rw_token);
    crate::sync_poll::checks(dev, t, peer, &rw);
    bad_op_checks(dev, t, &rw, &ro);
    crate::uring::checks(dev, t, peer, &rw);
    export_checks(dev, t, &conn);
    let lane_ops = dev.fdinfo_value("rrdma-lane-ops").unwrap_or(0);
    // More rounds on request (`RRDMA_ROUNDS`): an ordering bug across
    // queue pairs may show once in many.
    let rounds = std::env::var("RRDMA_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<u32>().ok())
        .unwrap_or(1);
    for _ in 0..rounds {
        thread_checks(dev, t, &rw, fifth(25));
        fence_visibility_checks(dev, t, peer, rw_token, &rw, fifth(50));
    }
    sent::checks(dev, t, peer, rw_token, &rw);
    crate::overlap::checks(dev, t, &rw, fifth(20), fifth(40));
    lane_ops_checks(dev, t, lanes, lane_ops);
    many_connections(dev, t, peer, rw_token);
    close_in_flight(t, peer, rw_token);
    t.check("stale import handle after UNIMPORT: ENOENT", {
        let h = ro.handle();
        drop(ro);
        expect_errno(
            dev.rw_sync(&Op {
                remote: h,
                ..op(&rw, &region, OP_READ, 0, 0, 1, 0)
            }),
            ENOENT,
        )
    });
    if std::env::var("RRDMA_MAX_OP_BLOCKS").is_ok() {
        mr_limit_checks(t, peer, rw_token);
    }
    drop(rw);
    revoke_checks(dev, t, peer, &conn, rw_token);
    drop(conn);
    drop(region);
    // Object counts, and event counts that must have stayed 0 (timeouts,
    // reconnects); the work, fence, lane-operation, sink, receive-buffer and
    // ping counts (`rrdma-work-*`, `rrdma-write-fences`, `rrdma-op-fences*`,
    // `rrdma-lane-ops`, `rrdma-sink-allocs`, `rrdma-ctrl-grown`,
    // `rrdma-keepalive-pings`) only grow, pings on
    // any connection idle for the keepalive interval (15 s in the guests,
    // which the debug kernel's slow small-NIC run reaches).
    let counts: Vec<_> = dev
        .fdinfo()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| {
            !k.starts_with("rrdma-work-")
                && k != "rrdma-write-fences"
                && !k.starts_with("rrdma-op-fences")
                && k != "rrdma-lane-ops"
                && k != "rrdma-sink-allocs"
                && k != "rrdma-ctrl-grown"
                && k != "rrdma-keepalive-pings"
        })
        .collect();
    t.check(
        "after dropping everything, fdinfo counts are all zero",
        if counts.iter().all(|(_, v)| *v == 0) && !counts.is_empty() {
            Ok(())
        } else {
            Err(format!("{counts:?}"))
        },
    );
}
