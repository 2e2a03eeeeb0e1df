// SPDX-License-Identifier: GPL-2.0 OR MIT

//! When read(2) of completion records waits for more before it returns
//! (module parameter `read_gather`, off by default).
//!
//! A file's operations complete on the queues of their connections, and
//! each queue's completions reach the file's ring, and wake its reader,
//! on their own. With one connection a batch of operations mostly
//! completes in one or two trips; spread over many connections it comes
//! in as many trips, and a reader that sleeps in poll(2) between them
//! pays a wake-up and two system calls for every one (a batch of 32
//! WRITEs over 16 connections took 11 waits on siw; writes that complete
//! once sent, which siw completes one by one, 30 on one connection). So
//! with `read_gather=Y` a read that found records while more
//! operations are in flight may wait for more: it spins, giving its CPU
//! to whatever else can run between looks (the provider's own threads
//! may need it to complete those very operations), for as long as the
//! gaps between the file's arrivals say more will come soon, as
//! synchronous operations do ([`super::poll`]).
//!
//! The file learns those gaps itself: each trip of completions into its
//! ring that leaves operations in flight starts a gap, which the next
//! trip ends and feeds into a moving mean ([`Arrivals`]). A read waits
//! [`window_ns`] from its last record for the next one (twice the mean
//! gap; not at all while the mean is longer than
//! [`super::poll::AUTO_MEAN_MAX_NS`] or not yet known), and never more
//! than [`GATHER_MAX_NS`] in all. It stops as soon as nothing is in
//! flight or it holds half of what it found and what was in flight
//! ([`target`]): a reader that keeps its queue full (submitting again
//! as operations complete) must not find it drained, which would make
//! "submit 16, wait for all 16" of a stream at depth 16.
//! `read_gather_us` fixes the window.
//!
//! It is off by default because it spins: on one guest with a vCPU to
//! spare it made siw's writes that complete once sent 1.20-1.26x faster
//! at every fan-out (they complete one by one: 30 waits per batch of 32
//! became 6; 1.04-1.11x between two guests), and changed nothing much
//! elsewhere (0.92-1.16x); between two guests whose vCPUs share the
//! host's cores, other streams at depth 16 lost up to 26% (rxe; siw's
//! placed writes 18%; `make bench`, 2026-11-29).

use super::poll::{mean_after, window_ns as poll_window_ns, SyncPoll};

/// The longest a read(2) gathers records, however often they come.
pub const GATHER_MAX_NS: u64 = 1_000_000;

/// The gaps between a file's trips of completions into its ring, while
/// operations are in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrivals {
    /// When the last trip that left operations in flight came (0: the
    /// last trip left none, or none came yet).
    busy_at: u64,
    /// Moving mean of the gaps (0: not known yet).
    mean_ns: u64,
}

impl Arrivals {
    /// None seen yet.
    pub const fn new() -> Self {
        Self {
            busy_at: 0,
            mean_ns: 0,
        }
    }

    /// A trip of completions came at `now_ns`; `in_flight`: operations
    /// are still in flight after it. A trip after one that left nothing
    /// in flight ends no gap: what came before it was the caller's own
    /// time, not the operations'.
    pub fn note(&mut self, now_ns: u64, in_flight: bool) {
        if self.busy_at != 0 {
            self.mean_ns = mean_after(self.mean_ns, now_ns.saturating_sub(self.busy_at));
        }
        self.busy_at = if in_flight { now_ns.max(1) } else { 0 };
    }

    /// The mean gap in ns (0: not known yet).
    pub fn mean_ns(&self) -> u64 {
        self.mean_ns
    }
}

/// The records a read gathers up to, having found `found` with
/// `in_flight` operations in flight and room for `max` (at least
/// `found`): half of the two together, rounded up, within its room. A
/// read that holds as many already does not gather.
pub const fn target(found: usize, in_flight: usize, max: usize) -> usize {
    let half = (found + in_flight).div_ceil(2);
    if half > max {
        max
    } else if half < found {
        found
    } else {
        half
    }
}

/// How long a read waits for the next record after its last one, in ns
/// (0: it returns what it has): `mode` from the module parameters, with
/// the bounds of a synchronous operation's window.
pub const fn window_ns(mode: SyncPoll, mean_gap_ns: u64) -> u64 {
    poll_window_ns(mode, mean_gap_ns)
}

#[cfg(test)]
mod tests {
    use super::super::poll::{mode, AUTO_MEAN_MAX_NS, AUTO_WINDOW_MIN_NS};
    use super::*;

    #[test]
    fn gaps_only_while_operations_are_in_flight() {
        let mut a = Arrivals::new();
        assert_eq!(a.mean_ns(), 0);
        // The first trip, and one after the caller's idle time, end no gap.
        a.note(1_000, false);
        a.note(900_000_000, true);
        assert_eq!(a.mean_ns(), 0);
        a.note(900_040_000, true);
        assert_eq!(a.mean_ns(), 40_000);
        a.note(900_080_000, false);
        assert_eq!(a.mean_ns(), 40_000);
        // Seconds of the caller's own: not a gap.
        a.note(905_000_000_000, true);
        assert_eq!(a.mean_ns(), 40_000);
        // A clock that did not move is a gap of 1 ns, not an unknown mean.
        let mut b = Arrivals::new();
        b.note(0, true);
        b.note(0, true);
        assert_eq!(b.mean_ns(), 1);
    }

    #[test]
    fn targets_keep_half_in_flight() {
        // Found 2 of a batch of 32: up to 16, so a reader that submits
        // again finds half of its queue still in flight.
        assert_eq!(target(2, 30, 32), 16);
        assert_eq!(target(1, 0, 32), 1);
        assert_eq!(target(1, 1, 32), 1);
        assert_eq!(target(1, 2, 32), 2);
        assert_eq!(target(4, 200, 16), 16);
        // Never below what it holds, nor above its room or all there is.
        for found in 1..40 {
            for in_flight in 0..40 {
                for max in found..40 {
                    let t = target(found, in_flight, max);
                    assert!(t >= found && t <= max, "{found} {in_flight} {max}: {t}");
                    assert!(t <= found + in_flight);
                }
            }
        }
    }

    #[test]
    fn windows_follow_the_gaps() {
        let auto = mode(true, 0);
        assert_eq!(window_ns(auto, 0), 0);
        assert_eq!(window_ns(auto, 5_000), AUTO_WINDOW_MIN_NS);
        assert_eq!(window_ns(auto, 100_000), 200_000);
        assert_eq!(window_ns(auto, AUTO_MEAN_MAX_NS + 1), 0);
        assert_eq!(window_ns(mode(false, 0), 100_000), 0);
        assert_eq!(window_ns(mode(true, 30), 0), 30_000);
        assert!(window_ns(mode(true, 5_000), 0) <= GATHER_MAX_NS);
    }

    #[test]
    fn a_slow_stretch_turns_gathering_off_then_on() {
        let auto = mode(true, 0);
        let mut a = Arrivals::new();
        let mut t = 1;
        for _ in 0..50 {
            t += 30_000;
            a.note(t, true);
        }
        assert!(window_ns(auto, a.mean_ns()) > 0);
        for _ in 0..50 {
            t += 2_000_000;
            a.note(t, true);
        }
        assert_eq!(window_ns(auto, a.mean_ns()), 0);
        let mut trips = 0;
        while window_ns(auto, a.mean_ns()) == 0 {
            t += 30_000;
            a.note(t, true);
            trips += 1;
        }
        assert!(trips < 40, "{trips} trips before gathering again");
    }
}
