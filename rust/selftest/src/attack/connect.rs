// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Connections' own resources and CONNECT's errnos: a protection domain
//! per connection; a closed port; every local TCP port taken (siw).

use std::io;
use std::time::Duration;

use rrdma::abi::errno::ECONNREFUSED;
use rrdma::Rrdma;

use crate::remote::{addr, T};
use crate::{ensure, expect_errno, Tap};

/// Item 14: one protection domain per connection (`rdma res show pd`).
pub(super) fn pd_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let count = || -> Result<usize, String> {
        let out = std::process::Command::new("rdma")
            .args(["res", "show", "pd"])
            .output()
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("rrdma"))
            .count())
    };
    let res = (|| -> Result<(), String> {
        let before = count()?;
        let conns: Vec<_> = (0..3)
            .map(|_| dev.connect(addr(peer, 7471), T))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| e.to_string())?;
        let during = count()?;
        drop(conns);
        std::thread::sleep(Duration::from_millis(500));
        let after = count()?;
        ensure(
            during == before + 3 && after == before,
            format!(
                "PDs of rrdma: {before} before, {during} with 3 more connections, {after} after"
            ),
        )
    })();
    t.check("one protection domain per connection, freed with it", res);
}

/// Item 15: CONNECT to a closed port; local TCP ports exhausted (siw).
pub(super) fn connect_errno_checks(dev: &Rrdma, t: &mut Tap, peer: &str, prov: &str) {
    let res = (|| -> Result<(), String> {
        for i in 0..20 {
            expect_errno(dev.connect(addr(peer, 7999), T), ECONNREFUSED)
                .map_err(|e| format!("try {i}: {e}"))?;
        }
        Ok(())
    })();
    t.check("20 CONNECTs to a closed port: ECONNREFUSED each time", res);
    if prov != "siw" {
        return;
    }
    let range = "/proc/sys/net/ipv4/ip_local_port_range";
    let old = std::fs::read_to_string(range).unwrap_or_default();
    let res = (|| -> Result<(), String> {
        std::fs::write(range, "40000 40003").map_err(|e| e.to_string())?;
        let _busy: Vec<_> = (40000..=40003)
            .map(|p| std::net::TcpListener::bind(("0.0.0.0", p)))
            .collect::<io::Result<_>>()
            .map_err(|e| e.to_string())?;
        expect_errno(dev.connect(addr(peer, 7471), T), libc::EADDRNOTAVAIL)
    })();
    let _ = std::fs::write(range, old.trim());
    t.check(
        "CONNECT with every local TCP port taken (siw): EADDRNOTAVAIL",
        res,
    );
    t.check(
        "... and CONNECT works once ports are free",
        dev.connect(addr(peer, 7471), T)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    );
}
