// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma read`, `write` and `verify`: blocks between the remote region and
//! a file, through a local staging region.

use std::io::{self, Read, Write};

use rrdma::Rrdma;

use super::progress::Progress;
use super::{open, report_reconnects, retrying, Target};
use crate::stats::{checksum, fill_pattern};

/// Largest local staging region of read/write/verify, in bytes.
const STAGE_BYTES: u64 = 8 << 20;

fn stage_blocks(bs: u32, count: u64) -> u64 {
    (STAGE_BYTES / u64::from(bs)).clamp(1, count.max(1))
}

/// `read`: remote blocks to `out`.
pub fn read(
    dev: &Rrdma,
    t: &Target,
    first: u64,
    count: Option<u64>,
    out: &mut dyn Write,
    progress: bool,
) -> io::Result<u64> {
    let (_conn, remote) = open(dev, t)?;
    let count = count.unwrap_or(remote.nblocks().saturating_sub(first));
    let bs = remote.block_size();
    let stage = stage_blocks(bs, count);
    let local = dev.create_region(bs, stage)?;
    let mut bar = Progress::new(count * u64::from(bs), progress);
    let mut done = 0;
    while done < count {
        let n = (count - done).min(stage);
        retrying(t, || remote.read(&local, 0, first + done, n as u32))?;
        let bytes = (n * u64::from(bs)) as usize;
        out.write_all(&local.as_slice()[..bytes])?;
        bar.add(bytes as u64);
        done += n;
    }
    out.flush()?;
    report_reconnects(dev, t);
    Ok(count)
}

/// `write`: `input` to remote blocks from `first`; the last block is padded
/// with zeros. Returns blocks written.
pub fn write(
    dev: &Rrdma,
    t: &Target,
    first: u64,
    input: &mut dyn Read,
    progress: bool,
) -> io::Result<u64> {
    let (_conn, remote) = open(dev, t)?;
    let bs = remote.block_size();
    let stage = stage_blocks(bs, remote.nblocks());
    let mut local = dev.create_region(bs, stage)?;
    let mut bar = Progress::new(0, progress);
    let mut block = first;
    loop {
        let buf = local.as_mut_slice();
        let cap = buf.len();
        let mut filled = 0;
        while filled < cap {
            match input.read(&mut buf[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            break;
        }
        let n = (filled as u64).div_ceil(u64::from(bs));
        buf[filled..(n * u64::from(bs)) as usize].fill(0);
        if block + n > remote.nblocks() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "input is larger than the remote region",
            ));
        }
        retrying(t, || remote.write(&local, 0, block, n as u32))?;
        bar.total += filled as u64;
        bar.add(filled as u64);
        block += n;
        if filled < cap {
            break;
        }
    }
    report_reconnects(dev, t);
    Ok(block - first)
}

/// What `verify` found.
#[derive(serde::Serialize)]
pub struct Verified {
    pub blocks: u64,
    pub block_size: u32,
    pub bytes: u64,
    pub written_checksum: String,
    pub read_checksum: String,
    pub ok: bool,
}

/// `verify`: writes a pattern to `count` blocks from `first`, reads them
/// back into other pages and compares.
pub fn verify(
    dev: &Rrdma,
    t: &Target,
    first: u64,
    count: Option<u64>,
    seed: u64,
    progress: bool,
) -> io::Result<Verified> {
    let (_conn, remote) = open(dev, t)?;
    let count = count
        .unwrap_or(remote.nblocks().saturating_sub(first))
        .min(remote.nblocks().saturating_sub(first));
    let bs = remote.block_size();
    let stage = stage_blocks(bs, count);
    let mut out = dev.create_region(bs, stage)?;
    let back = dev.create_region(bs, stage)?;
    let mut bar = Progress::new(2 * count * u64::from(bs), progress);
    let (mut w_sum, mut r_sum, mut same) = (Vec::new(), Vec::new(), true);
    let mut done = 0;
    while done < count {
        let n = (count - done).min(stage);
        let bytes = (n * u64::from(bs)) as usize;
        fill_pattern(&mut out.as_mut_slice()[..bytes], seed ^ (first + done));
        retrying(t, || remote.write(&out, 0, first + done, n as u32))?;
        bar.add(bytes as u64);
        retrying(t, || remote.read(&back, 0, first + done, n as u32))?;
        bar.add(bytes as u64);
        let (a, b) = (&out.as_slice()[..bytes], &back.as_slice()[..bytes]);
        w_sum.extend_from_slice(&checksum(a).to_le_bytes());
        r_sum.extend_from_slice(&checksum(b).to_le_bytes());
        same &= a == b;
        done += n;
    }
    let (w, r) = (checksum(&w_sum), checksum(&r_sum));
    Ok(Verified {
        blocks: count,
        block_size: bs,
        bytes: count * u64::from(bs),
        written_checksum: format!("{w:#018x}"),
        read_checksum: format!("{r:#018x}"),
        ok: same && w == r,
    })
}
