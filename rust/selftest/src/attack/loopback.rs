// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A listener of this guest and dialers to it: LISTEN while a connection
//! lives, exports restricted to a connection, UNLISTEN under a flood.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rrdma::abi::errno::ENOENT;
use rrdma::abi::uapi::{Export as ExportArg, ACCESS_READ};
use rrdma::Rrdma;

use crate::remote::{addr, expect_errno_any, T};
use crate::{ensure, expect_errno, Tap};

/// Items 6, 10, 14: on this guest, a listener and dialers to it. Item 10
/// (UNLISTEN under a connect flood) runs on rxe only: siw's connection
/// manager crashes when its listener goes while connect requests arrive
/// (Documentation/rrdma.rst, siw's listener teardown).
pub(super) fn loopback_checks(dev: &Rrdma, t: &mut Tap, me: &str, prov: &str) {
    let dialer = Rrdma::open().expect("open");
    // 6: LISTEN's error path while a connection of that listener lives.
    let res = (|| -> Result<(), String> {
        let live = |d: &Rrdma| d.fdinfo_value("rrdma-connections-live").unwrap_or(u64::MAX);
        let (live0, dialed0) = (live(dev), live(&dialer));
        let l = dev
            .listen(addr("0.0.0.0", 7482), 0)
            .map_err(|e| e.to_string())?;
        let h = std::thread::scope(|s| {
            let c = s.spawn(|| dialer.connect(addr(me, 7482), T));
            let a = l.accept(Some(T));
            (c.join(), a)
        });
        let (Ok(Ok(c)), Ok(Some(a))) = h else {
            return Err("loopback connect/accept failed".into());
        };
        let again = expect_errno_any(dev.listen(addr("0.0.0.0", 7482), 0), libc::EADDRNOTAVAIL);
        // The connections end before the listener: siw (7.3) has crashed
        // in its connection manager's work (a page fault under
        // siw_cm_work_handler()'s wake_up) when a listener and its only
        // connection closed together (Documentation/rrdma.rst, siw's
        // listener teardown). Item 10 (rxe only) closes a listener
        // under live connections.
        drop((c, a));
        for _ in 0..50 {
            if live(dev) == live0 && live(&dialer) == dialed0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(l);
        again
    })();
    t.check(
        "listen twice while the first listener has a connection: EADDRNOTAVAIL",
        res,
    );
    // 14: an export restricted to one connection; serials are not reused.
    let res = (|| -> Result<(), String> {
        let l = dev
            .listen(addr("0.0.0.0", 7483), 0)
            .map_err(|e| e.to_string())?;
        let pair = || -> Result<_, String> {
            std::thread::scope(|s| {
                let c = s.spawn(|| dialer.connect(addr(me, 7483), T));
                let a = l
                    .accept(Some(T))
                    .map_err(|e| e.to_string())?
                    .ok_or("no accept")?;
                let c = c.join().map_err(|_| "panic")?.map_err(|e| e.to_string())?;
                Ok((c, a))
            })
        };
        let region = dev.create_region(4096, 4).map_err(|e| e.to_string())?;
        let (c1, a1) = pair()?;
        let (c2, a2) = pair()?;
        let e = dev
            .export_raw(&ExportArg {
                region: region.handle(),
                access: ACCESS_READ,
                conn: a1.handle(),
                ..ExportArg::zeroed()
            })
            .map_err(|e| e.to_string())?;
        c1.import(e.token, T)
            .map_err(|e| format!("import over the named connection: {e}"))?;
        expect_errno(c2.import(e.token, T), ENOENT)
            .map_err(|e| format!("other connection: {e}"))?;
        drop((c1, a1, c2, a2));
        for i in 0..4 {
            let (c, _a) = pair()?;
            expect_errno(c.import(e.token, T), ENOENT)
                .map_err(|e| format!("new connection {i}: {e}"))?;
        }
        dev.unexport_raw(e.token, 0).map_err(|e| e.to_string())
    })();
    t.check(
        "an export restricted to a connection: other and later connections get ENOENT",
        res,
    );
    // 10: UNLISTEN while dialers flood the listener.
    let name = "UNLISTEN during a connect flood: only accepted connections remain";
    if prov == "siw" {
        return t.skip(
            name,
            "siw's connection manager crashes on a listener destroyed under a connect flood",
        );
    }
    let res = (|| -> Result<(), String> {
        let live0 = dev
            .fdinfo_value("rrdma-connections-live")
            .map_err(|e| e.to_string())?;
        let handles0 = dev
            .fdinfo_value("rrdma-connections")
            .map_err(|e| e.to_string())?;
        let l = dev
            .listen(addr("0.0.0.0", 7484), 4)
            .map_err(|e| e.to_string())?;
        let stop = AtomicBool::new(false);
        // The dialers keep what they got, so that the accepted connection's
        // peer stays up: every connection of this file alive then is one
        // it accepted, or one without a handle.
        let held = std::sync::Mutex::new(Vec::new());
        let kept = std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(c) = dialer.connect(addr(me, 7484), Duration::from_secs(2)) {
                            held.lock().unwrap_or_else(|e| e.into_inner()).push(c);
                        }
                    }
                });
            }
            let kept = l.accept(Some(T));
            std::thread::sleep(Duration::from_millis(1500));
            drop(l);
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, Ordering::Relaxed);
            kept
        });
        let kept = kept.map_err(|e| e.to_string())?.ok_or("nothing accepted")?;
        std::thread::sleep(Duration::from_millis(1000));
        let live = dev
            .fdinfo_value("rrdma-connections-live")
            .map_err(|e| e.to_string())?;
        let handles = dev
            .fdinfo_value("rrdma-connections")
            .map_err(|e| e.to_string())?;
        let dialed = held.lock().map_or(0, |v| v.len());
        drop(kept);
        drop(held);
        std::thread::sleep(Duration::from_millis(500));
        let after = dev
            .fdinfo_value("rrdma-connections-live")
            .map_err(|e| e.to_string())?;
        println!("# UNLISTEN flood: {dialed} connections established by the dialers");
        ensure(
            handles == handles0 + 1 && live == live0 + 1 && after == live0,
            format!(
                "before: {live0} live, {handles0} handles; after UNLISTEN: {live} live, \
                 {handles} handles; after closing the accepted one: {after} live"
            ),
        )
    })();
    t.check(name, res);
}
