// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Operations whose local side is a list of DMA segments rather than a
//! region (rrdma-blk's zero copy: a request's pages). With the device's
//! local DMA key each work request stays inside one remote chunk, so that
//! it names one remote key, and gathers (or scatters) at most as many of
//! the segments as the queue pair takes per request ([`dma_gathers`]). On iWARP a READ's sink is a fast
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

/// One work request's share of the segments: `len` bytes from segment
/// `seg`'s byte `seg_off` on, over `nsegs` segments (the first from
/// `seg_off`, each next from its start; empty ones give no bytes), to
/// remote offset `remote_off` (or back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaGather {
    pub seg: usize,
    pub seg_off: u32,
    pub nsegs: u32,
    pub remote_off: u64,
    pub len: u32,
}

/// Cuts `segs`, laid end to end from remote offset `remote_off`, into work
/// requests: each ends at a remote chunk boundary (`1 << remote_shift`),
/// after `max_sge` segments (at least one), or at the end of `segs`.
pub fn dma_gathers(
    segs: &[DmaSeg],
    remote_off: u64,
    remote_shift: u32,
    max_sge: u32,
) -> DmaGathers<'_> {
    DmaGathers {
        segs,
        seg: 0,
        seg_off: 0,
        remote_off,
        remote_shift,
        max_sge: max_sge.max(1),
    }
}

/// How many work requests [`dma_gathers`] gives.
pub fn dma_gather_count(segs: &[DmaSeg], remote_off: u64, remote_shift: u32, max_sge: u32) -> u64 {
    dma_gathers(segs, remote_off, remote_shift, max_sge).count() as u64
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
    DmaRanges(super::remote_segments(total, remote_off, remote_shift))
}

/// Iterator returned by [`dma_ranges`]: [`super::segments`] with no local
/// chunk, whose local offset is the offset in the segments.
#[derive(Clone, Debug)]
pub struct DmaRanges(super::Segments);

impl Iterator for DmaRanges {
    type Item = DmaRange;

    fn next(&mut self) -> Option<DmaRange> {
        self.0.next().map(|s| DmaRange {
            off: s.local_off,
            remote_off: s.remote_off,
            len: s.len,
        })
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

/// Iterator returned by [`dma_gathers`].
#[derive(Clone, Debug)]
pub struct DmaGathers<'a> {
    segs: &'a [DmaSeg],
    /// The next byte: `segs[seg]`'s byte `seg_off`.
    seg: usize,
    seg_off: u32,
    remote_off: u64,
    remote_shift: u32,
    max_sge: u32,
}

impl DmaGathers<'_> {
    /// Past segment `seg` if all its bytes are given.
    fn step_if_done(&mut self) {
        if self
            .segs
            .get(self.seg)
            .is_some_and(|s| self.seg_off >= s.len)
        {
            self.seg += 1;
            self.seg_off = 0;
        }
    }
}

impl Iterator for DmaGathers<'_> {
    type Item = DmaGather;

    fn next(&mut self) -> Option<DmaGather> {
        // No request starts on an empty segment.
        while self.segs.get(self.seg).is_some_and(|s| s.len == 0) {
            self.seg += 1;
        }
        let start = (self.seg, self.seg_off, self.remote_off);
        let room = super::to_boundary(self.remote_off, self.remote_shift).min(u64::from(u32::MAX));
        let (mut len, mut nsegs) = (0u64, 0u32);
        while len < room && nsegs < self.max_sge {
            let Some(s) = self.segs.get(self.seg) else {
                break;
            };
            let take = u64::from(s.len - self.seg_off).min(room - len);
            nsegs += 1;
            len += take;
            self.seg_off += take as u32;
            self.step_if_done();
        }
        if len == 0 {
            return None;
        }
        self.remote_off += len;
        Some(DmaGather {
            seg: start.0,
            seg_off: start.1,
            nsegs,
            remote_off: start.2,
            len: len as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn seg(addr: u64, len: u32) -> DmaSeg {
        DmaSeg { addr, len }
    }

    const fn gather(seg: usize, seg_off: u32, nsegs: u32, remote_off: u64, len: u32) -> DmaGather {
        DmaGather {
            seg,
            seg_off,
            nsegs,
            remote_off,
            len,
        }
    }

    #[test]
    fn a_segment_inside_one_chunk_is_one_request() {
        let segs = [seg(0x1000, 4096)];
        assert!(dma_gathers(&segs, 8192, 16, 1).eq([gather(0, 0, 1, 8192, 4096)]));
        assert_eq!(dma_gather_count(&segs, 8192, 16, 4), 1);
    }

    #[test]
    fn a_remote_boundary_cuts_a_segment() {
        // 8 KiB from remote 60 KiB over 64 KiB chunks: 4 KiB each side.
        let segs = [seg(0x10_0000, 8192)];
        let got = [
            gather(0, 0, 1, 61440, 4096),
            gather(0, 4096, 1, 65536, 4096),
        ];
        assert!(dma_gathers(&segs, 61440, 16, 4).eq(got));
        assert_eq!(dma_gather_count(&segs, 61440, 16, 1), 2);
    }

    #[test]
    fn a_request_gathers_up_to_max_sge_segments_of_one_chunk() {
        // Five pages from remote 56 KiB over 64 KiB chunks, 3 SGEs: two
        // pages to the boundary, then three, then the last.
        let segs = [
            seg(0x1000, 4096),
            seg(0x5000, 4096),
            seg(0x9000, 4096),
            seg(0x3000, 4096),
            seg(0x7000, 4096),
            seg(0xb000, 4096),
        ];
        let got = [
            gather(0, 0, 2, 57344, 8192),
            gather(2, 0, 3, 65536, 12288),
            gather(5, 0, 1, 77824, 4096),
        ];
        assert!(dma_gathers(&segs, 57344, 16, 3).eq(got));
        assert_eq!(dma_gather_count(&segs, 57344, 16, 1), 6);
        assert_eq!(dma_gather_count(&segs, 57344, 16, 64), 2);
    }

    #[test]
    fn segments_follow_each_other_remotely_and_empty_ones_give_nothing() {
        let segs = [seg(0, 0), seg(0x5000, 512), seg(0, 0), seg(0x9000, 1024)];
        let got = [gather(1, 0, 1, 0, 512), gather(3, 0, 1, 512, 1024)];
        assert!(dma_gathers(&segs, 0, 12, 1).eq(got));
        assert!(dma_gathers(&segs, 0, 12, 0).eq(got));
        assert!(dma_gathers(&segs, 0, 12, 3).eq([gather(1, 0, 3, 0, 1536)]));
        assert_eq!(dma_bytes(&segs), Some(1536));
        assert_eq!(dma_gathers(&[], 0, 12, 4).count(), 0);
        assert_eq!(dma_gathers(&[seg(1, 0)], 0, 12, 4).count(), 0);
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
