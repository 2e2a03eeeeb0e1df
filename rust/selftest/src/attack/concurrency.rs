// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Concurrency on the peer: IMPORTs at once on one connection, writers on
//! several connections, rounds of connect, import, write, disconnect.

use std::io;
use std::time::{Duration, Instant};

use rrdma::{Connection, RemoteRegion, Rrdma};

use crate::remote::{addr, control, fnv, pattern, T};
use crate::{ensure, Tap};

/// Items 11-13: concurrency on the peer. `quick` (debug kernels): the
/// writers take 6 rounds, not 30 (whose 30 MiB took 151 s of a debug siw
/// run, 2026-12-01).
pub(super) fn concurrency_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    conn: &Connection<'_>,
    rw_token: u64,
    quick: bool,
) {
    let rounds = crate::quick::fewer(quick, 30, 5);
    let res: Vec<io::Result<RemoteRegion<'_>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..48)
            .map(|_| s.spawn(|| conn.import(rw_token, Duration::from_secs(30))))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("panic"))))
            .collect()
    });
    let failed: Vec<String> = res
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    t.check(
        "48 concurrent IMPORTs on one connection all succeed",
        ensure(
            failed.is_empty(),
            format!("{} failed: {:?}", failed.len(), failed.first()),
        ),
    );
    drop(res);

    // 4 connections, a writer thread on each, reading back through the next.
    let res = (|| -> Result<(), String> {
        let conns: Vec<Connection<'_>> = (0..4)
            .map(|_| dev.connect(addr(peer, 7471), T))
            .collect::<io::Result<_>>()
            .map_err(|e| e.to_string())?;
        let imps: Vec<RemoteRegion<'_>> = conns
            .iter()
            .map(|c| c.import(rw_token, T))
            .collect::<io::Result<_>>()
            .map_err(|e| e.to_string())?;
        let errs: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4usize)
                .map(|k| {
                    let imps = &imps;
                    s.spawn(move || -> Result<(), String> {
                        let mut out = dev.create_region(4096, 64).map_err(|e| e.to_string())?;
                        let back = dev.create_region(4096, 64).map_err(|e| e.to_string())?;
                        for i in 0..rounds {
                            let n = 1 + ((i * 7 + k as u64) % 64) as u32;
                            let rb = 2048 + k as u64 * 64;
                            let bytes = n as usize * 4096;
                            pattern(&mut out.as_mut_slice()[..bytes], (k as u64) << 32 | i);
                            imps[k]
                                .write(&out, 0, rb, n)
                                .map_err(|e| format!("write {k}/{i}: {e}"))?;
                            imps[(k + 1) % 4]
                                .read(&back, 0, rb, n)
                                .map_err(|e| format!("read {k}/{i}: {e}"))?;
                            if out.as_slice()[..bytes] != back.as_slice()[..bytes] {
                                return Err(format!("thread {k} iteration {i}: data differs"));
                            }
                        }
                        // The peer's memory holds the last write.
                        let n = 1 + (((rounds - 1) * 7 + k as u64) % 64) as u32;
                        let rb = 2048 + k as u64 * 64;
                        let theirs = control(peer, &format!("checksum {rb} {n}"))
                            .map_err(|e| e.to_string())?;
                        let ours = format!("{:#x}", fnv(&out.as_slice()[..n as usize * 4096]));
                        ensure(
                            theirs == ours,
                            format!("thread {k}: peer {theirs}, ours {ours}"),
                        )
                    })
                })
                .collect();
            hs.into_iter()
                .filter_map(|h| h.join().unwrap_or(Err("panic".into())).err())
                .collect()
        });
        ensure(errs.is_empty(), errs.join("; "))
    })();
    t.check(
        "4 threads write checksummed blocks over 4 connections and read back through another",
        res,
    );

    let res = (|| -> Result<(), String> {
        let local = dev.create_region(4096, 1).map_err(|e| e.to_string())?;
        let mut slowest = Duration::ZERO;
        for i in 0..20 {
            let c = dev
                .connect(addr(peer, 7471), T)
                .map_err(|e| format!("connect {i}: {e}"))?;
            let start = Instant::now();
            let r = c
                .import(rw_token, T)
                .map_err(|e| format!("import {i} after {:?}: {e}", start.elapsed()))?;
            slowest = slowest.max(start.elapsed());
            r.write(&local, 0, 3000 + i, 1)
                .map_err(|e| format!("write {i}: {e}"))?;
            drop(r);
            c.disconnect().map_err(|e| format!("disconnect {i}: {e}"))?;
        }
        println!("# 20 rounds: slowest IMPORT {} ms", slowest.as_millis());
        Ok(())
    })();
    t.check("20 rounds of connect, import, write, disconnect", res);
}
