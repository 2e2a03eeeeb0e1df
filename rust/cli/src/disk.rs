// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma map` and `rrdma unmap`: an export as a block device.

use std::io::{self, Write};

use rrdma::Rrdma;

use crate::transfer::{self, Target};

/// Maps `t`'s export as `/dev/rrdmabN` and prints the path. The disk
/// outlives this command: the kernel gives it a connection of its own,
/// which reconnects, until `rrdma unmap N`.
pub fn map(dev: &Rrdma, t: &Target, read_only: bool) -> io::Result<()> {
    let (_conn, import) = transfer::open(dev, t)?;
    let index = dev
        .blk_map(&import, read_only)
        .map_err(|e| io::Error::new(e.kind(), format!("BLK_MAP: {e}")))?;
    println!("/dev/rrdmab{index}");
    io::stdout().flush()
}

/// Removes `/dev/rrdmabN`.
pub fn unmap(dev: &Rrdma, index: u32, force: bool) -> io::Result<()> {
    dev.blk_unmap(index, force)
        .map_err(|e| io::Error::new(e.kind(), format!("BLK_UNMAP rrdmab{index}: {e}")))
}
