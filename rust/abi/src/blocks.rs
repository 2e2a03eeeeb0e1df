// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Region geometry and block ranges, with checked arithmetic only.
//!
//! Every block operation is checked here on the initiator before anything is
//! posted (and again by the NIC through the memory registration's bounds and
//! access flags on the target).

use super::errno::{Errno, EINVAL, EOVERFLOW, ERANGE};

/// Smallest block size.
pub const BLOCK_SIZE_MIN: u32 = 512;
/// Largest block size.
pub const BLOCK_SIZE_MAX: u32 = 1 << 20;

/// A region's shape: `nblocks` blocks of `block_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    block_size: u32,
    nblocks: u64,
    bytes: u64,
}

impl Geometry {
    /// Checks a requested geometry: the block size is a power of two within
    /// [`BLOCK_SIZE_MIN`]`..=`[`BLOCK_SIZE_MAX`], there is at least one block,
    /// and the size neither overflows nor exceeds `max_bytes` (`E2BIG` is
    /// left to the caller's policy; this returns `EOVERFLOW` past `max_bytes`).
    pub fn new(block_size: u32, nblocks: u64, max_bytes: u64) -> Result<Self, Errno> {
        if !block_size.is_power_of_two() || !(BLOCK_SIZE_MIN..=BLOCK_SIZE_MAX).contains(&block_size)
        {
            return Err(EINVAL);
        }
        if nblocks == 0 {
            return Err(EINVAL);
        }
        let bytes = nblocks
            .checked_mul(u64::from(block_size))
            .ok_or(EOVERFLOW)?;
        if bytes > max_bytes {
            return Err(EOVERFLOW);
        }
        Ok(Self {
            block_size,
            nblocks,
            bytes,
        })
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of blocks.
    pub fn nblocks(&self) -> u64 {
        self.nblocks
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of `page_size` pages backing the region.
    pub fn pages(&self, page_size: u64) -> u64 {
        self.bytes.div_ceil(page_size)
    }

    /// The byte span `(offset, len)` of `count` blocks from block `first`.
    ///
    /// `count == 0` is `EINVAL`; `first + count` overflowing is `EOVERFLOW`;
    /// a range that does not fit inside the region is `ERANGE`.
    pub fn span(&self, first: u64, count: u32) -> Result<(u64, u64), Errno> {
        if count == 0 {
            return Err(EINVAL);
        }
        let end = first.checked_add(u64::from(count)).ok_or(EOVERFLOW)?;
        if end > self.nblocks {
            return Err(ERANGE);
        }
        // Cannot overflow: end * block_size <= bytes.
        let shift = self.block_size.trailing_zeros();
        Ok((first << shift, u64::from(count) << shift))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_rules() {
        assert!(Geometry::new(4096, 16, u64::MAX).is_ok());
        assert_eq!(Geometry::new(4096, 16, u64::MAX).unwrap().bytes(), 65536);
        assert_eq!(Geometry::new(511, 1, u64::MAX), Err(EINVAL));
        assert_eq!(Geometry::new(256, 1, u64::MAX), Err(EINVAL));
        assert_eq!(Geometry::new(3 << 10, 1, u64::MAX), Err(EINVAL));
        assert_eq!(Geometry::new(2 << 20, 1, u64::MAX), Err(EINVAL));
        assert_eq!(Geometry::new(0, 1, u64::MAX), Err(EINVAL));
        assert_eq!(Geometry::new(4096, 0, u64::MAX), Err(EINVAL));
        assert_eq!(Geometry::new(1 << 20, u64::MAX, u64::MAX), Err(EOVERFLOW));
        assert_eq!(Geometry::new(4096, 257, 1 << 20), Err(EOVERFLOW));
        assert!(Geometry::new(4096, 256, 1 << 20).is_ok());
        assert_eq!(Geometry::new(512, 9, u64::MAX).unwrap().pages(4096), 2);
    }

    #[test]
    fn spans() {
        let g = Geometry::new(4096, 10, u64::MAX).unwrap();
        assert_eq!(g.span(0, 1), Ok((0, 4096)));
        assert_eq!(g.span(9, 1), Ok((9 * 4096, 4096)));
        assert_eq!(g.span(0, 10), Ok((0, 40960)));
        assert_eq!(g.span(10, 1), Err(ERANGE));
        assert_eq!(g.span(9, 2), Err(ERANGE));
        assert_eq!(g.span(0, 0), Err(EINVAL));
        assert_eq!(g.span(u64::MAX, 1), Err(EOVERFLOW));
        assert_eq!(g.span(u64::MAX - 1, u32::MAX), Err(EOVERFLOW));
    }
}
