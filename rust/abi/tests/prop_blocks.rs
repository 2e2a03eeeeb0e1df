// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of a region's geometry: a span of blocks is accepted
//! only inside the region, and then its bytes are too.

mod branches;

use branches::{Branches, COUNTED_CASES};
use proptest::prelude::*;
use proptest::sample::Index;
use rrdma_abi::blocks::Geometry;
use rrdma_abi::errno::{EINVAL, EOVERFLOW, ERANGE};

/// Where a span starts.
#[derive(Clone, Copy, Debug)]
enum First {
    /// At a block of the region.
    Inside(Index),
    /// So that it ends `k` blocks past the region's end (inside it
    /// for `k < 0`).
    PastEnd(i8),
    /// Anywhere.
    At(u64),
}

#[test]
fn spans_stay_inside_the_region() {
    let branches = Branches::new(
        "spans_stay_inside_the_region",
        &["accepted", "EINVAL", "EOVERFLOW", "ERANGE"],
    );
    let nblocks = prop_oneof![1 => 1u64..16, 3 => 1u64..1_000_000];
    let first = prop_oneof![
        4 => any::<Index>().prop_map(First::Inside),
        2 => (-2i8..=2).prop_map(First::PastEnd),
        1 => any::<u64>().prop_map(First::At),
        1 => (0u64..4).prop_map(|k| First::At(u64::MAX - k)),
    ];
    let count = prop_oneof![1 => Just(0u32), 6 => 1u32..64, 1 => any::<u32>()];
    proptest!(ProptestConfig::with_cases(COUNTED_CASES),
              |(bs_shift in 9u32..=20, nblocks in nblocks, first in first, count in count)| {
        let g = Geometry::new(1 << bs_shift, nblocks, u64::MAX).unwrap();
        let first = match first {
            // A span that fits, if the region is large enough.
            First::Inside(i) => i.index((nblocks.saturating_sub(u64::from(count)) + 1) as usize) as u64,
            First::PastEnd(k) => {
                let f = i128::from(nblocks) - i128::from(count) + i128::from(k);
                u64::try_from(f.max(0)).unwrap()
            }
            First::At(f) => f,
        };
        let end = u128::from(first) + u128::from(count);
        let expected = if count == 0 {
            Err(EINVAL)
        } else if end > u128::from(u64::MAX) {
            Err(EOVERFLOW)
        } else if end > u128::from(nblocks) {
            Err(ERANGE)
        } else {
            Ok(())
        };
        let got = g.span(first, count);
        prop_assert_eq!(got.map(|_| ()), expected);
        match got {
            Ok((off, len)) => {
                prop_assert_eq!(off, first * u64::from(g.block_size()));
                prop_assert_eq!(len, u64::from(count) * u64::from(g.block_size()));
                prop_assert!(off + len <= g.bytes());
                branches.took("accepted");
            }
            Err(e) if e == EINVAL => branches.took("EINVAL"),
            Err(e) if e == EOVERFLOW => branches.took("EOVERFLOW"),
            Err(_) => branches.took("ERANGE"),
        }
    });
    branches.require(&[
        ("accepted", 30),
        ("EINVAL", 3),
        ("EOVERFLOW", 3),
        ("ERANGE", 5),
    ]);
}
