// SPDX-License-Identifier: GPL-2.0

//! The ioctls of rrdma-blk: BLK_MAP and BLK_UNMAP (`blk.rs` does the
//! work).

use crate::abi::blkdev::{BlkMap, BlkUnmap, DiskPlan, BLK_UNMAP_FORCE};
use crate::abi::errno::{EINVAL, EPERM};
use crate::abi::ioctl::Decoded;
use crate::abi::Result;
use crate::blk;
use crate::conn::Import;
use crate::ffi::{self, warn_user};
use crate::uarg;

use super::FileState;

/// CAP_SYS_ADMIN, or `EPERM` with a log line naming `what`.
fn sys_admin(what: &str) -> Result {
    if ffi::capable_sys_admin() {
        return Ok(());
    }
    warn_user!("{}: needs CAP_SYS_ADMIN\n", what);
    Err(EPERM)
}

/// The shape of a disk over `import` that `req` asks for.
fn plan(import: &Import, req: &BlkMap) -> Result<DiskPlan> {
    DiskPlan::new(
        &import.geometry,
        import.writable,
        import.max_op_blocks,
        ffi::page_size(),
        req.flags,
        req.reserved,
    )
    .inspect_err(|e| {
        warn_user!(
            "BLK_MAP: import of block size {} (512 up to the page size), {} blocks per operation, flags {:#x}, reserved {:#x}: errno {}\n",
            import.geometry.block_size(),
            import.max_op_blocks,
            req.flags,
            req.reserved,
            e.get()
        );
    })
}

impl FileState {
    pub(super) fn blk_map(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = BlkMap::decode(&uarg::read::<{ BlkMap::SIZE }>(arg, d)?);
        sys_admin("BLK_MAP")?;
        let import = self.objects.lock().import(req.import)?;
        // Checked on the caller's import first: a bad map fails before a
        // connection is made.
        plan(&import, &req)?;
        uarg::write(arg, d, &req.encode())?;
        // The disk's own connection and import, and its shape from them.
        // Either ends again with `own` if the disk is not made.
        let own = blk::own_import(&self.context, &import)?;
        let plan = plan(&own.import, &req)?;
        let (index, generation) = self.context.blk_map(own, plan)?;
        req.index = index;
        // The caller cannot learn the disk's name: it goes again.
        uarg::write(arg, d, &req.encode()).inspect_err(|_| {
            self.context.blk_undo(index, generation);
        })
    }

    pub(super) fn blk_unmap(&self, arg: u64, d: &Decoded) -> Result {
        let req = BlkUnmap::decode(&uarg::read::<{ BlkUnmap::SIZE }>(arg, d)?);
        sys_admin("BLK_UNMAP")?;
        if req.flags & !BLK_UNMAP_FORCE != 0 {
            warn_user!("BLK_UNMAP: flags {:#x} refused\n", req.flags);
            return Err(EINVAL);
        }
        self.context
            .blk_unmap(req.index, req.flags & BLK_UNMAP_FORCE != 0)
            .inspect_err(|e| {
                warn_user!("BLK_UNMAP: rrdmab{}: errno {}\n", req.index, e.get());
            })
    }
}
