// SPDX-License-Identifier: GPL-2.0

//! The per-file completion ring that read(2) drains.
//!
//! Every asynchronous operation reserves its slot when it is submitted, so
//! a completion always finds room: none is ever dropped, and a submitter
//! that would overrun the ring is told to reap first (`EAGAIN`).

use kernel::prelude::*;

use crate::abi::uapi::Completion;

/// Completions one file can have outstanding (in flight or unread).
pub(crate) const RING_CAPACITY: usize = 1024;

/// A bounded FIFO of completions with reservations.
pub(crate) struct Ring {
    entries: KVVec<Completion>,
    head: usize,
    len: usize,
    reserved: usize,
}

impl Ring {
    /// An empty ring of [`RING_CAPACITY`] entries.
    pub(crate) fn new() -> Result<Self> {
        let mut entries = KVVec::with_capacity(RING_CAPACITY, GFP_KERNEL)?;
        for _ in 0..RING_CAPACITY {
            entries.push(Completion::zeroed(), GFP_KERNEL)?;
        }
        Ok(Self {
            entries,
            head: 0,
            len: 0,
            reserved: 0,
        })
    }

    /// Reserves up to `n` slots; returns how many were.
    pub(crate) fn reserve(&mut self, n: usize) -> usize {
        let free = RING_CAPACITY - self.len - self.reserved;
        let n = n.min(free);
        self.reserved += n;
        n
    }

    /// Gives back `n` unused reservations.
    pub(crate) fn unreserve(&mut self, n: usize) {
        self.reserved -= n.min(self.reserved);
    }

    /// Stores a completion in a reserved slot.
    pub(crate) fn push(&mut self, c: Completion) {
        if self.reserved == 0 || self.len == RING_CAPACITY {
            // Cannot happen: every pushed completion was reserved.
            pr_warn!(
                "completion ring overrun; completion {:#x} dropped\n",
                c.user_data
            );
            return;
        }
        self.reserved -= 1;
        let tail = (self.head + self.len) % RING_CAPACITY;
        self.entries[tail] = c;
        self.len += 1;
    }

    /// Completions ready to read.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots reserved by operations in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.reserved
    }

    /// The oldest completion.
    pub(crate) fn front(&self) -> Option<&Completion> {
        (self.len > 0).then(|| &self.entries[self.head])
    }

    /// Drops the oldest completion (after it was copied out).
    pub(crate) fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % RING_CAPACITY;
            self.len -= 1;
        }
    }
}
