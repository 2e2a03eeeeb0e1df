// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Busy polling of synchronous operations, a check of `remote` (the
//! importing guest).
//!
//! With the module parameter `sync_poll_us` set, `RW_SYNC` polls its queue
//! pair's send CQ for that long before it sleeps, and handles what it
//! finds itself (no wake-up of the CQ's work item, none of the task). The
//! check: rounds of one-block WRITEs, each read back at once, all through
//! `RW_SYNC`, with polling on and off alternated: every block comes back
//! intact, and with polling off the task handles no completion itself
//! (fdinfo `rrdma-work-sync-polled`). How many it handled with polling on,
//! and each round's median READ latency, are printed: figures, not
//! checks (a completion is polled only if it comes within the window,
//! and these guests' round trips are milliseconds, tens of them on the
//! debug kernel).

use std::time::Instant;

use rrdma::abi::uapi::{OP_READ, OP_WRITE};
use rrdma::{Region, RemoteRegion, Rrdma};

use crate::param::ModParam;
use crate::remote::pattern;
use crate::{ensure, Tap};

const PARAM: &str = "sync_poll_us";
/// Operations (a WRITE and its READ) per round, and rounds per setting.
const OPS: u64 = 32;
const ROUNDS: u64 = 2;
const BLOCK: u32 = 4096;
/// The polling time of the rounds with polling on (the most it takes).
const POLL_US: u32 = 1000;

fn polled(dev: &Rrdma) -> u64 {
    dev.fdinfo_value("rrdma-work-sync-polled").unwrap_or(0)
}

/// One round with `sync_poll_us` at `us`: `OPS` blocks written and read
/// back one at a time. Returns the median READ latency (us) and the
/// completions the task's polling handled.
fn round(
    dev: &Rrdma,
    rw: &RemoteRegion<'_>,
    src: &mut Region<'_>,
    dst: &Region<'_>,
    us: u32,
    seed: u64,
) -> Result<(f64, u64), String> {
    ModParam::write(PARAM, &us.to_string())?;
    pattern(src.as_mut_slice(), seed);
    let polled0 = polled(dev);
    let mut lat = Vec::with_capacity(OPS as usize);
    for i in 0..OPS {
        dev.rw_sync(&rw.op(OP_WRITE, src, i, i, 1, 0))
            .map_err(|e| format!("WRITE {i}: {e}"))?;
        let t = Instant::now();
        dev.rw_sync(&rw.op(OP_READ, dst, i, i, 1, 0))
            .map_err(|e| format!("READ {i}: {e}"))?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let n = (OPS * u64::from(BLOCK)) as usize;
    ensure(
        src.as_slice()[..n] == dst.as_slice()[..n],
        format!("a block read back differs (sync_poll_us {us})"),
    )?;
    lat.sort_by(f64::total_cmp);
    Ok((lat[lat.len() / 2], polled(dev) - polled0))
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let saved = match ModParam::set(PARAM, "0") {
        Ok(p) => p,
        Err(e) => return t.check("sync_poll_us can be set", Err(e)),
    };
    let res = (|| -> Result<(), String> {
        let mut src = dev
            .create_region(BLOCK, OPS)
            .map_err(|e| format!("create_region: {e}"))?;
        let dst = dev
            .create_region(BLOCK, OPS)
            .map_err(|e| format!("create_region: {e}"))?;
        let (mut on, mut off) = ((Vec::new(), 0), (Vec::new(), 0));
        for r in 0..ROUNDS {
            let (p50, n) = round(dev, rw, &mut src, &dst, POLL_US, 2 * r)?;
            on.0.push(format!("{p50:.0}"));
            on.1 += n;
            let (p50, n) = round(dev, rw, &mut src, &dst, 0, 2 * r + 1)?;
            off.0.push(format!("{p50:.0}"));
            off.1 += n;
        }
        println!(
            "# sync polling: READ p50 {} us with sync_poll_us={POLL_US} ({} completions polled), {} us without ({})",
            on.0.join("/"),
            on.1,
            off.0.join("/"),
            off.1
        );
        ensure(
            off.1 == 0,
            format!("polling off: {} completions polled", off.1),
        )
    })();
    let restored = saved.restore();
    t.check(
        "synchronous operations with busy polling on and off move the right bytes; with it off the task polls nothing",
        res.and(restored),
    );
}
