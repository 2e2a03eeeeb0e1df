// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Blocks written to the peer and read back: end-to-end integrity against
//! the peer's memory, threads on blocks of their own, and writes read back
//! at once through another connection (write fences on iWARP).

use rrdma::{RemoteRegion, Rrdma};

use super::common::{fnv, pattern, per_thread, write_fences};
use super::peer::{addr, control, T};
use crate::{expect_ok, Tap};

pub(super) fn integrity_checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    let mut out = expect_ok(dev.create_region(4096, 128)).expect("region");
    let back = expect_ok(dev.create_region(4096, 128)).expect("region");
    let mut seed = 0x1234_5678_u64;
    for (i, &(rb, n)) in [
        (0u64, 1u32),
        (1, 2),
        (5, 3),
        (17, 7),
        (40, 16),
        (100, 31),
        (130, 64),
        (0, 100),
        (192, 64),
    ]
    .iter()
    .enumerate()
    {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let bytes = n as usize * 4096;
        pattern(&mut out.as_mut_slice()[..bytes], seed);
        let res = (|| -> Result<(), String> {
            rw.write(&out, 0, rb, n)
                .map_err(|e| format!("write: {e}"))?;
            rw.read(&back, 0, rb, n).map_err(|e| format!("read: {e}"))?;
            if out.as_slice()[..bytes] != back.as_slice()[..bytes] {
                return Err("read back differs".into());
            }
            let theirs = control(peer, &format!("checksum {rb} {n}")).map_err(|e| e.to_string())?;
            let ours = format!("{:#x}", fnv(&out.as_slice()[..bytes]));
            if theirs != ours {
                return Err(format!("peer's memory checksum {theirs}, ours {ours}"));
            }
            Ok(())
        })();
        t.check(
            &format!("integrity {i}: {n} blocks at {rb}, peer memory and read-back match"),
            res,
        );
    }
}

/// Four threads, each `iters` write/read round trips on its own blocks.
pub(super) fn thread_checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>, iters: u64) {
    let res = per_thread(dev, 4, 32, |k, out, back| {
        for i in 0..iters {
            let n = 1 + (i % 8) as u32;
            let rb = k * 32 + (i * 3) % (32 - u64::from(n));
            pattern(out.as_mut_slice(), k * 1000 + i);
            rw.write(out, 0, rb, n).map_err(|e| format!("write: {e}"))?;
            rw.read(back, 0, rb, n).map_err(|e| format!("read: {e}"))?;
            let b = n as usize * 4096;
            if out.as_slice()[..b] != back.as_slice()[..b] {
                return Err(format!(
                    "thread {k} iteration {i}: data differs ({})",
                    differs_how(rw, out, back, rb, n)
                ));
            }
        }
        Ok(())
    });
    for (k, r) in res.into_iter().enumerate() {
        t.check(
            &format!("thread {k}: {iters} write/read round trips on its own blocks"),
            r,
        );
    }
}

/// What a read-back that differed from `out` (blocks `rb..rb + n`) tells:
/// the first block that differs, and whether a second read 100 ms later
/// matches (a write or read that landed late) or not (lost, or another
/// writer's).
fn differs_how(
    rw: &RemoteRegion<'_>,
    out: &rrdma::Region,
    back: &rrdma::Region,
    rb: u64,
    n: u32,
) -> String {
    let first = (0..n as usize)
        .find(|&j| out.as_slice()[j * 4096..][..4096] != back.as_slice()[j * 4096..][..4096])
        .unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let again = match rw.read(back, 0, rb, n) {
        Ok(_) if out.as_slice()[..n as usize * 4096] == back.as_slice()[..n as usize * 4096] => {
            "equal"
        }
        Ok(_) => "still differs",
        Err(_) => "failed",
    };
    format!(
        "first at block {}; read again 100 ms later: {again}",
        rb + first as u64
    )
}

/// Four threads write through `rw`'s connection at once (their writes
/// share write fences on iWARP: group commit) and read each write back
/// through a second connection, another queue pair whose READs nothing
/// orders after the first one's WRITEs: an acknowledged write must already
/// be placed in the exporter's memory, which on iWARP only its fence
/// shows (a WRITE completes once sent). `iters` writes per thread.
pub(super) fn fence_visibility_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    rw_token: u64,
    rw: &RemoteRegion<'_>,
    iters: u64,
) {
    let other = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => return t.check("a second connection", Err(e.to_string())),
    };
    let rw2 = match other.import(rw_token, T) {
        Ok(r) => r,
        Err(e) => return t.check("a second import", Err(e.to_string())),
    };
    let fences = write_fences(dev);
    let res = per_thread(dev, 4, 16, |k, out, back| {
        for i in 0..iters {
            let n = 1 + (i % 4) as u32;
            let rb = 128 + k * 16 + (i * 5) % (16 - u64::from(n));
            pattern(out.as_mut_slice(), k * 7919 + i);
            rw.write(out, 0, rb, n).map_err(|e| format!("write: {e}"))?;
            rw2.read(back, 0, rb, n).map_err(|e| format!("read: {e}"))?;
            let b = n as usize * 4096;
            if out.as_slice()[..b] != back.as_slice()[..b] {
                return Err(format!(
                    "iteration {i}: blocks {rb}..{} read through the other connection differ",
                    rb + u64::from(n)
                ));
            }
        }
        Ok(())
    });
    println!(
        "# {} writes from 4 threads: {} write fences",
        4 * iters,
        write_fences(dev) - fences
    );
    for (k, r) in res.into_iter().enumerate() {
        t.check(
            &format!(
                "thread {k}: {iters} writes, each read back at once through another connection"
            ),
            r,
        );
    }
}
