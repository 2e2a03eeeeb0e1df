// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The passive side's operations have the data lanes opened too (wire
//! version 6): a connection's own queue pair is small once lanes carry its
//! operations, on both sides, so a listener that imports over a connection
//! it accepted, from a peer that never posts an operation, must not stay
//! on it. Two files of this host: the active one connects and exports, the
//! passive one accepts, imports and READs; the READ asks the active side
//! for the lanes (`Ctrl::LanesWanted`), and both files count them up. A
//! passive side's first operation too large for the small queue pair
//! waits for the lanes the active side opens at its ask. An active side
//! whose lanes are refused (the peer stopped listening) fails such an
//! operation with `ENOSPC` once they failed, instead of waiting.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrdma::abi::errno::ENOSPC;
use rrdma::abi::uapi::{OP_READ, OP_WRITE};
use rrdma::{Access, Connection, Rrdma};

use crate::remote::{lanes_expected, T};
use crate::{caps, ensure, expect_errno, Tap};

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

/// Two files of this host, connected: the passive one accepted.
struct Pair<'a> {
    passive: &'a Rrdma,
    active: &'a Rrdma,
    /// The active file's connection.
    conn: &'a Connection<'a>,
    /// The connection the passive file accepted.
    accepted: &'a Connection<'a>,
}

/// Runs `f` on two files of this host, the passive one listening on
/// `me:port` (until `f` returns if `keep_listening`, else until it has
/// accepted) and the active one connected to it.
fn pair(
    me: &str,
    port: u16,
    keep_listening: bool,
    f: impl FnOnce(&Pair<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let me: SocketAddr = format!("{me}:{port}").parse().map_err(|_| "address")?;
    let passive = Rrdma::open().map_err(e("open"))?;
    let active = Rrdma::open().map_err(e("open"))?;
    let listener = passive.listen(me, 4).map_err(e("listen"))?;
    let conn = active.connect(me, T).map_err(e("connect"))?;
    let accepted = listener
        .accept(Some(T))
        .map_err(e("accept"))?
        .ok_or("accept: none")?;
    let _listening = keep_listening.then_some(listener);
    f(&Pair {
        passive: &passive,
        active: &active,
        conn: &conn,
        accepted: &accepted,
    })
}

/// The checks, on this host's address `me`.
pub(crate) fn checks(t: &mut Tap, me: &str) {
    let want = lanes_expected();
    let res = pair(me, 7491, true, |p| {
        let (passive, active) = (p.passive, p.active);
        let region = active.create_region(4096, 1).map_err(e("region"))?;
        let export = active
            .export(&region, Access::ReadWrite, None)
            .map_err(e("export"))?;
        let remote = p.accepted.import(export.token(), T).map_err(e("import"))?;
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
            pair(me, 7492, true, first_large),
        );
        t.check(
            "lanes: lanes refused (the peer stopped listening): an operation too large for the own queue pair fails with ENOSPC once they failed, logged; a small one still goes",
            pair(me, 7493, false, lanes_refused),
        );
    }
}

/// The passive side's first operation is a READ of `max_op_blocks` (7 MiB
/// on siw, 12 on rxe, of a 16 MiB export), more than its small own queue
/// pair takes: it waits for the lanes it asks the active side for, goes
/// on one, and reads the active side's bytes.
fn first_large(p: &Pair<'_>) -> Result<(), String> {
    let (passive, active) = (p.passive, p.active);
    let mut region = active.create_region(4096, 4096).map_err(e("region"))?;
    crate::remote::pattern(region.as_mut_slice(), 21);
    let export = active
        .export(&region, Access::ReadWrite, None)
        .map_err(e("export"))?;
    let remote = p.accepted.import(export.token(), T).map_err(e("import"))?;
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

/// The active side's lanes are refused: the passive side stopped
/// listening once it accepted, so no lane can join. Its first operation
/// too large for its small own queue pair (a WRITE of `max_op_blocks` to
/// a 16 MiB export) fails with `ENOSPC` as soon as every lane failed, not
/// at the wait's 10 s, with a log line that says why; so does the next
/// one, at once; a one-block WRITE still goes on the own queue pair.
fn lanes_refused(p: &Pair<'_>) -> Result<(), String> {
    let region = p.passive.create_region(4096, 4096).map_err(e("region"))?;
    let export = p
        .passive
        .export(&region, Access::ReadWrite, None)
        .map_err(e("export"))?;
    let remote = p.conn.import(export.token(), T).map_err(e("import"))?;
    let n = remote.max_op_blocks().min(4096);
    let mut local = p
        .active
        .create_region(4096, u64::from(n))
        .map_err(e("region"))?;
    crate::remote::pattern(local.as_mut_slice(), 23);
    for attempt in ["first", "second"] {
        let mark = caps::log_mark();
        let start = Instant::now();
        let res = p.active.rw_sync(&remote.op(OP_WRITE, &local, 0, 0, n, 0));
        let took = start.elapsed();
        println!("# lanes refused: the {attempt} WRITE of {n} blocks took {took:?}");
        expect_errno(res, ENOSPC.get()).map_err(|err| format!("the {attempt} WRITE: {err}"))?;
        ensure(
            took < Duration::from_secs(5),
            format!("the {attempt} WRITE waited {took:?} (the lanes' failure ends the wait)"),
        )?;
        caps::logged_since(mark, "needs a data lane")?;
    }
    p.active
        .rw_sync(&remote.op(OP_WRITE, &local, 0, 0, 1, 0))
        .map_err(e("a one-block WRITE"))?;
    let up = p.active.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
    ensure(up == 0, format!("{up} lanes up"))?;
    ensure(
        region.as_slice()[..4096] == local.as_slice()[..4096],
        "the one-block WRITE's bytes differ",
    )
}
