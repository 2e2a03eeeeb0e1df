// SPDX-License-Identifier: GPL-2.0 OR MIT

//! How often each branch of a property was taken. A property whose
//! generator stops reaching one of its branches then fails, instead of
//! passing without ever running that branch's assertions.
//!
//! The property tests (`prop_*.rs`) build their inputs rather than draw
//! them at random: a random ioctl number, GET_INFO argument or control
//! message is almost never one the rules accept, and a property whose
//! accepting branch never runs passes without testing anything. So
//! generators start from valid inputs and break some of them in one way,
//! and the properties count their branches ([`Branches`]) and fail when one
//! is no longer reached often enough.

use std::sync::atomic::{AtomicU32, Ordering};

/// Cases of the properties that count their branches: enough for the
/// shares to be stable, few enough to stay well under a second.
pub const COUNTED_CASES: u32 = 1000;

/// Cases below which shares mean little (a run with `PROPTEST_CASES` set
/// low): then each branch need only be reached once.
const FEW_CASES: u32 = 100;

/// The cases of one property, counted by the branch each took.
pub struct Branches {
    property: &'static str,
    names: &'static [&'static str],
    counts: Vec<AtomicU32>,
}

impl Branches {
    /// Counters for `property`, whose cases each take one of `names`.
    pub fn new(property: &'static str, names: &'static [&'static str]) -> Self {
        Self {
            property,
            names,
            counts: names.iter().map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// A case took `branch`.
    pub fn took(&self, branch: &str) {
        let i = self
            .names
            .iter()
            .position(|n| *n == branch)
            .unwrap_or_else(|| panic!("{}: no branch {branch:?}", self.property));
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Asserts that each `(branch, percent)` of `shares` took at least
    /// that percentage of the cases.
    pub fn require(&self, shares: &[(&str, u32)]) {
        let counts: Vec<u32> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u32 = counts.iter().sum();
        let tally: Vec<String> = self
            .names
            .iter()
            .zip(&counts)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        // Seen with --nocapture: the figures behind the shares.
        eprintln!("{}: {total} cases: {}", self.property, tally.join(", "));
        for &(branch, percent) in shares {
            let i = self
                .names
                .iter()
                .position(|n| *n == branch)
                .unwrap_or_else(|| panic!("{}: no branch {branch:?}", self.property));
            let took = counts[i];
            let enough = if total < FEW_CASES {
                took > 0
            } else {
                u64::from(took) * 100 >= u64::from(total) * u64::from(percent)
            };
            assert!(
                enough,
                "{}: branch {branch:?} took {took} of {total} cases, under the {percent}% its \
                 generator must reach ({})",
                self.property,
                tally.join(", ")
            );
        }
    }
}
