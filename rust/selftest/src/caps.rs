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

use rrdma::abi::errno::{EDQUOT, ENOSPC};
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
/// exports); 0 is no cap.
fn set(file: [u32; 3], user: [u32; 3]) -> Result<(), String> {
    for (n, v) in NAMES.iter().zip(file.iter().chain(user.iter())) {
        fs::write(format!("{PARAMS}/{n}"), v.to_string()).map_err(|e| format!("{n}: {e}"))?;
    }
    Ok(())
}

/// Whether the kernel log has a line with `what` since `mark` lines.
fn logged_since(mark: usize, what: &str) -> Result<(), String> {
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

fn log_mark() -> usize {
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
    // Another user's file is not charged for root's five.
    open_to_all(|| {
        unprivileged(
            1 << 20,
            || Some(()),
            |()| {
                let Ok(own) = Rrdma::open() else { return 2 };
                let made: io::Result<Vec<_>> = (0..3).map(|_| own.create_region(4096, 1)).collect();
                match made {
                    Ok(_) => 0,
                    Err(_) => 1,
                }
            },
            "1: user 65534's own regions refused, 2: open failed",
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

/// Connections: the connecting file's cap and the user's, and a listener
/// at its file's cap refusing the request.
fn conns(me: &str) -> Result<(), String> {
    let me: SocketAddr = format!("{me}:7491").parse().map_err(|e| format!("{e}"))?;
    set([2, 0, 0], [0, 0, 0])?;
    let l = Rrdma::open().map_err(|e| e.to_string())?;
    let c = Rrdma::open().map_err(|e| e.to_string())?;
    let listener = l.listen(me, 16).map_err(|e| format!("listen: {e}"))?;
    let accept = || {
        listener
            .accept(Some(T))
            .map_err(|e| format!("accept: {e}"))?
            .ok_or_else(|| "accept: none".to_string())
    };
    let c1 = c.connect(me, T).map_err(|e| format!("connect 1: {e}"))?;
    let a1 = accept()?;
    let c2 = c.connect(me, T).map_err(|e| format!("connect 2: {e}"))?;
    let a2 = accept()?;
    expect_errno(c.connect(me, T), ENOSPC.get())
        .map_err(|e| format!("the file's 3rd connection (cap 2): {e}"))?;
    // The listener's file holds two: a third request is refused there.
    let d = Rrdma::open().map_err(|e| e.to_string())?;
    let mark = log_mark();
    let refused = d.connect(me, T);
    ensure(
        refused.is_err(),
        "a connect to a listener at its file's cap succeeded",
    )?;
    logged_since(mark, "max_file_conns")?;
    // Everything closed and a cap of 1: d's file was given back the
    // charge of its refused connection, or this connect fails.
    drop((c1, a1, c2, a2));
    set([1, 0, 0], [0, 0, 0])?;
    let d1 = d
        .connect(me, T)
        .map_err(|e| format!("after a refused connect and a close: {e}"))?;
    let a3 = accept()?;
    // The user's cap of 2: d1 and a3 hold it.
    set([0, 0, 0], [2, 0, 0])?;
    let mark = log_mark();
    expect_errno(c.connect(me, T), EDQUOT.get())
        .map_err(|e| format!("the user's 3rd connection (cap 2): {e}"))?;
    logged_since(mark, "max_user_conns")?;
    drop((d1, a3));
    Ok(())
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
