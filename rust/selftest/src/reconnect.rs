// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Reconnect against `rrdma serve` on the other guest (part of `attack`):
//! a connection with `RRDMA_CONNECT_RECONNECT` whose link is cut (this
//! guest's outgoing packets dropped, as in `keepalive.rs`) and comes back.
//!
//! - While cut: the importer's keepalive ends the queue pair; operations
//!   in flight complete with `ECONNRESET`, exactly once each; new ones fail
//!   with `EAGAIN` (through an IOPOLL ring too, at once); fdinfo counts
//!   the connection as reconnecting.
//! - Once back: the same handles work again, the blocks written before the
//!   cut read back unchanged, the first fence fails with `ECONNRESET` on
//!   iWARP (writes sent before the cut, unconfirmed) and the next
//!   succeeds, and an import whose export was revoked during
//!   the outage fails with `EKEYREVOKED`. The time to come back is printed.
//! - With a budget of two attempts and the link left cut, the connection
//!   ends for good with the last attempt's errno.
//! - DISCONNECT while reconnecting, between attempts or during one, ends
//!   it (during a siw attempt, once siw's blocking TCP connect returns),
//!   leaking nothing.
//!
//! The exporter's keepalive is set short (the agent), so that it ends its
//! side of each cut connection (with more misses than the importer's, as in
//! `keepalive.rs`, so that the importer notices first); this guest's reconnect parameters are set
//! through sysfs for the budget check and restored.

use std::time::{Duration, Instant};

use rrdma::abi::errno::{EAGAIN, ECONNRESET, EKEYREVOKED};
use rrdma::abi::uapi::OP_READ;
use rrdma::{ConnectOptions, Keepalive, Region, RemoteRegion, Rrdma, UringEngine};

use crate::attack::agent_cmd;
use crate::ensure;
use crate::keepalive::{wait_for, Cut, EXPORTER_MISSES, MISSES};
use crate::param::ModParam;
use crate::remote::{addr, control, quiet, reap, token, T};
use crate::Tap;

/// How long an operation waits for the reconnect before the check fails.
const BACK_WITHIN: Duration = Duration::from_secs(30);
/// A DISCONNECT while reconnecting: at once between attempts; during one,
/// after the provider's connect call returns (siw's blocks in TCP's connect,
/// bounded by `SYN_RETRIES`: 3 s), and the teardown (2.8 s in all on
/// debug 6.12 siw, 2026-11): not the 72 s of TCP's default retries.
const DISCONNECT_WITHIN: Duration = Duration::from_secs(8);
/// How long siw's connect call blocks toward a cut link with
/// `SYN_RETRIES` (3 s: a SYN, one retry after 1 s, the end 2 s later).
const SIW_CONNECT: Duration = Duration::from_secs(4);

/// A READ through an IOPOLL ring while the connection reconnects: its CQE
/// says `EAGAIN`, within 5 s (an io-wq worker's start is slow under
/// KASAN; the link stays cut longer). (io-wq issued an IOPOLL ring's
/// command again as long as the issue said `EAGAIN`: it came only once
/// the connection was back, with its status.)
fn iopoll_eagain(dev: &Rrdma, rw: &RemoteRegion<'_>, local: &Region) -> Result<(), String> {
    let mut eng = UringEngine::with_iopoll(dev, 8).map_err(|e| format!("IOPOLL ring: {e}"))?;
    let start = Instant::now();
    let res = crate::uring::one(&mut eng, &rw.op(OP_READ, local, 4, 0, 1, 300))?;
    let took = start.elapsed();
    ensure(
        res == -EAGAIN.get() && took < Duration::from_secs(5),
        format!("res {res} after {} ms", took.as_millis()),
    )
}

fn errno(r: &std::io::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// A sysfs module parameter of this guest's rrdma.
/// TCP's SYN retries while the checks run: siw connects with a blocking
/// TCP connect in `rdma_connect()`, so an attempt toward a cut link lasts
/// until TCP gives up (72 s measured with the default 6 retries, whatever
/// the attempt's timeout). One retry (after 1 s) ends it after 3 s.
const SYN_RETRIES: &str = "1";
const SYN_RETRIES_PATH: &str = "/proc/sys/net/ipv4/tcp_syn_retries";

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, quick: bool) {
    let interval = Duration::from_millis(if quick { 1000 } else { 300 });
    let syn_retries = std::fs::read_to_string(SYN_RETRIES_PATH).unwrap_or_default();
    t.check(
        "reconnect: TCP gives up a connect after one SYN retry (siw's attempts)",
        std::fs::write(SYN_RETRIES_PATH, SYN_RETRIES).map_err(|e| e.to_string()),
    );
    t.check(
        "reconnect: the exporter takes short keepalive settings",
        agent_cmd(
            peer,
            &format!("keepalive {} {EXPORTER_MISSES}", interval.as_millis()),
        ),
    );
    comes_back(dev, t, peer, interval);
    crate::reconnect_errnos::errno_census(t, peer, interval);
    budget_runs_out(dev, t, peer, interval);
    disconnect_while_waiting(dev, t, peer, interval, Duration::ZERO, "between attempts");
    let during = Duration::from_millis(500);
    disconnect_while_waiting(dev, t, peer, interval, during, "during an attempt");
    t.check(
        "reconnect: the exporter's settings come back",
        agent_cmd(peer, "keepalive restore"),
    );
    fenced(dev, t, peer, interval);
    t.check(
        "reconnect: TCP's SYN retries come back",
        std::fs::write(SYN_RETRIES_PATH, syn_retries.trim()).map_err(|e| e.to_string()),
    );
}

pub(crate) fn options(interval: Duration) -> ConnectOptions {
    ConnectOptions {
        keepalive: Keepalive::Every {
            interval,
            misses: MISSES,
        },
        reconnect: true,
    }
}

/// Runs `op` until it stops failing with `EAGAIN` (or `ECONNRESET`: a
/// second failure), for at most `BACK_WITHIN`.
fn until_back(mut op: impl FnMut() -> std::io::Result<()>) -> std::io::Result<()> {
    let start = Instant::now();
    loop {
        let r = op();
        let e = errno(&r);
        if (e != EAGAIN.get() && e != ECONNRESET.get()) || start.elapsed() > BACK_WITHIN {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn comes_back(dev: &Rrdma, t: &mut Tap, peer: &str, interval: Duration) {
    let reconnects0 = dev.fdinfo_value("rrdma-reconnects").unwrap_or(0);
    // A second export, revoked during the outage.
    let doomed = match control(peer, "export rw") {
        Ok(tok) => u64::from_str_radix(tok.trim_start_matches("0x"), 16).ok(),
        Err(_) => None,
    };
    let tok = token(peer, "rw");
    let (Some(doomed), Ok(tok)) = (doomed, tok) else {
        return t.check("reconnect: two exports of the peer", Err("no token".into()));
    };
    let conn = match dev.connect_opts(addr(peer, 7471), T, options(interval)) {
        Ok(c) => c,
        Err(e) => return t.check("reconnect: connect", Err(e.to_string())),
    };
    let (rw, gone): (RemoteRegion<'_>, RemoteRegion<'_>) =
        match (conn.import(tok, T), conn.import(doomed, T)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                return t.check(
                    "reconnect: import both",
                    Err(format!("{:?} {:?}", a.err(), b.err())),
                )
            }
        };
    let mut local = match dev.create_region(4096, 8) {
        Ok(r) => r,
        Err(e) => return t.check("reconnect: a local region", Err(e.to_string())),
    };
    // Acknowledged writes that must survive: blocks 0..4 of the peer.
    let pattern: Vec<u8> = (0..4 * 4096u32).map(|i| (i * 7 + 13) as u8).collect();
    local.as_mut_slice()[..pattern.len()].copy_from_slice(&pattern);
    t.check(
        "reconnect: blocks written before the cut",
        rw.write(&local, 0, 0, 4).map_err(|e| e.to_string()),
    );
    // Writes that complete once sent, and no fence: on iWARP the cut may
    // lose them, and the first fence after it says so.
    t.check(
        "reconnect: two writes that complete once sent, before the cut",
        (5..7u64).try_for_each(|b| {
            dev.rw_sync(&rw.write_sent_op(&local, 0, b, 1, 0))
                .map_err(|e| e.to_string())
        }),
    );
    // The export goes while this guest is cut off: after the importer's
    // limit, before the link comes back.
    let exporter_limit = interval * u32::from(EXPORTER_MISSES);
    let revoke_at = interval * u32::from(MISSES) + interval * 2;
    t.check(
        "reconnect: the exporter revokes the second export during the outage",
        control(peer, &format!("unexport-in {} rw", revoke_at.as_millis()))
            .map_err(|e| e.to_string())
            .and_then(|a| ensure(a == "ok", a)),
    );
    let cut = match Cut::new() {
        Ok(c) => c,
        Err(e) => return t.check("reconnect: cut this guest off", Err(e)),
    };
    let start = Instant::now();
    let ops: Vec<_> = (0..8u64)
        .map(|i| rw.op(OP_READ, &local, 4 + i % 4, i, 1, 200 + i))
        .collect();
    let posted = dev.submit(&ops);
    let r = rw.read(&local, 4, 0, 1);
    println!(
        "# reconnect: the importer noticed the cut after {} ms",
        start.elapsed().as_millis()
    );
    t.check(
        "reconnect: an operation in flight at the failure ends with ECONNRESET",
        ensure(errno(&r) == ECONNRESET.get(), format!("{r:?}")),
    );
    let flushed = match posted {
        Ok(8) => reap(dev, 8).map_err(|e| e.to_string()).and_then(|got| {
            let mut ids: Vec<u64> = got.iter().map(|c| c.user_data).collect();
            ids.sort_unstable();
            ensure(
                ids == (200..208).collect::<Vec<_>>()
                    && got.iter().all(|c| c.status == -ECONNRESET.get()),
                format!("{got:?}"),
            )?;
            quiet(dev, 300)
        }),
        other => Err(format!("SUBMIT: {other:?}")),
    };
    t.check(
        "reconnect: ... and so do the 8 in flight, each exactly once",
        flushed,
    );
    let w = rw.write(&local, 0, 0, 1);
    t.check(
        "reconnect: while reconnecting, new operations fail with EAGAIN",
        ensure(errno(&w) == EAGAIN.get(), format!("{w:?}")),
    );
    t.check(
        "reconnect: ... and so does an IOPOLL io_uring command, within 5 s",
        iopoll_eagain(dev, &rw, &local),
    );
    t.check(
        "reconnect: ... and fdinfo counts the connection as reconnecting",
        dev.fdinfo_value("rrdma-connections-reconnecting")
            .map_err(|e| e.to_string())
            .and_then(|n| ensure(n == 1, format!("{n}"))),
    );
    // The exporter ends its side, and the revoke is due, before the link
    // comes back.
    let back_at = (exporter_limit + Duration::from_millis(1500)).max(revoke_at + interval * 2);
    std::thread::sleep(back_at.saturating_sub(start.elapsed()));
    drop(cut);
    let up = Instant::now();
    let r = until_back(|| rw.read(&local, 4, 0, 4));
    println!(
        "# reconnect: back {} ms after the link came back ({} ms after the cut)",
        up.elapsed().as_millis(),
        start.elapsed().as_millis()
    );
    t.check(
        "reconnect: once the link is back, the same import works again",
        r.map_err(|e| e.to_string()),
    );
    t.check(
        "reconnect: ... and the blocks written before the cut are intact",
        ensure(
            local.as_slice()[4 * 4096..8 * 4096] == pattern[..],
            "blocks differ",
        ),
    );
    // iWARP: the sent writes were never shown placed. RoCE: their
    // completion was their acknowledgement, placed.
    let f = rw.fence();
    let want = if crate::remote::iwarp() {
        ECONNRESET.get()
    } else {
        0
    };
    t.check(
        &format!("reconnect: the first fence after it fails with errno {want} (sent writes unconfirmed; 0: RoCE)"),
        ensure(errno(&f) == want, format!("{f:?}")),
    );
    let f = rw.fence();
    t.check(
        "reconnect: ... once: the next fence succeeds",
        ensure(errno(&f) == 0, format!("{f:?}")),
    );
    let g = until_back(|| gone.read(&local, 4, 0, 1));
    t.check(
        "reconnect: an import revoked during the outage fails with EKEYREVOKED",
        ensure(errno(&g) == EKEYREVOKED.get(), format!("{g:?}")),
    );
    let counts = (
        dev.fdinfo_value("rrdma-reconnects").unwrap_or(0),
        dev.fdinfo_value("rrdma-connections-reconnecting")
            .unwrap_or(9),
    );
    t.check(
        "reconnect: fdinfo counts one reconnect, none under way",
        ensure(
            counts == (reconnects0 + 1, 0),
            format!(
                "reconnects {reconnects0} -> {}, reconnecting {}",
                counts.0, counts.1
            ),
        ),
    );
    drop(gone);
    drop(rw);
    t.check(
        "reconnect: the reconnected connection disconnects cleanly",
        conn.disconnect().map_err(|e| e.to_string()),
    );
}

/// The fence: with the exporter's keepalive back at its default (30 s),
/// the exporter still holds the old connection when the importer, which
/// noticed the cut, reconnects. The old one must be gone by the time the
/// new one works: ended by the fence (`rrdma-connections-replaced`), or by
/// the old connection's own disconnect if the provider delivered it first
/// (siw's FIN and rxe's DREQ are retransmitted once the link is back, and
/// may beat the new request). A write in flight at the cut that lands late
/// would overwrite what the new connection wrote: the block is checked.
fn fenced(dev: &Rrdma, t: &mut Tap, peer: &str, interval: Duration) {
    let live = || crate::remote::peer_count(peer, "rrdma-connections-live");
    let replaced = || crate::remote::peer_count(peer, "rrdma-connections-replaced");
    let r = (|| -> Result<(), String> {
        let (live0, replaced0) = (live()?, replaced()?);
        let tok = token(peer, "rw").map_err(|e| e.to_string())?;
        let conn = dev
            .connect_opts(addr(peer, 7471), T, options(interval))
            .map_err(|e| format!("connect: {e}"))?;
        let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
        let mut local = dev.create_region(4096, 2).map_err(|e| e.to_string())?;
        local.as_mut_slice()[..4096].fill(0x01);
        let cut = Cut::new()?;
        // Fails once the importer's keepalive gives up (ECONNRESET); the
        // exporter's keepalive lasts 30 s.
        let w = rw.write(&local, 0, 6, 1);
        ensure(
            errno(&w) == ECONNRESET.get(),
            format!("write at the cut: {w:?}"),
        )?;
        drop(cut);
        local.as_mut_slice()[..4096].fill(0x02);
        until_back(|| rw.write(&local, 0, 6, 1)).map_err(|e| format!("after the cut: {e}"))?;
        // The old connection's teardown runs on the exporter's work queue.
        let mut n = live()?;
        wait_for(Duration::from_secs(2), || {
            n = live().unwrap_or(n);
            n <= live0 + 1
        });
        let by_fence = replaced()? - replaced0;
        println!(
            "# reconnect: the exporter's old connection ended by {} ({n} live, {live0} before)",
            if by_fence == 1 {
                "the fence"
            } else {
                "its own disconnect"
            }
        );
        ensure(
            n <= live0 + 1,
            format!("{n} live on the exporter, {live0} before"),
        )?;
        ensure(by_fence <= 1, format!("{by_fence} replaced"))?;
        rw.read(&local, 1, 6, 1).map_err(|e| e.to_string())?;
        ensure(
            local.as_slice()[4096..].iter().all(|&b| b == 0x02),
            "the block holds the write from before the cut",
        )?;
        drop(rw);
        conn.disconnect().map_err(|e| format!("disconnect: {e}"))
    })();
    t.check(
        "reconnect: the exporter's old connection is gone once the new one works (fence)",
        r,
    );
}

fn budget_runs_out(dev: &Rrdma, t: &mut Tap, peer: &str, interval: Duration) {
    let set = ModParam::set("reconnect_attempts", "2")
        .and_then(|a| ModParam::set("reconnect_delay_ms", "100").map(|d| (a, d)));
    let (attempts, delay) = match set {
        Ok(s) => s,
        Err(e) => return t.check("reconnect: a budget of 2 attempts", Err(e)),
    };
    let gave_up0 = dev.fdinfo_value("rrdma-reconnect-gave-up").unwrap_or(0);
    // Each attempt is bounded by the connection's timeout.
    let timeout = Duration::from_millis(1000);
    let r = (|| -> Result<(), String> {
        let tok = token(peer, "rw").map_err(|e| e.to_string())?;
        let conn = dev
            .connect_opts(addr(peer, 7471), timeout, options(interval))
            .map_err(|e| format!("connect: {e}"))?;
        let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
        let local = dev.create_region(4096, 1).map_err(|e| e.to_string())?;
        let _cut = Cut::new()?;
        let start = Instant::now();
        // Each attempt lasts its timeout, or on siw as long as the blocking
        // TCP connect (about 3 s with `SYN_RETRIES`), and a delay of at
        // most 200 ms comes before the first, 400 ms before the second.
        let attempt = timeout.max(SIW_CONNECT);
        let limit = interval * u32::from(MISSES) + 2 * attempt + Duration::from_millis(600);
        let mut last = 0;
        let ended = wait_for(limit + Duration::from_secs(5), || {
            last = errno(&rw.read(&local, 0, 0, 1));
            last != EAGAIN.get() && last != ECONNRESET.get()
        });
        println!(
            "# reconnect: with 2 attempts, the connection ended after {} ms with errno {last} (limit {} ms)",
            start.elapsed().as_millis(),
            limit.as_millis()
        );
        ensure(ended && last != 0, format!("still errno {last}"))?;
        // Counted when the last teardown ends, after the errno shows (on
        // siw, once the attempt's blocking connect returns).
        let (mut gave_up, mut waiting) = (0, 0);
        wait_for(SIW_CONNECT, || {
            gave_up = dev.fdinfo_value("rrdma-reconnect-gave-up").unwrap_or(0);
            waiting = dev
                .fdinfo_value("rrdma-connections-reconnecting")
                .unwrap_or(9);
            gave_up == gave_up0 + 1 && waiting == 0
        });
        ensure(
            gave_up == gave_up0 + 1 && waiting == 0,
            format!("gave up {gave_up0} -> {gave_up}, reconnecting {waiting}"),
        )?;
        drop(rw);
        conn.disconnect().map_err(|e| format!("disconnect: {e}"))
    })();
    t.check(
        "reconnect: when the attempts are spent, the connection ends with the last errno",
        r,
    );
    let restored = attempts.restore().and(delay.restore());
    t.check("reconnect: this guest's parameters come back", restored);
}

/// DISCONNECT `after` the connection starts reconnecting: at once, between
/// attempts (the first delay is at least 100 ms); after 500 ms, during the
/// first attempt (the delay is at most 200 ms).
fn disconnect_while_waiting(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    interval: Duration,
    after: Duration,
    when: &str,
) {
    let live0 = dev.fdinfo_value("rrdma-connections-live").unwrap_or(0);
    let r = (|| -> Result<(), String> {
        let conn = dev
            .connect_opts(addr(peer, 7471), T, options(interval))
            .map_err(|e| format!("connect: {e}"))?;
        let _cut = Cut::new()?;
        let waiting = wait_for(
            interval * u32::from(MISSES) + Duration::from_secs(5),
            || {
                dev.fdinfo_value("rrdma-connections-reconnecting")
                    .unwrap_or(0)
                    == 1
            },
        );
        ensure(waiting, "never reconnecting")?;
        std::thread::sleep(after);
        let start = Instant::now();
        conn.disconnect().map_err(|e| format!("disconnect: {e}"))?;
        let took = start.elapsed();
        println!(
            "# reconnect: DISCONNECT {when} took {} ms",
            took.as_millis()
        );
        let live = dev.fdinfo_value("rrdma-connections-live").unwrap_or(99);
        let waiting = dev
            .fdinfo_value("rrdma-connections-reconnecting")
            .unwrap_or(9);
        ensure(
            took < DISCONNECT_WITHIN && live == live0 && waiting == 0,
            format!(
                "{} ms, live {live0} -> {live}, reconnecting {waiting}",
                took.as_millis()
            ),
        )
    })();
    t.check(
        &format!("reconnect: DISCONNECT {when} ends the connection, leaking nothing"),
        r,
    );
}
