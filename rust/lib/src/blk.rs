// SPDX-License-Identifier: GPL-2.0 OR MIT

//! rrdma-blk: an import as a block device `/dev/rrdmabN` (BLK_MAP,
//! BLK_UNMAP).

use std::io;

use rrdma_abi::blkdev::{self, BlkMap, BlkUnmap, BLK_MAP_RO, BLK_UNMAP_FORCE};

use crate::{RemoteRegion, Rrdma};

impl Rrdma {
    /// Issues `BLK_MAP`.
    pub fn blk_map_raw(&self, req: &BlkMap) -> io::Result<BlkMap> {
        let mut b = req.encode();
        self.ioctl_bytes(blkdev::IOCTL_BLK_MAP, &mut b)?;
        Ok(BlkMap::decode(&b))
    }

    /// Maps `import` as a disk; returns N of `/dev/rrdmabN`. The kernel
    /// imports the same export again over a connection of the disk's own
    /// (to the peer `import`'s connection was made to, with reconnect):
    /// the disk lives until [`Rrdma::blk_unmap`], from any process,
    /// whatever becomes of `import`, its connection or this file.
    pub fn blk_map(&self, import: &RemoteRegion<'_>, read_only: bool) -> io::Result<u32> {
        let out = self.blk_map_raw(&BlkMap {
            import: import.handle(),
            flags: if read_only { BLK_MAP_RO } else { 0 },
            ..BlkMap::zeroed()
        })?;
        Ok(out.index)
    }

    /// Issues `BLK_UNMAP`.
    pub fn blk_unmap_raw(&self, req: &BlkUnmap) -> io::Result<()> {
        let mut b = req.encode();
        self.ioctl_bytes(blkdev::IOCTL_BLK_UNMAP, &mut b)
    }

    /// Removes disk `index` (`EBUSY` while it is open, unless `force`).
    pub fn blk_unmap(&self, index: u32, force: bool) -> io::Result<()> {
        self.blk_unmap_raw(&BlkUnmap {
            index,
            flags: if force { BLK_UNMAP_FORCE } else { 0 },
        })
    }
}
