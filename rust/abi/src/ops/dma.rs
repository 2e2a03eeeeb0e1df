// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Operations whose local side is a list of DMA segments rather than a
//! region (rrdma-blk's zero copy: a request's pages). With the device's
//! local DMA key each work request's piece stays inside one segment and
//! one remote chunk, so that it names one local address range and one
//! remote key ([`dma_pieces`]). On iWARP a READ's sink is a fast
//! registration over the pages of one remote chunk's range of the
//! segments ([`dma_ranges`], [`sink_ranges`]): one READ per remote chunk,
//! if the range has no gap (a segment that starts or ends inside a page
//! next to another segment) and fits a sink.

/// One local DMA segment: its device address and length (the layout of
/// the module shim's `struct rrdma_shim_dma_seg`, which the module reads
/// as these).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaSeg {
    pub addr: u64,
    pub len: u32,
}

/// One work request's piece: `len` bytes from local device address
/// `addr` to remote offset `remote_off` (or back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaPiece {
    pub addr: u64,
    pub remote_off: u64,
    pub len: u32,
}

/// Cuts `segs`, laid end to end from remote offset `remote_off`, at every
/// remote chunk boundary (`1 << remote_shift`). Empty segments give no
/// piece.
pub fn dma_pieces(segs: &[DmaSeg], remote_off: u64, remote_shift: u32) -> DmaPieces<'_> {
    DmaPieces {
        segs,
        done_in_seg: 0,
        remote_off,
        remote_shift,
    }
}

/// How many pieces [`dma_pieces`] gives.
pub fn dma_piece_count(segs: &[DmaSeg], remote_off: u64, remote_shift: u32) -> u64 {
    let mut n = 0;
    let mut off = remote_off;
    for s in segs.iter().filter(|s| s.len > 0) {
        let end = off + u64::from(s.len);
        // Boundaries `b` with `off < b < end`, plus the piece itself.
        n += 1 + (((end - 1) >> remote_shift) - (off >> remote_shift));
        off = end;
    }
    n
}

/// The bytes `segs` hold, or `None` past `u64`.
pub fn dma_bytes(segs: &[DmaSeg]) -> Option<u64> {
    segs.iter()
        .try_fold(0u64, |acc, s| acc.checked_add(u64::from(s.len)))
}

/// One remote chunk's range of a list of segments laid end to end: bytes
/// `off .. off + len` of the segments, at remote offset `remote_off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRange {
    pub off: u64,
    pub remote_off: u64,
    pub len: u32,
}

/// Cuts `total` bytes laid from remote offset `remote_off` at every remote
/// chunk boundary (`1 << remote_shift`).
pub fn dma_ranges(total: u64, remote_off: u64, remote_shift: u32) -> DmaRanges {
    DmaRanges {
        off: 0,
        total,
        remote_off,
        remote_shift,
    }
}

/// Iterator returned by [`dma_ranges`].
#[derive(Clone, Debug)]
pub struct DmaRanges {
    off: u64,
    total: u64,
    remote_off: u64,
    remote_shift: u32,
}

impl Iterator for DmaRanges {
    type Item = DmaRange;

    fn next(&mut self) -> Option<DmaRange> {
        if self.off >= self.total {
            return None;
        }
        let size = 1u64 << self.remote_shift;
        let to_boundary = size - (self.remote_off & (size - 1));
        let len = (self.total - self.off)
            .min(to_boundary)
            .min(u64::from(u32::MAX));
        let r = DmaRange {
            off: self.off,
            remote_off: self.remote_off,
            len: len as u32,
        };
        self.off += len;
        self.remote_off += len;
        Some(r)
    }
}

/// The pages (of `1 << page_shift` bytes) bytes `off .. off + len` of
/// `segs` touch, as one fast registration maps them, or `None` if they
/// cannot be one: a segment boundary inside them that is not at a page
/// boundary on both sides (a gap), or no such bytes.
pub fn range_pages(segs: &[DmaSeg], off: u64, len: u64, page_shift: u32) -> Option<u64> {
    let page = 1u64 << page_shift;
    let end = off.checked_add(len)?;
    let (mut pos, mut pages, mut prev_end) = (0u64, 0u64, None::<u64>);
    for s in segs.iter().filter(|s| s.len > 0) {
        let (a, b) = (pos, pos + u64::from(s.len));
        pos = b;
        if b <= off {
            continue;
        }
        if a >= end {
            break;
        }
        // This segment's part in the range, as device addresses.
        let first = s.addr.checked_add(off.max(a) - a)?;
        let last = s.addr.checked_add(end.min(b) - a)?;
        if let Some(p) = prev_end {
            // A boundary inside the range: both sides on page edges.
            if p & (page - 1) != 0 || first & (page - 1) != 0 {
                return None;
            }
        }
        pages += (last - 1) / page - first / page + 1;
        prev_end = Some(last);
    }
    if len == 0 || pos < end {
        return None;
    }
    Some(pages)
}

/// How many READs (one sink each) `segs` take on iWARP from remote
/// offset `remote_off` over remote chunks of `1 << remote_shift` bytes,
/// or `None` if a range has a gap or needs more than `max_pages` pages
/// of `1 << page_shift` bytes ([`range_pages`]).
pub fn sink_ranges(
    segs: &[DmaSeg],
    remote_off: u64,
    remote_shift: u32,
    page_shift: u32,
    max_pages: u32,
) -> Option<u64> {
    let total = dma_bytes(segs)?;
    let mut n = 0;
    for r in dma_ranges(total, remote_off, remote_shift) {
        let pages = range_pages(segs, r.off, u64::from(r.len), page_shift)?;
        if pages > u64::from(max_pages) {
            return None;
        }
        n += 1;
    }
    Some(n)
}

/// Iterator returned by [`dma_pieces`].
#[derive(Clone, Debug)]
pub struct DmaPieces<'a> {
    segs: &'a [DmaSeg],
    /// Bytes of `segs[0]` already given.
    done_in_seg: u32,
    remote_off: u64,
    remote_shift: u32,
}

impl Iterator for DmaPieces<'_> {
    type Item = DmaPiece;

    fn next(&mut self) -> Option<DmaPiece> {
        loop {
            let (s, rest) = self.segs.split_first()?;
            let left = s.len - self.done_in_seg;
            if left == 0 {
                self.segs = rest;
                self.done_in_seg = 0;
                continue;
            }
            let size = 1u64 << self.remote_shift;
            let to_boundary = size - (self.remote_off & (size - 1));
            let len = u64::from(left).min(to_boundary) as u32;
            let piece = DmaPiece {
                addr: s.addr + u64::from(self.done_in_seg),
                remote_off: self.remote_off,
                len,
            };
            self.done_in_seg += len;
            self.remote_off += u64::from(len);
            return Some(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn seg(addr: u64, len: u32) -> DmaSeg {
        DmaSeg { addr, len }
    }

    #[test]
    fn a_segment_inside_one_chunk_is_one_piece() {
        let segs = [seg(0x1000, 4096)];
        let p: [DmaPiece; 1] = [DmaPiece {
            addr: 0x1000,
            remote_off: 8192,
            len: 4096,
        }];
        assert!(dma_pieces(&segs, 8192, 16).eq(p));
        assert_eq!(dma_piece_count(&segs, 8192, 16), 1);
    }

    #[test]
    fn a_remote_boundary_cuts_a_segment() {
        // 8 KiB from remote 60 KiB over 64 KiB chunks: 4 KiB each side.
        let segs = [seg(0x10_0000, 8192)];
        let got: [DmaPiece; 2] = [
            DmaPiece {
                addr: 0x10_0000,
                remote_off: 61440,
                len: 4096,
            },
            DmaPiece {
                addr: 0x10_1000,
                remote_off: 65536,
                len: 4096,
            },
        ];
        assert!(dma_pieces(&segs, 61440, 16).eq(got));
        assert_eq!(dma_piece_count(&segs, 61440, 16), 2);
    }

    #[test]
    fn segments_follow_each_other_remotely_and_empty_ones_vanish() {
        let segs = [seg(0x5000, 512), seg(0, 0), seg(0x9000, 1024)];
        let got: [DmaPiece; 2] = [
            DmaPiece {
                addr: 0x5000,
                remote_off: 0,
                len: 512,
            },
            DmaPiece {
                addr: 0x9000,
                remote_off: 512,
                len: 1024,
            },
        ];
        assert!(dma_pieces(&segs, 0, 12).eq(got));
        assert_eq!(dma_piece_count(&segs, 0, 12), 2);
        assert_eq!(dma_bytes(&segs), Some(1536));
        assert_eq!(dma_pieces(&[], 0, 12).count(), 0);
    }

    #[test]
    fn ranges_cut_only_at_remote_chunks() {
        let got: [DmaRange; 3] = [
            DmaRange {
                off: 0,
                remote_off: 61440,
                len: 4096,
            },
            DmaRange {
                off: 4096,
                remote_off: 65536,
                len: 65536,
            },
            DmaRange {
                off: 69632,
                remote_off: 131072,
                len: 1024,
            },
        ];
        assert!(dma_ranges(70656, 61440, 16).eq(got));
        assert_eq!(dma_ranges(0, 0, 16).count(), 0);
    }

    #[test]
    fn a_range_over_whole_pages_is_their_count() {
        // Half a page, two pages, a quarter page: 1 + 2 + 1 pages.
        let segs = [seg(0x1800, 2048), seg(0x8000, 8192), seg(0x3000, 1024)];
        assert_eq!(range_pages(&segs, 0, 11264, 12), Some(4));
        // Inside one segment: only the pages it touches.
        assert_eq!(range_pages(&segs, 2048 + 4095, 2, 12), Some(2));
        assert_eq!(range_pages(&segs, 2048, 4096, 12), Some(1));
        // Past the end, or empty.
        assert_eq!(range_pages(&segs, 0, 11265, 12), None);
        assert_eq!(range_pages(&segs, 5, 0, 12), None);
        assert_eq!(sink_ranges(&segs, 0, 16, 12, 4), Some(1));
        assert_eq!(sink_ranges(&segs, 0, 16, 12, 3), None);
    }

    #[test]
    fn a_gap_inside_a_range_refuses_it() {
        // The first ends inside its page: a gap before the second.
        let segs = [seg(0x1000, 512), seg(0x8000, 4096)];
        assert_eq!(range_pages(&segs, 0, 4608, 12), None);
        // The second starts inside its page.
        let segs = [seg(0x1000, 4096), seg(0x8200, 512)];
        assert_eq!(range_pages(&segs, 0, 4608, 12), None);
        // Ranges cut at the gap (remote chunks of 512 B) have none.
        assert_eq!(sink_ranges(&segs, 0, 9, 12, 1), Some(9));
        assert_eq!(range_pages(&segs, 0, 4096, 12), Some(1));
    }
}
