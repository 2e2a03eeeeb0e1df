// SPDX-License-Identifier: GPL-2.0

//! The per-file completion ring that read(2) drains: storage for
//! [`crate::abi::ring::RingIndex`], whose rules (reservations at submit,
//! lending to readers, settling) are tested on the host.

use kernel::prelude::*;

use crate::abi::Result;
use crate::abi::{gather::Arrivals, ring::RingIndex, uapi::Completion};

/// Completions one file can have outstanding (in flight or unread).
pub(crate) const RING_CAPACITY: usize = 1024;

/// Records one read(2) moves per trip through the lock.
pub(crate) const READ_BATCH: usize = 16;

/// A bounded FIFO of completions with reservations.
pub(crate) struct Ring {
    index: RingIndex,
    entries: KVVec<Completion>,
    /// The gaps between trips of completions, for read(2)'s gathering.
    arrivals: Arrivals,
}

impl Ring {
    /// An empty ring of [`RING_CAPACITY`] entries.
    pub(crate) fn new() -> Result<Self> {
        let mut entries = KVVec::with_capacity(RING_CAPACITY, GFP_KERNEL)?;
        for _ in 0..RING_CAPACITY {
            entries.push(Completion::zeroed(), GFP_KERNEL)?;
        }
        Ok(Self {
            index: RingIndex::new(RING_CAPACITY),
            entries,
            arrivals: Arrivals::new(),
        })
    }

    /// Reserves up to `n` slots; returns how many were.
    pub(crate) fn reserve(&mut self, n: usize) -> usize {
        self.index.reserve(n)
    }

    /// Gives back `n` unused reservations.
    pub(crate) fn unreserve(&mut self, n: usize) {
        self.index.unreserve(n)
    }

    /// Stores a completion in a reserved slot.
    pub(crate) fn push(&mut self, c: Completion) {
        match self.index.push() {
            Some(slot) => self.entries[slot] = c,
            // Every pushed completion was reserved.
            None => crate::ffi::internal_error!(
                "completion ring overrun; completion {:#x} dropped\n",
                c.user_data
            ),
        }
    }

    /// A trip of completions was pushed at `now_ns` (`abi::gather`).
    pub(crate) fn arrived(&mut self, now_ns: u64) {
        let in_flight = self.in_flight() > 0;
        self.arrivals.note(now_ns, in_flight);
    }

    /// The mean gap between trips while operations are in flight, in ns
    /// (0: not known yet).
    pub(crate) fn mean_gap_ns(&self) -> u64 {
        self.arrivals.mean_ns()
    }

    /// Completions ready to read.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Slots reserved by operations in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.index.reserved()
    }

    /// Lends up to `out.len()` records to a reader, copying them into
    /// `out`; returns how many. The reader settles with [`Self::settle`].
    pub(crate) fn lend(&mut self, out: &mut [Completion]) -> usize {
        let (first, n) = self.index.lend(out.len());
        for (i, o) in out.iter_mut().take(n).enumerate() {
            *o = self.entries[self.index.slot(first, i)];
        }
        n
    }

    /// Settles a loan of `lent.len()` records of which the first
    /// `delivered` reached the reader's user; the others go back to the
    /// front, in order.
    pub(crate) fn settle(&mut self, lent: &[Completion], delivered: usize) {
        let at = self.index.settle(lent.len(), delivered);
        for (i, c) in lent.iter().skip(delivered).enumerate() {
            let slot = self.index.slot(at, i);
            self.entries[slot] = *c;
        }
    }
}
