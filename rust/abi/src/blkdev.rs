// SPDX-License-Identifier: GPL-2.0 OR MIT

//! An import as a block device (`RRDMA_IOCTL_BLK_MAP`): the ioctl
//! arguments, the disk's shape, and the mapping of a request to an
//! operation: its sectors to remote blocks and to its tag's slot of the
//! staging region, and its kind to a write's completion (once sent, or
//! once placed for FUA) or a fence (a flush).

use super::blocks::Geometry;
use super::errno::{Errno, EINVAL, EIO, EOVERFLOW};
use super::ioctl::{iow, iowr, IoctlCmd};
use super::uapi::{Op, IOCTL_MAGIC, OP_FENCE, OP_F_SENT, OP_READ, OP_WRITE};

abi_struct! {
    /// `struct rrdma_blk_map`.
    pub struct BlkMap (size = 16) {
        /// In: the import's handle.
        import: u32 = 0,
        /// In: [`BLK_MAP_RO`], or zero.
        flags: u32 = 4,
        /// Out: N of `/dev/rrdmabN`.
        index: u32 = 8,
        /// In: must be zero.
        reserved: u32 = 12,
    }
}

abi_struct! {
    /// `struct rrdma_blk_unmap`.
    pub struct BlkUnmap (size = 8) {
        /// In: N of `/dev/rrdmabN`.
        index: u32 = 0,
        /// In: [`BLK_UNMAP_FORCE`], or zero.
        flags: u32 = 4,
    }
}

/// `RRDMA_BLK_MAP_RO`: a read-only disk.
pub const BLK_MAP_RO: u32 = 1 << 0;
/// `RRDMA_BLK_UNMAP_FORCE`: unmap even while the disk is open.
pub const BLK_UNMAP_FORCE: u32 = 1 << 0;
/// `RRDMA_IOCTL_BLK_MAP`.
pub const IOCTL_BLK_MAP: IoctlCmd = iowr(IOCTL_MAGIC, 0x0f, BlkMap::SIZE);
/// `RRDMA_IOCTL_BLK_UNMAP`.
pub const IOCTL_BLK_UNMAP: IoctlCmd = iow(IOCTL_MAGIC, 0x10, BlkUnmap::SIZE);

/// Requests in flight per disk (the tag set's depth): each has its slot
/// in the disk's staging region.
pub const QUEUE_DEPTH: u32 = 32;
/// The largest request, in bytes (before the import's own limit).
pub const IO_BYTES_MAX: u32 = 128 * 1024;
/// The block layer's sector.
pub const SECTOR: u64 = 512;

/// What the block layer asks of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// Remote blocks into the request's pages.
    Read,
    /// The request's pages to remote blocks, complete once sent (the
    /// disk's volatile write cache).
    Write,
    /// A write with `REQ_FUA`: complete once placed.
    WriteFua,
    /// `REQ_OP_FLUSH`: every write completed before it, placed (a fence).
    Flush,
}

/// A disk's shape, decided when it is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskPlan {
    /// The import's block size: the disk's logical block size.
    pub block_size: u32,
    /// The disk's size in 512-byte sectors.
    pub sectors: u64,
    /// The largest request in bytes (a multiple of the block size).
    pub io_bytes: u32,
    /// Whether the disk is read-only.
    pub read_only: bool,
    /// The staging region: [`QUEUE_DEPTH`] slots of `io_bytes`.
    pub staging: Geometry,
}

impl DiskPlan {
    /// The disk over an import of `remote` (writable: `writable`) whose
    /// operations move at most `max_op_blocks` blocks, on a host with
    /// pages of `page_size` bytes; `flags` from the caller.
    ///
    /// A block size that is not a power of two from 512 to the page size,
    /// operations of less than a page, unknown flags or a non-zero
    /// `reserved`: `EINVAL`; a size whose bytes do not fit an `i64`:
    /// `EOVERFLOW`.
    pub fn new(
        remote: &Geometry,
        writable: bool,
        max_op_blocks: u32,
        page_size: u64,
        flags: u32,
        reserved: u32,
    ) -> Result<Self, Errno> {
        if flags & !BLK_MAP_RO != 0 || reserved != 0 {
            return Err(EINVAL);
        }
        let bs = remote.block_size();
        if !bs.is_power_of_two() || u64::from(bs) < SECTOR || u64::from(bs) > page_size {
            return Err(EINVAL);
        }
        // The block layer takes no request limit below a page.
        let blocks = (IO_BYTES_MAX / bs).min(max_op_blocks);
        let io_bytes = blocks * bs;
        if u64::from(io_bytes) < page_size {
            return Err(EINVAL);
        }
        // The block layer keeps a disk's size in bytes as a signed 64-bit
        // `loff_t` (`set_capacity` does not check).
        let sectors = remote.bytes() / SECTOR;
        if sectors > (i64::MAX as u64) / SECTOR {
            return Err(EOVERFLOW);
        }
        let staging = Geometry::new(bs, u64::from(blocks) * u64::from(QUEUE_DEPTH), u64::MAX)?;
        Ok(Self {
            block_size: bs,
            sectors,
            io_bytes,
            read_only: flags & BLK_MAP_RO != 0 || !writable,
            staging,
        })
    }

    /// Blocks of one slot.
    pub fn slot_blocks(&self) -> u32 {
        self.io_bytes / self.block_size
    }

    /// The operation of request tag `tag`: one that moves `len` bytes at
    /// byte `pos` of the disk through the tag's staging slot, or a flush's
    /// fence. What the block layer cannot send (the limits the disk
    /// declares): `EIO`.
    pub fn op(&self, kind: IoKind, pos: u64, len: u32, tag: u32) -> Result<Op, Errno> {
        let mut op = Op::zeroed();
        (op.opcode, op.flags) = match kind {
            IoKind::Read => (OP_READ, 0),
            IoKind::Write => (OP_WRITE, OP_F_SENT),
            IoKind::WriteFua => (OP_WRITE, 0),
            IoKind::Flush => {
                op.opcode = OP_FENCE;
                return Ok(op);
            }
        };
        // A power of two (`new`): a mask tells a multiple.
        let bs = u64::from(self.block_size);
        let len64 = u64::from(len);
        let end = pos.checked_add(len64).ok_or(EIO)?;
        if len == 0
            || pos & (bs - 1) != 0
            || len64 & (bs - 1) != 0
            || len > self.io_bytes
            || end > self.sectors * SECTOR
            || tag >= QUEUE_DEPTH
        {
            return Err(EIO);
        }
        op.remote_block = pos / bs;
        op.local_block = u64::from(tag) * u64::from(self.slot_blocks());
        op.count = (len64 / bs) as u32;
        Ok(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(bs: u32, n: u64) -> Geometry {
        Geometry::new(bs, n, u64::MAX).unwrap()
    }

    #[test]
    fn a_size_past_the_block_layers_signed_bytes_is_refused() {
        // 2^63 bytes: a negative loff_t.
        let huge = geo(4096, 1 << 51);
        assert_eq!(DiskPlan::new(&huge, true, 256, 4096, 0, 0), Err(EOVERFLOW));
        // A block less fits.
        let p = DiskPlan::new(&geo(4096, (1 << 51) - 1), true, 256, 4096, 0, 0).unwrap();
        assert!(p.sectors * SECTOR <= i64::MAX as u64);
    }

    #[test]
    fn plan_shapes() {
        let p = DiskPlan::new(&geo(4096, 1024), true, 256, 4096, 0, 0).unwrap();
        assert_eq!(p.sectors, 1024 * 8);
        assert_eq!(p.io_bytes, IO_BYTES_MAX);
        assert!(!p.read_only);
        assert_eq!(p.staging.bytes(), u64::from(IO_BYTES_MAX * QUEUE_DEPTH));
        // The import's own limit caps a request.
        let p = DiskPlan::new(&geo(512, 100), true, 12, 4096, 0, 0).unwrap();
        assert_eq!(p.io_bytes, 6144);
        // A read-only export or the flag.
        assert!(
            DiskPlan::new(&geo(512, 8), false, 8, 4096, 0, 0)
                .unwrap()
                .read_only
        );
        assert!(
            DiskPlan::new(&geo(512, 8), true, 8, 4096, BLK_MAP_RO, 0)
                .unwrap()
                .read_only
        );
    }

    #[test]
    fn plan_refuses() {
        // Blocks above the page size, flags, reserved, less than a page
        // per op.
        assert_eq!(
            DiskPlan::new(&geo(8192, 8), true, 8, 4096, 0, 0),
            Err(EINVAL)
        );
        assert_eq!(
            DiskPlan::new(&geo(512, 8), true, 8, 4096, 2, 0),
            Err(EINVAL)
        );
        assert_eq!(
            DiskPlan::new(&geo(512, 8), true, 8, 4096, 0, 1),
            Err(EINVAL)
        );
        assert_eq!(
            DiskPlan::new(&geo(512, 8), true, 0, 4096, 0, 0),
            Err(EINVAL)
        );
        assert_eq!(
            DiskPlan::new(&geo(512, 8), true, 7, 4096, 0, 0),
            Err(EINVAL)
        );
    }

    #[test]
    fn ops_map_to_slots() {
        let p = DiskPlan::new(&geo(4096, 64), true, 256, 4096, 0, 0).unwrap();
        let op = p.op(IoKind::Write, 8192, 16384, 3).unwrap();
        assert_eq!((op.opcode, op.remote_block, op.count), (OP_WRITE, 2, 4));
        assert_eq!(op.local_block, 3 * 32);
        // A plain write completes once sent, a FUA one once placed, a read
        // has no flag, a flush is a fence and names nothing else.
        assert_eq!(op.flags, OP_F_SENT);
        assert_eq!(p.op(IoKind::WriteFua, 0, 4096, 0).unwrap().flags, 0);
        let r = p.op(IoKind::Read, 0, 4096, 0).unwrap();
        assert_eq!((r.opcode, r.flags), (OP_READ, 0));
        let f = p.op(IoKind::Flush, 0, 0, 5).unwrap();
        assert_eq!(
            f,
            Op {
                opcode: OP_FENCE,
                ..Op::zeroed()
            }
        );
        // The last block, and one past it.
        assert!(p.op(IoKind::Read, 63 * 4096, 4096, 31).is_ok());
        assert_eq!(p.op(IoKind::Read, 64 * 4096, 4096, 0), Err(EIO));
        assert_eq!(p.op(IoKind::Read, 63 * 4096, 8192, 0), Err(EIO));
        // Unaligned, empty, too long, a tag past the depth, overflow.
        assert_eq!(p.op(IoKind::Read, 512, 4096, 0), Err(EIO));
        assert_eq!(p.op(IoKind::Read, 0, 512, 0), Err(EIO));
        assert_eq!(p.op(IoKind::Read, 0, 0, 0), Err(EIO));
        assert_eq!(p.op(IoKind::Read, 0, IO_BYTES_MAX + 4096, 0), Err(EIO));
        assert_eq!(p.op(IoKind::Read, 0, 4096, QUEUE_DEPTH), Err(EIO));
        assert_eq!(p.op(IoKind::Read, u64::MAX - 4095, 4096, 0), Err(EIO));
    }

    #[test]
    fn slots_never_overlap() {
        let p = DiskPlan::new(&geo(512, 1 << 20), true, 1024, 4096, 0, 0).unwrap();
        for tag in 0..QUEUE_DEPTH {
            let op = p.op(IoKind::Write, 0, p.io_bytes, tag).unwrap();
            let (off, len) = p.staging.span(op.local_block, op.count).unwrap();
            assert_eq!(off, u64::from(tag) * u64::from(p.io_bytes));
            assert_eq!(len, u64::from(p.io_bytes));
        }
    }
}
