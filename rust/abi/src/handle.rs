// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Object handles: small integers in a per-file namespace, never reused.
//!
//! A file hands out handles from a counter: 1, 2, 3, ... A destroyed
//! object's handle is not given to another object until the counter has
//! gone once around all 2^32 - 1 values (0 is never a handle), and even
//! then a value still in use is skipped. A stale handle therefore names
//! nothing (`ENOENT`) for as long as a program could plausibly keep one:
//! at a million objects per second, the counter wraps after 71 minutes of
//! nothing but creating objects, and ioctls on these guests are slower
//! than that by orders of magnitude. (An earlier scheme kept an 8-bit
//! generation per slot: 256 reuses of one slot made a stale handle valid
//! again.)

/// Most objects one file may hold at once (`ENOSPC` beyond).
pub const MAX_OBJECTS: usize = 1 << 20;

/// The handle counter of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandleCounter {
    next: u32,
}

impl Default for HandleCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl HandleCounter {
    /// A counter whose first handle is 1.
    pub const fn new() -> Self {
        Self { next: 1 }
    }

    /// A counter whose next handle is `next` (tests of the wrap).
    pub const fn starting_at(next: u32) -> Self {
        Self { next }
    }

    /// The next handle for which `in_use` is false, skipping 0. `None` only
    /// if every value is in use (impossible with [`MAX_OBJECTS`] enforced).
    pub fn allocate(&mut self, in_use: impl Fn(u32) -> bool) -> Option<u32> {
        // At most MAX_OBJECTS values can be in use, so a free one is found
        // within MAX_OBJECTS + 2 probes; the bound keeps this total.
        for _ in 0..=MAX_OBJECTS + 1 {
            let h = self.next;
            self.next = self.next.wrapping_add(1);
            if h != 0 && !in_use(h) {
                return Some(h);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_count_up_from_one() {
        let mut c = HandleCounter::new();
        assert_eq!(c.allocate(|_| false), Some(1));
        assert_eq!(c.allocate(|_| false), Some(2));
        assert_eq!(c.allocate(|h| h == 3), Some(4));
    }

    #[test]
    fn wrap_skips_zero_and_live_handles() {
        let mut c = HandleCounter::starting_at(u32::MAX);
        assert_eq!(c.allocate(|_| false), Some(u32::MAX));
        assert_eq!(c.allocate(|h| h == 1 || h == 2), Some(3));
    }

    #[test]
    fn a_destroyed_handle_is_not_reused_soon() {
        let mut c = HandleCounter::new();
        let first = c.allocate(|_| false).unwrap();
        // Create and destroy many objects: the first handle never returns.
        for _ in 0..100_000 {
            assert_ne!(c.allocate(|_| false), Some(first));
        }
    }
}
