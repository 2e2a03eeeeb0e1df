// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The passive side's operations have the data lanes opened too (wire
//! version 6): a connection's own queue pair is small once lanes carry its
//! operations, on both sides, so a listener that imports over a connection
//! it accepted, from a peer that never posts an operation, must not stay
//! on it. Two files of this host: the active one connects and exports, the
//! passive one accepts, imports and READs; the READ asks the active side
//! for the lanes (`Ctrl::LanesWanted`), and both files count them up. A
//! passive side's first operation too large for the small queue pair
//! waits for the lanes the active side opens at its ask.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::OP_READ;
use rrdma::{Access, Connection, Rrdma};

use crate::remote::{lanes_expected, T};
use crate::{ensure, Tap};

/// Lanes up in `dev`'s file once they stop changing (10 s at most) or
/// reach `want`.
fn lanes_up(dev: &Rrdma, want: u64) -> u64 {
    let start = Instant::now();
    loop {
        let up = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
        if up >= want || start.elapsed() > Duration::from_secs(10) {
            return up;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What an error of `what` says.
fn e(what: &'static str) -> impl Fn(std::io::Error) -> String {
    move |err| format!("{what}: {err}")
}

/// Runs `f` on two files of this host, the passive one listening on
/// `me:port` and the active one connected to it, with the connection the
/// passive one accepted.
fn pair(
    me: &str,
    port: u16,
    f: impl FnOnce(&Rrdma, &Rrdma, &Connection<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let me: SocketAddr = format!("{me}:{port}").parse().map_err(|_| "address")?;
    let passive = Rrdma::open().map_err(e("open"))?;
    let active = Rrdma::open().map_err(e("open"))?;
    let listener = passive.listen(me, 4).map_err(e("listen"))?;
    let _conn = active.connect(me, T).map_err(e("connect"))?;
    let accepted = listener
        .accept(Some(T))
        .map_err(e("accept"))?
        .ok_or("accept: none")?;
    f(&passive, &active, &accepted)
}

/// The checks, on this host's address `me`.
pub(crate) fn checks(t: &mut Tap, me: &str) {
    let want = lanes_expected();
    let res = pair(me, 7491, |passive, active, accepted| {
        let region = active.create_region(4096, 1).map_err(e("region"))?;
        let export = active
            .export(&region, Access::ReadWrite, None)
            .map_err(e("export"))?;
        let remote = accepted.import(export.token(), T).map_err(e("import"))?;
        std::thread::sleep(Duration::from_millis(200));
        let idle = passive.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
        ensure(idle == 0, format!("{idle} lanes up before an operation"))?;
        let local = passive.create_region(4096, 1).map_err(e("region"))?;
        passive
            .rw_sync(&remote.op(OP_READ, &local, 0, 0, 1, 0))
            .map_err(e("READ"))?;
        let (p, a) = (lanes_up(passive, want), lanes_up(active, want));
        println!(
            "# passive side's READ: {p} lanes up on its side, {a} on the active side, of {want}"
        );
        ensure(p == want && a == want, format!("{p} and {a} up"))
    });
    t.check(
        &format!(
            "lanes: the passive side's first READ has the connection's {want} data lanes opened"
        ),
        res,
    );
    if want > 0 {
        t.check(
            "lanes: the passive side's first operation, of max_op_blocks, waits for a lane and reads the active side's bytes",
            pair(me, 7492, first_large),
        );
    }
}

/// The passive side's first operation is a READ of `max_op_blocks` (7 MiB
/// on siw, 12 on rxe, of a 16 MiB export), more than its small own queue
/// pair takes: it waits for the lanes it asks the active side for, goes
/// on one, and reads the active side's bytes.
fn first_large(passive: &Rrdma, active: &Rrdma, accepted: &Connection<'_>) -> Result<(), String> {
    let mut region = active.create_region(4096, 4096).map_err(e("region"))?;
    crate::remote::pattern(region.as_mut_slice(), 21);
    let export = active
        .export(&region, Access::ReadWrite, None)
        .map_err(e("export"))?;
    let remote = accepted.import(export.token(), T).map_err(e("import"))?;
    let n = remote.max_op_blocks().min(4096);
    let local = passive
        .create_region(4096, u64::from(n))
        .map_err(e("region"))?;
    passive
        .rw_sync(&remote.op(OP_READ, &local, 0, 0, n, 0))
        .map_err(e("READ"))?;
    let on_lanes = passive.fdinfo_value("rrdma-lane-ops").unwrap_or(0);
    println!("# passive side's first READ of {n} blocks: {on_lanes} on data lanes");
    ensure(
        on_lanes == 1,
        format!("{on_lanes} operations on data lanes"),
    )?;
    let want = &region.as_slice()[..local.as_slice().len()];
    ensure(local.as_slice() == want, "the bytes read differ")
}
