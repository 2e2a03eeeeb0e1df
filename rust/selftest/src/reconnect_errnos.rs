// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Every errno a reconnecting connection's calls return, against the
//! documented table (part of `reconnect`).
//!
//! include/uapi/rrdma.h ("Reconnect"): while a connection with
//! `RRDMA_CONNECT_RECONNECT` reconnects, operations in flight at the
//! failure complete with `ECONNRESET`, and new operations and IMPORTs fail
//! with `EAGAIN` (SUBMIT's `EAGAIN` is also its full queue's). So, from
//! before the cut until after the connection is back:
//! - SUBMIT, and an io_uring command's CQE at submission: success or
//!   `EAGAIN`;
//! - a completion (read(2) or a CQE of a posted command): 0 or
//!   `ECONNRESET`;
//! - RW_SYNC and IMPORT, which wait for their answer: success, `EAGAIN`,
//!   or `ECONNRESET` when in flight at the failure; IMPORT also
//!   `ETIMEDOUT`, its own timeout, when the cut holds its request's answer
//!   back before the connection notices.
//!
//! Four workers run those calls without pause (SUBMIT batches of 16
//! one-block WRITEs, io_uring WRITEs, RW_SYNC READs, IMPORTs) while this
//! guest is cut off (netem, 100% loss) until its keepalive ends the queue
//! pair, the exporter ends its side, and the link comes back. Each result
//! is counted under the state fdinfo showed just before the call
//! (`reconnecting`, or not); anything outside the table fails the check,
//! which prints the whole census.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{EAGAIN, ECONNRESET, ETIMEDOUT};
use rrdma::abi::uapi::{Completion, OP_READ, OP_WRITE};
use rrdma::{RemoteRegion, Rrdma, UringCompletion, UringEngine};

use crate::ensure;
use crate::keepalive::{wait_for, Cut, EXPORTER_MISSES};
use crate::remote::{addr, token, T};
use crate::Tap;

/// (call, state, errno) -> count; errno 0 is success.
#[derive(Default)]
struct Census(Vec<((&'static str, &'static str, i32), u64)>);

impl Census {
    fn note(&mut self, call: &'static str, state: &'static str, errno: i32) {
        let k = (call, state, errno);
        match self.0.iter_mut().find(|(x, _)| *x == k) {
            Some((_, n)) => *n += 1,
            None => self.0.push((k, 1)),
        }
    }

    /// The entries outside the documented table.
    fn undocumented(&self) -> Vec<String> {
        let (again, reset, timedout) = (EAGAIN.get(), ECONNRESET.get(), ETIMEDOUT.get());
        self.0
            .iter()
            .filter(|((call, _, e), _)| {
                let ok: &[i32] = match *call {
                    "SUBMIT" | "io_uring submit" => &[0, again],
                    "completion" | "io_uring CQE" => &[0, reset],
                    "IMPORT" => &[0, again, reset, timedout],
                    _ => &[0, again, reset],
                };
                !ok.contains(e)
            })
            .map(|((c, s, e), n)| format!("{c} while {s}: errno {e} x{n}"))
            .collect()
    }

    fn saw(&self, call: &str, state: &str, errno: i32) -> bool {
        self.0
            .iter()
            .any(|((c, s, e), _)| *c == call && *s == state && *e == errno)
    }

    fn table(&self) -> String {
        let mut rows: Vec<String> = self
            .0
            .iter()
            .map(|((c, s, e), n)| format!("{c}/{s}/{e}:{n}"))
            .collect();
        rows.sort();
        rows.join(" ")
    }
}

fn errno_of(e: &std::io::Error) -> i32 {
    rrdma::errno(e).unwrap_or(-1)
}

/// The state of `dev`'s one connection as fdinfo tells it.
fn state(dev: &Rrdma) -> &'static str {
    match dev.fdinfo_value("rrdma-connections-reconnecting") {
        Ok(0) => "not reconnecting",
        Ok(_) => "reconnecting",
        Err(_) => "unknown",
    }
}

/// Runs the workers until `stop`, counting into `census`.
fn workers(
    dev: &Rrdma,
    conn: &rrdma::Connection<'_>,
    rw: &RemoteRegion<'_>,
    tok: u64,
    stop: &AtomicBool,
    census: &Mutex<Census>,
) {
    let note = |call, st, e| {
        if let Ok(mut c) = census.lock() {
            c.note(call, st, e);
        }
    };
    std::thread::scope(|s| {
        // SUBMIT batches of 16 WRITEs, their completions reaped.
        s.spawn(|| {
            let Ok(local) = dev.create_region(4096, 16) else {
                return note("REGION_CREATE", "setup", -1);
            };
            let mut buf = vec![Completion::zeroed(); 64];
            let (mut next, mut done) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let ops: Vec<_> = (0..16)
                    .map(|i| rw.op(OP_WRITE, &local, i, 64 + i, 1, next + i))
                    .collect();
                let st = state(dev);
                match dev.submit(&ops) {
                    Ok(n) => {
                        next += n as u64;
                        note("SUBMIT", st, 0);
                    }
                    Err(e) => note("SUBMIT", st, errno_of(&e)),
                }
                let n = dev
                    .completions(&mut buf, Some(Duration::from_millis(20)))
                    .unwrap_or(0);
                done += n as u64;
                for c in &buf[..n] {
                    note("completion", st, -c.status);
                }
            }
            // What is still in flight completes (with its status).
            let start = Instant::now();
            while done < next && start.elapsed() < 3 * T {
                let n = dev
                    .completions(&mut buf, Some(Duration::from_millis(300)))
                    .unwrap_or(0);
                done += n as u64;
                let st = state(dev);
                buf[..n]
                    .iter()
                    .for_each(|c| note("completion", st, -c.status));
            }
            if done < next {
                note("completion never came", "any", (next - done) as i32);
            }
        });
        // io_uring WRITEs, one at a time.
        s.spawn(|| {
            let Ok(local) = dev.create_region(4096, 1) else {
                return note("REGION_CREATE", "setup", -1);
            };
            let Ok(mut ring) = UringEngine::new(dev, 8) else {
                return note("io_uring setup", "setup", -1);
            };
            let mut done: Vec<UringCompletion> = Vec::new();
            let mut k = 1u64 << 32;
            while !stop.load(Ordering::Relaxed) {
                let st = state(dev);
                ring.push(&[rw.op(OP_WRITE, &local, 0, 96, 1, k)]);
                k += 1;
                let _ = ring.submit(1, Duration::from_secs(2));
                done.clear();
                ring.reap(&mut done);
                for c in &done {
                    // A refusal at submission and a posted command's
                    // completion both come as a CQE; a refusal is
                    // EAGAIN, a completion's failure ECONNRESET.
                    let call = if c.res == -EAGAIN.get() {
                        "io_uring submit"
                    } else {
                        "io_uring CQE"
                    };
                    note(call, st, -c.res.min(0));
                }
            }
        });
        // RW_SYNC READs.
        s.spawn(|| {
            let Ok(local) = dev.create_region(4096, 1) else {
                return note("REGION_CREATE", "setup", -1);
            };
            while !stop.load(Ordering::Relaxed) {
                let st = state(dev);
                let r = dev.rw_sync(&rw.op(OP_READ, &local, 0, 64, 1, 0));
                note("RW_SYNC", st, r.err().map_or(0, |e| errno_of(&e)));
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // IMPORTs of the same export.
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let st = state(dev);
                let r = conn.import(tok, Duration::from_secs(2));
                note("IMPORT", st, r.err().map_or(0, |e| errno_of(&e)));
                std::thread::sleep(Duration::from_millis(200));
            }
        });
    });
}

/// The census, on connection `conn` with import `rw` of `peer`'s rw
/// export, keepalive at `interval` with the importer's default misses.
pub(crate) fn census(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    conn: &rrdma::Connection<'_>,
    rw: &RemoteRegion<'_>,
    interval: Duration,
) {
    let Ok(tok) = token(peer, "rw") else {
        return t.check("reconnect errnos: the rw token", Err("no token".into()));
    };
    let census = Mutex::new(Census::default());
    let stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| workers(dev, conn, rw, tok, &stop, &census));
        std::thread::sleep(Duration::from_secs(1));
        let cut = Cut::new();
        let res = match &cut {
            Ok(_) => ensure(
                wait_for(Duration::from_secs(30), || state(dev) == "reconnecting"),
                "never reconnecting",
            ),
            Err(e) => Err(e.clone()),
        };
        // The exporter ends its side of the cut connection too.
        std::thread::sleep(interval * u32::from(EXPORTER_MISSES) + Duration::from_millis(1500));
        drop(cut);
        let back = res.and_then(|()| {
            ensure(
                wait_for(Duration::from_secs(30), || {
                    let Ok(l) = dev.create_region(4096, 1) else {
                        return false;
                    };
                    dev.rw_sync(&rw.op(OP_READ, &l, 0, 64, 1, 0)).is_ok()
                }),
                "not back within 30 s",
            )
        });
        // A second of normal service after the return.
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        back
    });
    let census = census.into_inner().unwrap_or_default();
    println!("# reconnect errnos: {}", census.table());
    t.check(
        "reconnect errnos: the link cut and back, the connection came back",
        outcome,
    );
    let wrong = census.undocumented();
    t.check(
        "reconnect errnos: SUBMIT, io_uring, RW_SYNC and IMPORT return only the documented \
         errnos while reconnecting",
        ensure(wrong.is_empty(), wrong.join("; ")),
    );
    t.check(
        "reconnect errnos: ... and each of them met the reconnect (EAGAIN while reconnecting)",
        ensure(
            ["SUBMIT", "RW_SYNC", "IMPORT"]
                .iter()
                .all(|c| census.saw(c, "reconnecting", EAGAIN.get())),
            census.table(),
        ),
    );
}

/// Every errno of a connection's calls through a cut and its return,
/// against the documented table (`reconnect_errnos.rs`), on a file of its
/// own: completions it leaves behind cannot reach another check's.
pub(crate) fn errno_census(t: &mut Tap, peer: &str, interval: Duration) {
    let dev = match Rrdma::open() {
        Ok(d) => d,
        Err(e) => return t.check("reconnect errnos: open /dev/rrdma", Err(e.to_string())),
    };
    let dev = &dev;
    let conn = token(peer, "rw")
        .map_err(|e| e.to_string())
        .and_then(|tok| {
            let c = dev
                .connect_opts(addr(peer, 7471), T, crate::reconnect::options(interval))
                .map_err(|e| format!("CONNECT: {e}"))?;
            Ok((c, tok))
        });
    let (conn, tok) = match conn {
        Ok(c) => c,
        Err(e) => return t.check("reconnect errnos: connect", Err(e)),
    };
    let imported = conn.import(tok, T);
    match imported {
        Ok(rw) => census(dev, t, peer, &conn, &rw, interval),
        Err(e) => t.check("reconnect errnos: import", Err(e.to_string())),
    };
}
