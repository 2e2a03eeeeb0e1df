// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma map` and `rrdma unmap`: an export as a block device.

use std::io::{self, Write};
use std::thread::sleep;
use std::time::Duration;

use rrdma::Rrdma;

use crate::transfer::{self, Target};

/// Maps `t`'s export as `/dev/rrdmabN`, prints the path, and stays: the
/// disk uses this process's connection and goes when it ends (or when
/// `rrdma unmap N` removes it, which ends this command).
pub fn map(dev: &Rrdma, t: &Target, read_only: bool) -> io::Result<()> {
    let (_conn, import) = transfer::open(dev, t)?;
    let index = dev
        .blk_map(&import, read_only)
        .map_err(|e| io::Error::new(e.kind(), format!("BLK_MAP: {e}")))?;
    // The disk dies with this process: the OOM killer should pick
    // another (the disk may be swap, or hold a mounted file system).
    let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
    println!("/dev/rrdmab{index}");
    io::stdout().flush()?;
    // Until the disk is gone: its device number changes if the index was
    // unmapped and mapped again between two looks.
    let sys_dev = format!("/sys/block/rrdmab{index}/dev");
    let ours = std::fs::read_to_string(&sys_dev)?;
    while std::fs::read_to_string(&sys_dev).is_ok_and(|d| d == ours) {
        sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Removes `/dev/rrdmabN`.
pub fn unmap(dev: &Rrdma, index: u32, force: bool) -> io::Result<()> {
    dev.blk_unmap(index, force)
        .map_err(|e| io::Error::new(e.kind(), format!("BLK_UNMAP rrdmab{index}: {e}")))
}
