// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Rules for remote access: what a caller asks for is checked
//! (`ops/check.rs`: addresses, export access modes, block operations,
//! fences), and how block operations are cut into work requests (what a
//! work completion means is in `wc`).
//!
//! Everything here runs before anything is posted, with checked arithmetic.

#[path = "ops/check.rs"]
mod check;
#[path = "ops/dma.rs"]
mod dma;

pub use check::*;
// Only rrdma.ko of the crates that compile these files uses them.
#[allow(unused_imports)]
pub use dma::*;

/// One work request's piece of an operation: it stays inside one
/// registration chunk on each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Offset in the local region.
    pub local_off: u64,
    /// Offset in the remote region.
    pub remote_off: u64,
    /// Bytes (at most one chunk).
    pub len: u32,
}

/// Cuts `[off, off + len)` on both sides at every local chunk boundary
/// (`1 << local_shift`) and remote one (`1 << remote_shift`).
pub fn segments(c: &Checked, local_shift: u32, remote_shift: u32) -> Segments {
    Segments {
        local_off: c.local_off,
        remote_off: c.remote_off,
        left: c.len,
        local_shift,
        remote_shift,
    }
}

/// [`segments`] of `len` bytes from local offset 0 with no local chunk
/// boundary: cut only at remote ones (`ops/dma.rs`).
fn remote_segments(len: u64, remote_off: u64, remote_shift: u32) -> Segments {
    Segments {
        local_off: 0,
        remote_off,
        left: len,
        local_shift: 63,
        remote_shift,
    }
}

/// Iterator returned by [`segments`].
#[derive(Clone, Debug)]
pub struct Segments {
    local_off: u64,
    remote_off: u64,
    left: u64,
    local_shift: u32,
    remote_shift: u32,
}

/// Bytes from `off` to the next multiple of `1 << shift` (a whole chunk
/// if `off` is on one).
fn to_boundary(off: u64, shift: u32) -> u64 {
    let size = 1u64 << shift;
    size - (off & (size - 1))
}

impl Iterator for Segments {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.left == 0 {
            return None;
        }
        let n = self
            .left
            .min(to_boundary(self.local_off, self.local_shift))
            .min(to_boundary(self.remote_off, self.remote_shift))
            .min(u64::from(u32::MAX));
        let s = Segment {
            local_off: self.local_off,
            remote_off: self.remote_off,
            len: n as u32,
        };
        self.local_off += n;
        self.remote_off += n;
        self.left -= n;
        Some(s)
    }
}

/// How many segments [`segments`] cuts `c` into, without walking them:
/// one, and one more for each local or remote chunk boundary strictly
/// inside the range (a boundary of both sides counts once). Shifts below
/// 32 (every registration chunk: `wire::CHUNK_SHIFT_MAX`), where no
/// segment reaches `u32::MAX` bytes; others are counted by walking.
pub fn segment_count(c: &Checked, local_shift: u32, remote_shift: u32) -> u64 {
    if c.len == 0 {
        return 0;
    }
    if local_shift >= 32 || remote_shift >= 32 {
        return segments(c, local_shift, remote_shift).count() as u64;
    }
    // Boundaries `b` with `off < b < off + len`.
    let inside = |off: u64, shift: u32| ((off + c.len - 1) >> shift) - (off >> shift);
    let (local, remote) = (
        inside(c.local_off, local_shift),
        inside(c.remote_off, remote_shift),
    );
    // Both sides cut at the same byte only if their offsets agree below
    // the finer chunk size; then every boundary of the coarser side is
    // one of the finer side's too.
    let fine = local_shift.min(remote_shift);
    let shared = if (c.local_off ^ c.remote_off) & ((1u64 << fine) - 1) != 0 {
        0
    } else if local_shift >= remote_shift {
        local
    } else {
        remote
    };
    1 + local + remote - shared
}

/// Registration chunk index of byte offset `off`.
pub fn chunk_of(off: u64, shift: u32) -> u64 {
    off >> shift
}

/// The chunk size (log2) rrdma registers with a device that maps at most
/// `max_pages` pages per fast registration: the largest power of two of
/// pages that fits, capped at 256 pages, and never below one page.
pub fn chunk_shift(max_pages: u32, page_shift: u32) -> u32 {
    let pages = max_pages.clamp(1, 256);
    page_shift + (31 - pages.leading_zeros())
}

/// The work requests of an operation in `dir` cut into `segments`, with
/// `regs` local chunks still to register: a work request per segment and
/// per registration; on iWARP (`iwarp`) each READ segment registers its
/// sink first (remote write access, for that READ only), and a write ends
/// with a fence: a sink registration and a one-byte READ.
pub fn op_wrs(dir: Dir, segments: u64, regs: u64, iwarp: bool) -> u64 {
    match (dir, iwarp) {
        (Dir::Read, true) => 2 * segments + regs,
        (Dir::Write, true) => segments + regs + 2,
        _ => segments + regs,
    }
}

/// The READ sinks over region memory an operation in `dir` cut into
/// `segments` holds until it completes (iWARP only): one per READ segment.
/// A write's fence holds a fence sink instead (one page of scratch).
pub fn op_sinks(dir: Dir, segments: u64, iwarp: bool) -> u64 {
    match (dir, iwarp) {
        (Dir::Read, true) => segments,
        _ => 0,
    }
}

/// An upper bound of the work requests one operation of `len` bytes needs
/// ([`op_wrs`]) in either direction, whatever its alignment: its segments
/// (cut at every local and remote chunk boundary: at most `1 + l + r` with
/// `l` and `r` the chunk counts `len` spans on each side), a registration
/// for each local chunk it touches (`l + 1` at most), and a write fence
/// (counted on every device); on iWARP, READ sinks and a two-request fence.
pub fn max_wrs(len: u64, local_shift: u32, remote_shift: u32, iwarp: bool) -> u64 {
    let l = len.div_ceil(1u64 << local_shift);
    let r = len.div_ceil(1u64 << remote_shift);
    let segments = 1 + l + r;
    let regs = l + 1;
    if iwarp {
        op_wrs(Dir::Read, segments, regs, true).max(op_wrs(Dir::Write, segments, regs, true))
    } else {
        segments + regs + 1
    }
}

/// The largest block count an operation may have so that it always fits in
/// `budget` work requests ([`max_wrs`]); 0 if not even one block fits.
pub fn max_op_blocks(
    block_size: u32,
    local_shift: u32,
    remote_shift: u32,
    budget: u64,
    iwarp: bool,
) -> u32 {
    let fits = |c: u32| {
        max_wrs(
            u64::from(c) * u64::from(block_size),
            local_shift,
            remote_shift,
            iwarp,
        ) <= budget
    };
    let (mut lo, mut hi) = (0u32, u32::MAX);
    if fits(hi) {
        return hi;
    }
    // Invariant: fits(lo) (or lo == 0), !fits(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo == 0 || fits(lo) {
        lo
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_stop_at_both_chunk_boundaries() {
        let c = Checked {
            dir: Dir::Read,
            local_off: 4096,
            remote_off: 12288,
            len: 5 * 4096,
            sent: false,
        };
        let v: Vec<Segment> = segments(&c, 14, 13).collect();
        // Remote chunks (8 KiB) end at 16K and 24K, the local one (16 KiB) at 16K.
        let lens: Vec<u32> = v.iter().map(|s| s.len).collect();
        assert_eq!(lens, vec![4096, 8192, 8192]);
        assert_eq!(v.iter().map(|s| u64::from(s.len)).sum::<u64>(), c.len);
        assert_eq!(v[1].local_off, 8192);
        assert_eq!(v[1].remote_off, 16384);
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_shift(256, 12), 20);
        assert_eq!(chunk_shift(512, 12), 20);
        assert_eq!(chunk_shift(300, 12), 20);
        assert_eq!(chunk_shift(100, 12), 18);
        assert_eq!(chunk_shift(0, 12), 12);
        assert_eq!(chunk_of(3 << 20, 20), 3);
    }

    #[test]
    fn operation_size_limits() {
        // 1 MiB chunks on both sides, 256 work requests: 84 MiB always fits.
        let max = max_op_blocks(4096, 20, 20, 256, false);
        assert_eq!(u64::from(max) * 4096, 84 << 20);
        assert!(max_wrs(u64::from(max) * 4096, 20, 20, false) <= 256);
        assert!(max_wrs(u64::from(max + 1) * 4096, 20, 20, false) > 256);
        let iw = max_op_blocks(4096, 20, 20, 256, true);
        assert!(iw > 0 && iw < max);
        assert!(max_wrs(u64::from(iw) * 4096, 20, 20, true) <= 256);
        assert!(max_wrs(u64::from(iw + 1) * 4096, 20, 20, true) > 256);
        assert_eq!(op_wrs(Dir::Read, 3, 1, true), 7);
        assert_eq!(op_wrs(Dir::Write, 3, 1, true), 6);
        assert_eq!(op_wrs(Dir::Read, 3, 1, false), 4);
        assert_eq!(op_sinks(Dir::Read, 3, true), 3);
        assert_eq!(op_sinks(Dir::Write, 3, true), 0);
        assert_eq!(op_sinks(Dir::Read, 3, false), 0);
        // A budget too small for anything.
        assert_eq!(max_op_blocks(4096, 12, 12, 5, false), 0);
        assert_eq!(max_op_blocks(4096, 12, 12, 6, false), 1);
        // Huge budgets are capped by the count field.
        assert_eq!(max_op_blocks(512, 30, 30, u64::MAX, false), u32::MAX);
    }

    extern crate std;
    use std::vec;
    use std::vec::Vec;
}
