// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Helpers the remote checks and the other test programs share: data
//! patterns and checksums, operations, completions, errno expectations,
//! threads on local regions of their own.

use std::io;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::{Completion, Op};
use rrdma::{errno, Region, RemoteRegion, Rrdma};

use super::peer::T;

pub(crate) fn fnv(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub(crate) fn pattern(buf: &mut [u8], seed: u64) {
    // Mixed first: xorshift needs a non-zero state, and `seed | 1` alone
    // gave seeds 2k and 2k + 1 the same bytes.
    let mut x = (seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

pub(crate) fn expect_errno_any<T>(res: io::Result<T>, want: impl Into<i32>) -> Result<(), String> {
    let want = want.into();
    match res {
        Ok(_) => Err(format!("succeeded, expected errno {want}")),
        Err(e) if errno(&e) == Some(want) => Ok(()),
        Err(e) => Err(format!("got {e}, expected errno {want}")),
    }
}

pub(super) fn op(
    r: &RemoteRegion<'_>,
    l: &Region<'_>,
    opcode: u32,
    lb: u64,
    rb: u64,
    n: u32,
    ud: u64,
) -> Op {
    r.op(opcode, l, lb, rb, n, ud)
}

/// Waits up to 10 s for `n` completions.
pub(crate) fn reap(dev: &Rrdma, n: usize) -> io::Result<Vec<Completion>> {
    let mut out = Vec::new();
    let start = Instant::now();
    while out.len() < n && start.elapsed() < T {
        let mut buf = vec![Completion::zeroed(); n - out.len()];
        let k = dev.completions(&mut buf, Some(Duration::from_millis(500)))?;
        out.extend_from_slice(&buf[..k]);
    }
    Ok(out)
}

/// No completion arrives within `ms`.
pub(crate) fn quiet(dev: &Rrdma, ms: u64) -> Result<(), String> {
    let mut buf = [Completion::zeroed(); 4];
    match dev.completions(&mut buf, Some(Duration::from_millis(ms))) {
        Ok(0) => Ok(()),
        Ok(n) => Err(format!("{n} unexpected completions")),
        Err(e) => Err(e.to_string()),
    }
}

/// The iWARP write fences `dev`'s connections posted (fdinfo).
pub(crate) fn write_fences(dev: &Rrdma) -> u64 {
    dev.fdinfo_value("rrdma-write-fences").unwrap_or(0)
}

/// Runs `body(k, out, back)` on `threads` threads at once, thread `k` on
/// local regions of its own (`blocks` blocks of 4096 bytes each: `out` to
/// write from, `back` to read into), and returns each thread's result in
/// thread order: a region not created or a panic is that thread's failure.
pub(super) fn per_thread<'d, F>(
    dev: &'d Rrdma,
    threads: u64,
    blocks: u64,
    body: F,
) -> Vec<Result<(), String>>
where
    F: Fn(u64, &mut Region<'d>, &Region<'d>) -> Result<(), String> + Sync,
{
    let body = &body;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || -> Result<(), String> {
                    let mut out = dev.create_region(4096, blocks).map_err(|e| e.to_string())?;
                    let back = dev.create_region(4096, blocks).map_err(|e| e.to_string())?;
                    body(k, &mut out, &back)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Err("panicked".into())))
            .collect()
    })
}

/// Whether the guests run an iWARP provider (siw): writes then end with
/// fences; elsewhere a WRITE's completion means placement.
pub(crate) fn iwarp() -> bool {
    std::env::var("RRDMA_PROV").is_ok_and(|p| p == "siw")
}

#[cfg(test)]
mod tests {
    use super::pattern;

    #[test]
    fn neighbouring_seeds_give_different_patterns() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..256u64 {
            let mut b = [0u8; 16];
            pattern(&mut b, seed);
            assert!(seen.insert(b), "seed {seed} repeats a pattern");
        }
    }
}
