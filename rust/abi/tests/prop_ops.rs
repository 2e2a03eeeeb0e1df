// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the operation rules: segments tile an operation's
//! range within the registration chunks, their count needs no walk, and
//! an operation's work requests fit their bound.

use proptest::prelude::*;
use rrdma_abi::ops::{
    dma_bytes, dma_gather_count, dma_gathers, dma_ranges, max_op_blocks, max_wrs, op_sinks, op_wrs,
    range_pages, segment_count, segments, Checked, Dir, DmaSeg,
};

proptest! {
    #[test]
    fn segments_tile_the_range_within_chunks(
        lo in 0u64..(1 << 30), ro in 0u64..(1 << 30), len in 1u64..(64 << 20),
        ls in 12u32..=20, rs in 12u32..=20,
    ) {
        let c = Checked { dir: Dir::Read, local_off: lo, remote_off: ro, len, sent: false };
        let (mut l, mut r, mut total) = (lo, ro, 0u64);
        for s in segments(&c, ls, rs) {
            prop_assert!(s.len > 0);
            prop_assert_eq!((s.local_off, s.remote_off), (l, r));
            let n = u64::from(s.len);
            prop_assert_eq!(s.local_off >> ls, (s.local_off + n - 1) >> ls);
            prop_assert_eq!(s.remote_off >> rs, (s.remote_off + n - 1) >> rs);
            l += n;
            r += n;
            total += n;
        }
        prop_assert_eq!(total, len);
    }

    /// `segment_count` counts what `segments` cuts, without walking.
    #[test]
    fn segment_count_is_the_walk(
        lo in 0u64..(1 << 40), ro in 0u64..(1 << 40), len in 1u64..(64 << 20),
        ls in 12u32..=34, rs in 12u32..=34, aligned in any::<bool>(),
    ) {
        // Half the cases share their offsets below the finer chunk,
        // where both sides' boundaries coincide.
        let fine = (1u64 << ls.min(rs)) - 1;
        let ro = if aligned { (ro & !fine) | (lo & fine) } else { ro };
        let c = Checked { dir: Dir::Write, local_off: lo, remote_off: ro, len, sent: false };
        prop_assert_eq!(segment_count(&c, ls, rs), segments(&c, ls, rs).count() as u64);
    }
}

proptest! {
    /// A request's DMA segments become work requests whose SGEs (as the
    /// shim builds them) tile each segment in order; they follow each
    /// other remotely, never cross a remote chunk, span at most `max_sge`
    /// segments, and each ends only where it must (a remote chunk's end,
    /// `max_sge` segments, the last byte); `dma_gather_count` counts them.
    #[test]
    fn dma_gathers_tile_the_segments_within_remote_chunks(
        lens in proptest::collection::vec(prop_oneof![Just(0u32), 1u32..(1 << 18)], 0..40),
        ro in 0u64..(1 << 40), rs in 9u32..=24, max_sge in 0u32..8,
    ) {
        let segs: Vec<DmaSeg> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| DmaSeg { addr: (i as u64) << 32, len })
            .collect();
        let total = dma_bytes(&segs).unwrap();
        let mut r = ro;
        let mut per_seg = vec![0u64; segs.len()];
        let mut n = 0u64;
        for g in dma_gathers(&segs, ro, rs, max_sge) {
            prop_assert!(g.len > 0);
            prop_assert!(g.nsegs >= 1 && g.nsegs <= max_sge.max(1));
            prop_assert_eq!(g.remote_off, r);
            let end = g.remote_off + u64::from(g.len);
            prop_assert_eq!(g.remote_off >> rs, (end - 1) >> rs);
            // The shim's SGEs: from byte `seg_off` of the first segment,
            // each next from its start, until `len` bytes.
            let (mut off, mut left) = (u64::from(g.seg_off), u64::from(g.len));
            for i in g.seg..g.seg + g.nsegs as usize {
                prop_assert!(i < segs.len());
                let take = (u64::from(segs[i].len) - off).min(left);
                // In order: right after what came before.
                prop_assert_eq!(off, per_seg[i]);
                prop_assert!(per_seg[i + 1..].iter().all(|&b| b == 0));
                per_seg[i] += take;
                left -= take;
                off = 0;
            }
            prop_assert_eq!(left, 0);
            // It ends at a chunk's end, after `max_sge` segments, or at
            // the last byte.
            let done: u64 = per_seg.iter().sum();
            prop_assert!(end & ((1 << rs) - 1) == 0 || g.nsegs == max_sge.max(1) || done == total);
            r = end;
            n += 1;
        }
        for (s, got) in segs.iter().zip(per_seg.iter()) {
            prop_assert_eq!(u64::from(s.len), *got);
        }
        prop_assert_eq!(r - ro, total);
        prop_assert_eq!(dma_gather_count(&segs, ro, rs, max_sge), n);
    }
}

proptest! {
    /// A gap-free list (a first segment ending on a page edge, whole
    /// pages, a last starting on one): a range's page count is the pages
    /// its bytes touch, counted byte by byte; ranges tile the bytes.
    #[test]
    fn range_pages_counts_the_pages_touched(
        first_off in 0u32..4096, npages in 0usize..6, last_len in 1u32..=4096,
        page_nos in proptest::collection::vec(0u64..1000, 8),
        off in 0u64..40000, len in 1u64..40000, rs in 9u32..16,
    ) {
        let mut segs = vec![DmaSeg { addr: (page_nos[0] << 12) + u64::from(first_off), len: 4096 - first_off }];
        for i in 0..npages {
            segs.push(DmaSeg { addr: page_nos[i + 1] << 12, len: 4096 });
        }
        segs.push(DmaSeg { addr: page_nos[7] << 12, len: last_len });
        let total = dma_bytes(&segs).unwrap();
        let mut pages = std::collections::BTreeSet::new();
        if off + len <= total {
            let mut pos = 0u64;
            for s in &segs {
                for b in 0..u64::from(s.len) {
                    if (off..off + len).contains(&(pos + b)) {
                        pages.insert((pos, (s.addr + b) >> 12));
                    }
                }
                pos += u64::from(s.len);
            }
            prop_assert_eq!(range_pages(&segs, off, len, 12), Some(pages.len() as u64));
        } else {
            prop_assert_eq!(range_pages(&segs, off, len, 12), None);
        }
        let mut next = 0;
        for r in dma_ranges(total, off, rs) {
            prop_assert_eq!(r.off, next);
            prop_assert_eq!(r.remote_off >> rs, (r.remote_off + u64::from(r.len) - 1) >> rs);
            next += u64::from(r.len);
        }
        prop_assert_eq!(next, total);
    }
}

proptest! {
    /// An operation's real work requests (segments, a registration per
    /// local chunk it touches, a fence, iWARP's READ sinks) never
    /// exceed `max_wrs`, an operation of `max_op_blocks` blocks fits
    /// the budget wherever it starts, and its READ sinks never exceed
    /// half the budget (a queue pair has that many).
    #[test]
    fn operations_fit_their_bound(
        bs_shift in 9u32..=20, lblock in 0u64..(1 << 16), rblock in 0u64..(1 << 16),
        ls in 12u32..=20, rs in 12u32..=20, budget in 6u64..600, frac in 0.0f64..=1.0,
        read in any::<bool>(), iwarp in any::<bool>(),
    ) {
        let bs = 1u32 << bs_shift;
        let max = max_op_blocks(bs, ls, rs, budget, iwarp);
        prop_assume!(max >= 1);
        let count = ((f64::from(max) * frac) as u32).clamp(1, max);
        let len = u64::from(count) * u64::from(bs);
        let dir = if read { Dir::Read } else { Dir::Write };
        let c = Checked {
            dir,
            local_off: lblock * u64::from(bs),
            remote_off: rblock * u64::from(bs),
            len,
            sent: false,
        };
        let segs = segments(&c, ls, rs).count() as u64;
        let first = c.local_off >> ls;
        let last = (c.local_off + len - 1) >> ls;
        let wrs = op_wrs(dir, segs, last - first + 1, iwarp);
        prop_assert!(wrs <= max_wrs(len, ls, rs, iwarp));
        prop_assert!(wrs <= budget);
        prop_assert!(op_sinks(dir, segs, iwarp) <= budget / 2);
        prop_assert!(max_wrs(u64::from(max) * u64::from(bs), ls, rs, iwarp) <= budget);
    }
}
