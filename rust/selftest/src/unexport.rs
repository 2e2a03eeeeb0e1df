// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `unexport PEER_IP PROVIDER` (and part of `attack`): UNEXPORT on the
//! exporter while this side writes, against a peer running `rrdma serve`
//! with `--control 7470` as `attack` describes.
//!
//! Every write of the load carries its operation's number
//! (`rrdma::stamp`, [`write_load`]), so no two writes carry the same bytes
//! and a write that lands after UNEXPORT returned always changes the
//! exporter's memory. The exporter (`unexport-scan`) copies the blocks as
//! soon as UNEXPORT returned and compares them with that copy over a
//! window: any block that changes was written late. A second run writes
//! through another export of the same region, still live, during the
//! window: the scan must see those writes, or it is blind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrdma::abi::errno::EKEYREVOKED;
use rrdma::{Connection, Rrdma};

use crate::attack::{exactly_once, fresh_import, write_load, Tally};
use crate::remote::{addr, control, T};
use crate::{ensure, expect_errno, Tap};

/// Blocks of the peer's region the load writes (`write_load`).
const BLOCKS: u64 = 1024;

/// How long the exporter watches its blocks after UNEXPORT returned. A
/// write the importer still had in flight could arrive as late as a
/// retransmission: rxe's acknowledgement timeout is 2.1 s
/// (`RRDMA_ACK_TIMEOUT` 19 in `shim/cm.c`), siw's TCP retransmits sooner.
const WINDOW_MS: u64 = 2500;

/// The longest the load runs before UNEXPORT. Enough to go round the
/// blocks twice on 7.3 (2000-4000 writes in 1.5 s, 900 on a busy host);
/// on debug 6.12 siw (about 270 writes in the first 1.5 s, then none for
/// seconds) a load of 10 s made siw's transmit thread trip the soft-lockup
/// detector in 2 runs of 3.
const LEAD_MAX: Duration = Duration::from_secs(4);

/// The exporter's `unexport-scan` answer: `ok key=value...`.
struct Scan {
    line: String,
    fields: HashMap<String, String>,
}

impl Scan {
    fn parse(line: String) -> Result<Self, String> {
        let mut w = line.split_whitespace();
        if w.next() != Some("ok") {
            return Err(format!("unexport-scan: '{line}'"));
        }
        let fields = w
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(Self { line, fields })
    }

    /// A numeric field (`None` if absent or `none`).
    fn num(&self, key: &str) -> Option<u64> {
        self.fields.get(key).and_then(|v| v.parse().ok())
    }
}

/// Writes through `rw` (a fresh import) for at least `lead` and until
/// `wrap` writes were posted (at most [`LEAD_MAX`]), then has the exporter revoke
/// the newest read-write export and scan for `window_ms`; the load stops
/// 300 ms after the answer.
fn load_and_scan(
    dev: &Rrdma,
    peer: &str,
    rw: &rrdma::RemoteRegion<'_>,
    lead: Duration,
    wrap: u64,
    window_ms: u64,
) -> (Tally, Result<Scan, String>) {
    let stop = AtomicBool::new(false);
    let progress = AtomicU64::new(0);
    std::thread::scope(|s| {
        let h = s.spawn(|| write_load(dev, rw, &stop, &progress, Duration::from_secs(15)));
        let start = Instant::now();
        std::thread::sleep(lead);
        // Writes posted by each further second, to tell a slow load from
        // a stalled one.
        let mut by_second = Vec::new();
        while progress.load(Ordering::Relaxed) < wrap
            && start.elapsed() < LEAD_MAX
            && !h.is_finished()
        {
            std::thread::sleep(Duration::from_millis(100));
            if start.elapsed() >= lead + Duration::from_secs(by_second.len() as u64 + 1) {
                by_second.push(progress.load(Ordering::Relaxed));
            }
        }
        println!(
            "# {} writes posted in {} ms (then by second: {by_second:?}); UNEXPORT",
            progress.load(Ordering::Relaxed),
            start.elapsed().as_millis()
        );
        let answer = control(peer, &format!("unexport-scan rw 0 {BLOCKS} {window_ms}"))
            .map_err(|e| e.to_string())
            .and_then(Scan::parse);
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap_or_default(), answer)
    })
}

/// UNEXPORT on the exporter while this side writes.
fn under_load(dev: &Rrdma, t: &mut Tap, peer: &str, conn: &Connection<'_>) {
    let (_, rw) = match fresh_import(peer, conn, "rw") {
        Ok(x) => x,
        Err(e) => return t.check("UNEXPORT under load: import", Err(e)),
    };
    // The load goes round the blocks twice first: where a checksum of
    // blocks rewritten with the same bytes would see nothing.
    let (tally, scan) = load_and_scan(
        dev,
        peer,
        &rw,
        Duration::from_millis(1500),
        2 * BLOCKS,
        WINDOW_MS,
    );
    t.check(
        "UNEXPORT under write load: every posted operation completes exactly once",
        exactly_once(&tally),
    );
    if let Ok(scan) = &scan {
        println!(
            "# UNEXPORT under write load: {} writes posted (numbered from {}) before SUBMIT \
             was refused ({:?}); exporter: {}",
            tally.posted, tally.first, tally.refused, scan.line
        );
    }
    t.check(
        "UNEXPORT under write load: no write lands in the exporter's memory after it returns",
        scan.as_ref().map_err(|e| e.clone()).and_then(|s| {
            ensure(
                s.num("changed") == Some(0) && s.num("torn") == Some(0),
                s.line.clone(),
            )
        }),
    );
    // The stamps are this load's: the scan saw what it wrote.
    t.check(
        "... and the exporter's blocks hold the load's writes, none numbered past the last posted",
        scan.as_ref().map_err(|e| e.clone()).and_then(|s| {
            let max = s.num("max");
            ensure(
                s.num("stamped").unwrap_or(0) > 0
                    && max.is_some_and(|m| {
                        m >= tally.first && m - tally.first < tally.posted && tally.ok.contains(&m)
                    }),
                format!("{} posted: {}", tally.posted, s.line),
            )
        }),
    );
    let local = dev.create_region(4096, 1).expect("region");
    t.check(
        "UNEXPORT under write load: later operations fail with EKEYREVOKED",
        expect_errno(rw.write(&local, 0, 0, 1), EKEYREVOKED),
    );
    t.check(
        "UNEXPORT under write load: the connection survives",
        fresh_import(peer, conn, "ro")
            .and_then(|(_, ro)| ro.read(&local, 0, 0, 1).map_err(|e| e.to_string())),
    );
}

/// The scan is not blind: writes through another export of the same
/// region, still live, land during its window and it sees them. The
/// window is 1 s, 5 s on debug kernels (`quick`), where siw's load posts
/// in bursts with seconds of nothing between them.
fn scan_sees_late_writes(dev: &Rrdma, t: &mut Tap, peer: &str, conn: &Connection<'_>, quick: bool) {
    let name = "UNEXPORT's scan sees writes landing after UNEXPORT returned \
                (through another export of the region, still live)";
    let imports =
        fresh_import(peer, conn, "rw").and_then(|live| Ok((live, fresh_import(peer, conn, "rw")?)));
    let ((_, live), (_, revoked)) = match imports {
        Ok(x) => x,
        Err(e) => return t.check(name, Err(e)),
    };
    // The scan revokes the newest export (`revoked`); the load goes on
    // through `live`.
    let window_ms = if quick { 5000 } else { 1000 };
    let (tally, scan) = load_and_scan(dev, peer, &live, Duration::from_millis(500), 0, window_ms);
    if let Ok(scan) = &scan {
        println!(
            "# {} writes through the live export; exporter: {}",
            tally.posted, scan.line
        );
    }
    t.check(
        name,
        scan.and_then(|s| ensure(s.num("changed").unwrap_or(0) > 0, s.line))
            .and_then(|()| exactly_once(&tally)),
    );
    drop((live, revoked));
    // `live` is the newest read-write export left.
    t.check(
        "... and UNEXPORT of the other export",
        control(peer, "unexport rw")
            .map_err(|e| e.to_string())
            .and_then(|a| ensure(a == "ok", a)),
    );
}

/// UNEXPORT under load, then the check of its scan.
pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, conn: &Connection<'_>, quick: bool) {
    under_load(dev, t, peer, conn);
    scan_sees_late_writes(dev, t, peer, conn, quick);
}

/// `unexport PEER_IP PROVIDER`: these checks alone, on a connection of
/// their own.
pub(crate) fn run(dev: &Rrdma, t: &mut Tap, peer: &str) {
    match dev.connect(addr(peer, 7471), T) {
        Ok(conn) => checks(dev, t, peer, &conn, false),
        Err(e) => t.check("connect", Err(e.to_string())),
    }
}
