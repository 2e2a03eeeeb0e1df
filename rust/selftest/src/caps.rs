// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest caps SELF_IP`: the per-file and per-user caps on
//! connections, regions and exports (module parameters `max_file_*` and
//! `max_user_*`), in one guest over its own address:
//! - beyond a file's cap, `ENOSPC`; beyond the user's (its files
//!   together), `EDQUOT`, with a log line that names the parameter;
//! - what leaves a file (destroy, unexport, disconnect, close) makes room
//!   again, so nothing stays charged;
//! - another user's files are not charged for root's;
//! - a listener at its file's cap refuses the connect request, and the
//!   connecting file is given its charge back.
//!
//! The parameters are set through sysfs and put back as they were.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::process::Command;

use rrdma::abi::errno::{ECONNREFUSED, EDQUOT, ENOSPC};
use rrdma::{Access, Rrdma};

use crate::child::{open_to_all, unprivileged};
use crate::remote::T;
use crate::{ensure, expect_errno, Tap};

const PARAMS: &str = "/sys/module/rrdma/parameters";
const NAMES: [&str; 6] = [
    "max_file_conns",
    "max_file_regions",
    "max_file_exports",
    "max_user_conns",
    "max_user_regions",
    "max_user_exports",
];

/// The caps as they were, put back on drop.
struct Saved(Vec<(&'static str, String)>);

impl Saved {
    fn take() -> io::Result<Self> {
        NAMES
            .iter()
            .map(|n| Ok((*n, fs::read_to_string(format!("{PARAMS}/{n}"))?)))
            .collect::<io::Result<_>>()
            .map(Self)
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        for (n, v) in &self.0 {
            let _ = fs::write(format!("{PARAMS}/{n}"), v.trim());
        }
    }
}

/// Sets the caps: `file` and `user` per kind (connections, regions,
/// exports); 0 is the most (2^20), no cap in practice.
fn set(file: [u32; 3], user: [u32; 3]) -> Result<(), String> {
    for (n, v) in NAMES.iter().zip(file.iter().chain(user.iter())) {
        fs::write(format!("{PARAMS}/{n}"), v.to_string()).map_err(|e| format!("{n}: {e}"))?;
    }
    Ok(())
}

/// Whether the kernel log has a line with `what` since `mark` lines.
pub(crate) fn logged_since(mark: usize, what: &str) -> Result<(), String> {
    let log = kernel_log()?;
    ensure(
        log.lines().skip(mark).any(|l| l.contains(what)),
        format!("no kernel log line with '{what}'"),
    )
}

fn kernel_log() -> Result<String, String> {
    let out = Command::new("dmesg")
        .output()
        .map_err(|e| format!("dmesg: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn log_mark() -> usize {
    kernel_log().map_or(0, |l| l.lines().count())
}

/// Regions: the file's cap, then the user's across two files, another
/// user's file apart, and room again once they go.
fn regions() -> Result<(), String> {
    set([0, 3, 0], [0, 5, 0])?;
    let a = Rrdma::open().map_err(|e| e.to_string())?;
    let b = Rrdma::open().map_err(|e| e.to_string())?;
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(
            a.create_region(4096, 1)
                .map_err(|e| format!("region {i} of 3: {e}"))?,
        );
    }
    expect_errno(a.create_region(4096, 1), ENOSPC.get())
        .map_err(|e| format!("the file's 4th region (cap 3): {e}"))?;
    let mark = log_mark();
    let b1 = b.create_region(4096, 1).map_err(|e| e.to_string())?;
    let b2 = b.create_region(4096, 1).map_err(|e| e.to_string())?;
    expect_errno(b.create_region(4096, 1), EDQUOT.get())
        .map_err(|e| format!("the user's 6th region (cap 5): {e}"))?;
    logged_since(mark, "max_user_regions")?;
    // Registered memory counts as regions too.
    let mut buf = vec![0u8; 2 * 4096];
    let page = (buf.as_mut_ptr() as usize).next_multiple_of(4096);
    // SAFETY: the page lies inside `buf`, which outlives the attempt
    // (it fails, and nothing is registered).
    let r = unsafe {
        b.register_memory(
            std::ptr::NonNull::new(page as *mut u8).expect("page"),
            4096,
            4096,
        )
    };
    expect_errno(r, EDQUOT.get()).map_err(|e| format!("REGION_REGISTER at the cap: {e}"))?;
    // Another user's files are not charged for root's five, and are for
    // their own: 3 in one file and 2 in another, then EDQUOT.
    open_to_all(|| {
        unprivileged(
            1 << 20,
            || Some(()),
            |()| {
                let (Ok(f1), Ok(f2)) = (Rrdma::open(), Rrdma::open()) else {
                    return 2;
                };
                let mut held = Vec::new();
                for f in [&f1, &f1, &f1, &f2, &f2] {
                    match f.create_region(4096, 1) {
                        Ok(r) => held.push(r),
                        Err(_) => return 1,
                    }
                }
                let sixth = f2.create_region(4096, 1);
                match sixth {
                    Err(e) if e.raw_os_error() == Some(EDQUOT.get()) => 0,
                    _ => 3,
                }
            },
            "1: user 65534's own regions refused, 2: open failed, 3: its 6th region not EDQUOT",
        )
    })?;
    // Destroying one makes room in the file and for the user.
    held.pop()
        .expect("three")
        .destroy()
        .map_err(|(_, e)| format!("destroy: {e}"))?;
    let again = a
        .create_region(4096, 1)
        .map_err(|e| format!("after a destroy: {e}"))?;
    drop((again, held, b1, b2));
    drop((a, b));
    // Closed: with a user cap of 1, a new file has room for one.
    set([0, 0, 0], [0, 1, 0])?;
    let c = Rrdma::open().map_err(|e| e.to_string())?;
    let one = c
        .create_region(4096, 1)
        .map_err(|e| format!("after close, the user's first region: {e}"))?;
    expect_errno(c.create_region(4096, 1), EDQUOT.get()).map_err(|e| format!("second: {e}"))?;
    drop(one);
    Ok(())
}

/// Exports: the file's cap, the user's, and room again after UNEXPORT.
fn exports() -> Result<(), String> {
    set([0, 0, 2], [0, 0, 3])?;
    let a = Rrdma::open().map_err(|e| e.to_string())?;
    let b = Rrdma::open().map_err(|e| e.to_string())?;
    let ra = a.create_region(4096, 1).map_err(|e| e.to_string())?;
    let rb = b.create_region(4096, 1).map_err(|e| e.to_string())?;
    let e1 = a
        .export(&ra, Access::ReadOnly, None)
        .map_err(|e| e.to_string())?;
    let e2 = a
        .export(&ra, Access::ReadOnly, None)
        .map_err(|e| e.to_string())?;
    let mark = log_mark();
    expect_errno(a.export(&ra, Access::ReadOnly, None), ENOSPC.get())
        .map_err(|e| format!("the file's 3rd export (cap 2): {e}"))?;
    logged_since(mark, "max_file_exports")?;
    let e3 = b
        .export(&rb, Access::ReadOnly, None)
        .map_err(|e| e.to_string())?;
    expect_errno(b.export(&rb, Access::ReadOnly, None), EDQUOT.get())
        .map_err(|e| format!("the user's 4th export (cap 3): {e}"))?;
    drop(e1);
    let e4 = b
        .export(&rb, Access::ReadOnly, None)
        .map_err(|e| format!("after an UNEXPORT: {e}"))?;
    drop((e2, e3, e4, ra, rb));
    Ok(())
}

/// Connections: the connecting file's own cap (its third connect goes to
/// a listener with room), a listener at its file's cap refusing the
/// request (the peer gets `ECONNREFUSED`, not the cap's errno, which
/// would name its own file's), and the user's cap.
fn conns(me: &str) -> Result<(), String> {
    let at = |port: u16| -> Result<SocketAddr, String> {
        format!("{me}:{port}").parse().map_err(|e| format!("{e}"))
    };
    let (p1, p2) = (at(7491)?, at(7492)?);
    set([2, 0, 0], [0, 0, 0])?;
    let open = || Rrdma::open().map_err(|e| e.to_string());
    let (l1, l2, c, d, e) = (open()?, open()?, open()?, open()?, open()?);
    let (k1, k2) = (listen(&l1, p1)?, listen(&l2, p2)?);
    let c1 = c.connect(p1, T).map_err(|e| format!("connect 1: {e}"))?;
    let a1 = accept(&k1)?;
    let c2 = c.connect(p2, T).map_err(|e| format!("connect 2: {e}"))?;
    let a2 = accept(&k2)?;
    quiet_log();
    let mark = log_mark();
    expect_errno(c.connect(p1, T), ENOSPC.get())
        .map_err(|e| format!("the file's 3rd connection (cap 2; the listener has room): {e}"))?;
    logged_since(mark, "CONNECT: the file holds 2 connections")?;
    // Listener 1's file reaches its cap with d's; e's is refused there.
    let d1 = d.connect(p1, T).map_err(|e| format!("connect d: {e}"))?;
    let a3 = accept(&k1)?;
    quiet_log();
    let mark = log_mark();
    expect_errno(e.connect(p1, T), ECONNREFUSED)
        .map_err(|e| format!("a connect to a listener at its file's cap: {e}"))?;
    logged_since(mark, "max_file_conns")?;
    // Everything closed and a cap of 1: e's file was given back the charge
    // of its refused connection, or this connect fails.
    drop((c1, a1, c2, a2, d1, a3));
    set([1, 0, 0], [0, 0, 0])?;
    let e1 = e
        .connect(p2, T)
        .map_err(|e| format!("after a refused connect and a close: {e}"))?;
    let a4 = accept(&k2)?;
    // The user's cap of 2: e1 and a4 hold it; c's file has room of its own.
    set([0, 0, 0], [2, 0, 0])?;
    quiet_log();
    let mark = log_mark();
    expect_errno(c.connect(p1, T), EDQUOT.get())
        .map_err(|e| format!("the user's 3rd connection (cap 2): {e}"))?;
    logged_since(mark, "CONNECT: the user's files hold 2 connections")?;
    drop((e1, a4, k1, k2));
    Ok(())
}

fn listen(l: &Rrdma, p: SocketAddr) -> Result<rrdma::Listener<'_>, String> {
    l.listen(p, 16).map_err(|e| format!("listen: {e}"))
}

fn accept<'a>(k: &rrdma::Listener<'a>) -> Result<rrdma::Connection<'a>, String> {
    k.accept(Some(T))
        .map_err(|e| format!("accept: {e}"))?
        .ok_or_else(|| "accept: none".to_string())
}

/// Lets the module's log rate limit (10 lines in 5 s, shared by all its
/// lines) start afresh, so that the line a check looks for is not the
/// one it drops.
fn quiet_log() {
    std::thread::sleep(std::time::Duration::from_secs(5));
}

pub(crate) fn checks(t: &mut Tap, me: &str) {
    let saved = match Saved::take() {
        Ok(s) => s,
        Err(e) => return t.check("caps: the module parameters", Err(e.to_string())),
    };
    t.check(
        "caps: regions beyond the file's cap ENOSPC, beyond the user's EDQUOT (logged), another user apart, room again after destroy and close",
        regions(),
    );
    t.check(
        "caps: exports beyond the file's cap ENOSPC (logged), beyond the user's EDQUOT, room again after UNEXPORT",
        exports(),
    );
    t.check(
        "caps: connections beyond the file's cap ENOSPC, a listener at its cap refuses (logged) and gives the charge back, beyond the user's EDQUOT",
        conns(me),
    );
    drop(saved);
    t.check(
        "caps: the parameters are back to their defaults",
        fs::read_to_string(format!("{PARAMS}/max_file_exports"))
            .map_err(|e| e.to_string())
            .and_then(|v| ensure(v.trim() == "4096", format!("max_file_exports is {v}"))),
    );
}
