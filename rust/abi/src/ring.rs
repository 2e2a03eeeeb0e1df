// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Bookkeeping of the per-file completion ring that read(2) drains.
//!
//! The storage (an array of `capacity` records) belongs to the caller;
//! [`RingIndex`] says which slot to use. Three rules:
//!
//! - **Reservations**: every operation reserves its completion's slot when
//!   it is submitted, so a completion always finds room and none is ever
//!   dropped; a submitter that would overrun the ring is told to reap first.
//! - **No user copy under the ring's lock**: a reader *lends* records out of
//!   the ring (copying them to its own buffer under the lock), copies them
//!   to user memory without the lock, then *settles*: what it could not
//!   deliver (a fault) goes back to the front. Lent records keep their
//!   space, so giving them back always fits. A reader stalled on a
//!   userfaultfd page therefore holds up nobody: not completions, not
//!   poll(2), not other readers, not teardown.
//! - `len + reserved + lent <= capacity`, always.

/// Index state of a ring of `capacity` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingIndex {
    capacity: usize,
    head: usize,
    len: usize,
    reserved: usize,
    lent: usize,
}

impl RingIndex {
    /// An empty ring of `capacity` slots (at least one).
    pub const fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        Self {
            capacity,
            head: 0,
            len: 0,
            reserved: 0,
            lent: 0,
        }
    }

    /// Records ready to read.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no record is ready.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots reserved by operations in flight.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Records lent to readers that have not settled yet.
    pub fn lent(&self) -> usize {
        self.lent
    }

    fn free(&self) -> usize {
        self.capacity - self.len - self.reserved - self.lent
    }

    /// `x` modulo the capacity, for `x < 2 * capacity` (every index sum
    /// here is one); a subtraction rather than a division.
    fn wrap(&self, x: usize) -> usize {
        if x >= self.capacity {
            x - self.capacity
        } else {
            x
        }
    }

    /// Reserves up to `n` slots; returns how many were.
    pub fn reserve(&mut self, n: usize) -> usize {
        let n = n.min(self.free());
        self.reserved += n;
        n
    }

    /// Gives back `n` unused reservations.
    pub fn unreserve(&mut self, n: usize) {
        self.reserved -= n.min(self.reserved);
    }

    /// The slot a reserved completion goes to; `None` if nothing was
    /// reserved (a bug in the caller: the completion has no room).
    pub fn push(&mut self) -> Option<usize> {
        if self.reserved == 0 {
            return None;
        }
        self.reserved -= 1;
        let slot = self.wrap(self.head + self.len);
        self.len += 1;
        Some(slot)
    }

    /// Lends up to `max` records from the front: returns the slot of the
    /// first and how many, in order (slot `(first + i) % capacity`). The
    /// caller copies them out before releasing its lock, then calls
    /// [`Self::settle`] with the same count.
    pub fn lend(&mut self, max: usize) -> (usize, usize) {
        let n = max.min(self.len);
        let first = self.head;
        self.head = self.wrap(self.head + n);
        self.len -= n;
        self.lent += n;
        (first, n)
    }

    /// Settles a loan of `n` records of which the first `delivered` reached
    /// the reader's user. The others go back to the front of the ring, in
    /// order: returns the slot where the caller writes the first of them
    /// (then the next slots, modulo the capacity).
    pub fn settle(&mut self, n: usize, delivered: usize) -> usize {
        let n = n.min(self.lent);
        let back = n - delivered.min(n);
        self.lent -= n;
        self.head = self.wrap(self.head + self.capacity - back);
        self.len += back;
        self.head
    }

    /// Slot index `i` places after `first` (`first` a slot, `i` at most
    /// the capacity).
    pub fn slot(&self, first: usize, i: usize) -> usize {
        self.wrap(first + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_bound_the_ring() {
        let mut r = RingIndex::new(4);
        assert_eq!(r.reserve(10), 4);
        assert_eq!(r.reserve(1), 0);
        assert_eq!(r.push(), Some(0));
        assert_eq!(r.push(), Some(1));
        r.unreserve(2);
        assert_eq!(r.push(), None);
        assert_eq!(r.len(), 2);
        assert_eq!(r.reserve(3), 2);
    }

    #[test]
    fn a_failed_delivery_goes_back_to_the_front() {
        let mut r = RingIndex::new(4);
        r.reserve(3);
        for _ in 0..3 {
            r.push();
        }
        let (first, n) = r.lend(3);
        assert_eq!((first, n), (0, 3));
        assert_eq!(r.len(), 0);
        // Lent records keep their space.
        assert_eq!(r.reserve(4), 1);
        assert_eq!(r.push(), Some(3));
        // One delivered; two go back in front of the new record.
        let at = r.settle(3, 1);
        assert_eq!(at, 1);
        assert_eq!(r.len(), 3);
        assert_eq!(r.lend(4), (1, 3));
    }
}
