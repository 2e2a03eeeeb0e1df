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
//!
//! Here the run's order; the load that must complete exactly once
//! (`load.rs`); the exporter's device removed under it (`removal.rs`);
//! refused calls and large operations (`refusal.rs`); listeners and
//! dialers on this guest (`loopback.rs`); concurrency on the peer
//! (`concurrency.rs`); protection domains and CONNECT's errnos
//! (`connect.rs`); the peer's exports and agent (`peer.rs`).

mod concurrency;
mod connect;
mod load;
mod loopback;
mod peer;
mod refusal;
mod removal;

use rrdma::Rrdma;

use concurrency::concurrency_checks;
use connect::{connect_errno_checks, pd_checks};
pub(crate) use load::{exactly_once, write_load, Tally};
use loopback::loopback_checks;
pub(crate) use peer::{agent_cmd, agent_query, fresh_import};
use refusal::refusal_checks;
use removal::exporter_device_removal;

use crate::remote::{addr, token, T};
use crate::{ensure, Tap};

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
    concurrency_checks(dev, t, peer, &conn, rw_token, quick);
    pd_checks(dev, t, peer);
    loopback_checks(dev, t, me, prov);
    drop(rw);
    crate::unexport::checks(dev, t, peer, &conn, quick);
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
