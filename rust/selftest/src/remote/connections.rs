// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Connections beyond the first: many at once, imports up to the
//! exporter's registration limit, close with operations in flight, and
//! the peer's revoke of an export in use.

use std::io;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{EKEYREVOKED, ENOENT, ENOMEM};
use rrdma::abi::uapi::{Op, OP_READ};
use rrdma::{Connection, Rrdma};

use super::common::pattern;
use super::peer::{addr, control, T};
use crate::{ensure, expect_errno, expect_ok, Tap};

pub(super) fn many_connections(dev: &Rrdma, t: &mut Tap, peer: &str, rw_token: u64) {
    let res = (|| -> Result<(), String> {
        let mut conns = Vec::new();
        for i in 0..8 {
            conns.push(
                dev.connect(addr(peer, 7471), T)
                    .map_err(|e| format!("connect {i}: {e}"))?,
            );
        }
        let mut imports = Vec::new();
        for (i, c) in conns.iter().enumerate() {
            imports.push(
                c.import(rw_token, T)
                    .map_err(|e| format!("import {i}: {e}"))?,
            );
        }
        let mut out = dev.create_region(4096, 8).map_err(|e| e.to_string())?;
        let back = dev.create_region(4096, 8).map_err(|e| e.to_string())?;
        for (i, r) in imports.iter().enumerate() {
            pattern(out.as_mut_slice(), 77 + i as u64);
            let rb = 200 + i as u64 * 4;
            r.write(&out, 0, rb, 4)
                .map_err(|e| format!("write {i}: {e}"))?;
            // Read back through another connection than the writer's.
            let other = &imports[(i + 1) % imports.len()];
            other
                .read(&back, 0, rb, 4)
                .map_err(|e| format!("read {i}: {e}"))?;
            if out.as_slice()[..4 * 4096] != back.as_slice()[..4 * 4096] {
                return Err(format!("connection {i}: data differs"));
            }
        }
        Ok(())
    })();
    t.check(
        "8 connections at once, each writes, another reads back",
        res,
    );
}

/// On a small NIC (limit_mr=1024 on both guests): imports of the 256-block
/// export, each on a connection of its own, take 64 of the exporter's
/// registrations each (its queue pairs post nothing, so on iWARP they hold
/// no sinks) until the device has none left: that import fails with
/// ENOMEM, or that connection is refused (ECONNREFUSED: the exporter could
/// not build its queue pair); once the connections are closed the
/// registrations are back.
pub(super) fn mr_limit_checks(t: &mut Tap, peer: &str, rw_token: u64) {
    let res = (|| -> Result<usize, String> {
        let dev = Rrdma::open().map_err(|e| e.to_string())?;
        let mut held = Vec::new();
        for i in 0..32 {
            let conn = match dev.connect(addr(peer, 7471), T) {
                Ok(c) => c,
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => return Ok(held.len()),
                Err(e) => return Err(format!("connect {i}: {e}")),
            };
            let imported = conn.import(rw_token, T).map(|_| ());
            match imported {
                Ok(()) => held.push(conn),
                Err(e) if e.raw_os_error() == Some(ENOMEM.get()) => return Ok(held.len()),
                Err(e) => return Err(format!("import {i}: {e}")),
            }
        }
        Err("32 imports of 64 registrations each fit in 1024".into())
    })();
    t.check(
        "imports past the exporter's limit_mr: ENOMEM (or the connection refused)",
        // At most 16 fit (1024 / 64); fewer while the connections of the
        // checks before still hold theirs (they close in the background).
        res.and_then(|n| ensure((1..=16).contains(&n), format!("{n} imports fit"))),
    );
    // The connections above are closed: their grants go with them.
    let start = Instant::now();
    let again = loop {
        let r = (|| -> io::Result<()> {
            let dev = Rrdma::open()?;
            let conn = dev.connect(addr(peer, 7471), T)?;
            conn.import(rw_token, T).map(|_| ())
        })();
        if r.is_ok() || start.elapsed() > Duration::from_secs(20) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    t.check(
        "the registrations come back when the connections close",
        again.map_err(|e| e.to_string()),
    );
}

pub(super) fn close_in_flight(t: &mut Tap, peer: &str, rw_token: u64) {
    let start = Instant::now();
    let res = (|| -> io::Result<usize> {
        let dev = Rrdma::open()?;
        let conn = dev.connect(addr(peer, 7471), T)?;
        let rw = conn.import(rw_token, T)?;
        let local = dev.create_region(4096, 256)?;
        let ops: Vec<Op> = (0..512)
            .map(|i| rw.op(OP_READ, &local, i % 256, i % 256, 1, i))
            .collect();
        let n = dev.submit(&ops)?;
        // Everything drops here with operations in flight: close drains.
        drop((rw, conn, local));
        Ok(n)
    })();
    t.check(
        "close with operations in flight returns promptly",
        match res {
            Ok(n) if n > 0 && start.elapsed() < Duration::from_secs(20) => Ok(()),
            Ok(n) => Err(format!("{n} posted, took {:?}", start.elapsed())),
            Err(e) => Err(e.to_string()),
        },
    );
}

pub(super) fn revoke_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    conn: &Connection<'_>,
    rw_token: u64,
) {
    let local = expect_ok(dev.create_region(4096, 1)).expect("region");
    let Ok(rw) = conn.import(rw_token, T) else {
        t.check("import before revoke", Err("failed".into()));
        return;
    };
    t.check("read before revoke", expect_ok(rw.read(&local, 0, 0, 1)));
    t.check(
        "the peer unexports",
        match control(peer, "unexport rw") {
            Ok(s) if s == "ok" => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    // No operation in flight while the revoke travels: one on the wire
    // would meet the invalidated key and take the connection down.
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    let mut last = Ok(());
    while start.elapsed() < T {
        last = rw.read(&local, 0, 0, 1);
        if matches!(&last, Err(e) if e.raw_os_error() == Some(EKEYREVOKED.get())) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    t.check(
        "operations after the revoke fail: EKEYREVOKED",
        expect_errno(last, EKEYREVOKED),
    );
    t.check(
        "import of the revoked token: ENOENT",
        expect_errno(conn.import(rw_token, T), ENOENT),
    );
}
