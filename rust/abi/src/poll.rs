// SPDX-License-Identifier: GPL-2.0 OR MIT

//! When a synchronous operation (`RW_SYNC`) polls for its completion, and
//! for how long.
//!
//! Polling saves the two wake-ups of a completion that is waited for (the
//! completion queue's softirq, then the task), which on a short round trip
//! are a large part of it. It spends the CPU it spins on, so it pays only
//! when the completion comes soon. By default the window adapts, as NVMe's
//! hybrid polling does, to the connection's own completion times: each
//! operation's time from its post to the handling of its completion (by
//! the CQ's poll or by its own, not its task's wake-up, which would count
//! the cost that polling saves against polling) feeds a moving mean
//! ([`mean_after`], robust to a heavy tail); an operation polls for twice that mean
//! ([`window_ns`]), and not at all while the mean is long (more than
//! [`AUTO_MEAN_MAX_NS`]: a slow peer, a debug kernel) or not yet known.
//! An operation whose completion did not come in the window sleeps as
//! before, and its longer time raises the mean. The module parameters
//! override: `sync_poll=N` never polls, `sync_poll_us` fixes the window.
//!
//! An IOPOLL ring's poll of a queue pair follows the same policy
//! ([`iopoll_mode`], [`iopoll_window_ns`]): a poll that finds nothing
//! spins for twice the queue pair's mean wait, from its first empty poll
//! to the next progress, before it sleeps until the completion queue has
//! something (`shim/poll.c`); but never less than [`IOPOLL_SPIN_MIN_NS`]:
//! a ring's commands complete in bursts, whose long gaps made the mean
//! long while its short ones are the most, and a short spin catches
//! those (a 512 B WRITE rate at depth 16 between two guests lost 18%
//! without it, measured before [`mean_after`] bounded a sample to twice
//! the mean, which keeps the long gaps from dominating as well).
//! `iopoll_spin=N` sleeps at once and `iopoll_spin_us` fixes the spin,
//! without the bound of a synchronous window (a poller with a core of its
//! own may spin as classic IOPOLL does).

/// How synchronous operations poll (module parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPoll {
    /// Never (`sync_poll=N`).
    Off,
    /// For a fixed window, in ns (`sync_poll_us`).
    Fixed(u64),
    /// For twice the connection's mean completion time (the default).
    Auto,
}

/// The longest mean completion time that is still polled for.
pub const AUTO_MEAN_MAX_NS: u64 = 500_000;
/// The shortest adaptive window: a clock read and one poll cost a few
/// microseconds already.
pub const AUTO_WINDOW_MIN_NS: u64 = 20_000;
/// The longest window, fixed or adaptive (`sync_poll_us` at most 1000).
pub const WINDOW_MAX_NS: u64 = 1_000_000;

/// The mode the module parameters set: `on` is `sync_poll`, `fixed_us`
/// is `sync_poll_us` (0: adaptive).
pub const fn mode(on: bool, fixed_us: u32) -> SyncPoll {
    match iopoll_mode(on, fixed_us) {
        SyncPoll::Fixed(ns) if ns > WINDOW_MAX_NS => SyncPoll::Fixed(WINDOW_MAX_NS),
        m => m,
    }
}

/// The IOPOLL mode the module parameters set: `on` is `iopoll_spin`,
/// `fixed_us` is `iopoll_spin_us` (0: adaptive, else not bounded, unlike
/// [`mode`]'s).
pub const fn iopoll_mode(on: bool, fixed_us: u32) -> SyncPoll {
    if !on {
        SyncPoll::Off
    } else if fixed_us == 0 {
        SyncPoll::Auto
    } else {
        SyncPoll::Fixed(fixed_us as u64 * 1000)
    }
}

/// The shortest adaptive IOPOLL spin: the fixed spin IOPOLL had before
/// it adapted.
pub const IOPOLL_SPIN_MIN_NS: u64 = 50_000;

/// How long an IOPOLL poll that finds nothing spins, in ns (0: it sleeps
/// at once), given `mode` ([`iopoll_mode`]) and the queue pair's mean
/// wait `mean_ns` (0: none yet).
pub const fn iopoll_window_ns(mode: SyncPoll, mean_ns: u64) -> u64 {
    let w = window_ns(mode, mean_ns);
    match mode {
        SyncPoll::Auto if w < IOPOLL_SPIN_MIN_NS => IOPOLL_SPIN_MIN_NS,
        _ => w,
    }
}

/// How long an operation polls, in ns (0: not at all), given `mode` and
/// the connection's mean completion time `mean_ns` (0: none yet).
pub const fn window_ns(mode: SyncPoll, mean_ns: u64) -> u64 {
    match mode {
        SyncPoll::Off => 0,
        SyncPoll::Fixed(ns) => ns,
        SyncPoll::Auto => {
            if mean_ns == 0 || mean_ns > AUTO_MEAN_MAX_NS {
                0
            } else {
                let w = mean_ns * 2;
                if w < AUTO_WINDOW_MIN_NS {
                    AUTO_WINDOW_MIN_NS
                } else if w > WINDOW_MAX_NS {
                    WINDOW_MAX_NS
                } else {
                    w
                }
            }
        }
    }
}

/// The most a mean's first sample counts for: just over
/// [`AUTO_MEAN_MAX_NS`]. A slow first synchronous operation (one that
/// registers the chunks it touches, or meets a cold peer) keeps the next
/// from polling, and one fast one turns polling on; unbounded, a first
/// operation of 4 ms kept it off for about 18. The other users of
/// [`mean_after`] (an IOPOLL queue pair's wait, read(2)'s gathering) get
/// the same quick start: their window or spin follows the first short
/// waits at once instead of sitting at its floor.
pub const FIRST_SAMPLE_MAX_NS: u64 = AUTO_MEAN_MAX_NS + 1;

/// The mean after an operation that took `sample_ns`: an eighth of the way
/// from `mean_ns` to it (the first sets it), a sample counting for at most
/// twice the mean. Completion times have a heavy tail (rxe under TCG: a p50
/// of 0.3 ms and stalls of several ms): unbounded, one stall pushed the
/// mean past [`AUTO_MEAN_MAX_NS`] and turned polling off for the next
/// operations, so that a third to a half of them slept. Bounded, one stall
/// moves it by an eighth, while a run of slow ones still raises it by an
/// eighth each (a slower peer turns polling off after a few). At most
/// eight times [`AUTO_MEAN_MAX_NS`], so that polling comes back soon
/// after such a run. The first sample, which sets the mean, counts for at
/// most [`FIRST_SAMPLE_MAX_NS`].
pub const fn mean_after(mean_ns: u64, sample_ns: u64) -> u64 {
    let mut s = if sample_ns == 0 { 1 } else { sample_ns };
    // At least 16 ns: an eighth of twice a mean of a few ns is 0, which
    // would keep such a mean (a first gap of a clock that did not move)
    // where it is for good.
    let cap = if mean_ns < 8 {
        16
    } else {
        mean_ns.saturating_mul(2)
    };
    if mean_ns != 0 && s > cap {
        s = cap;
    }
    if s > 8 * AUTO_MEAN_MAX_NS {
        s = 8 * AUTO_MEAN_MAX_NS;
    }
    if mean_ns == 0 {
        if s > FIRST_SAMPLE_MAX_NS {
            FIRST_SAMPLE_MAX_NS
        } else {
            s
        }
    } else {
        let m = mean_ns - mean_ns / 8 + s / 8;
        if m == 0 {
            1
        } else {
            m
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_from_params() {
        assert_eq!(mode(false, 0), SyncPoll::Off);
        assert_eq!(mode(false, 500), SyncPoll::Off);
        assert_eq!(mode(true, 0), SyncPoll::Auto);
        assert_eq!(mode(true, 50), SyncPoll::Fixed(50_000));
        assert_eq!(mode(true, 5000), SyncPoll::Fixed(WINDOW_MAX_NS));
        // IOPOLL's fixed spin has no bound.
        assert_eq!(iopoll_mode(false, 0), SyncPoll::Off);
        assert_eq!(iopoll_mode(true, 0), SyncPoll::Auto);
        assert_eq!(iopoll_mode(true, 1_000_000), SyncPoll::Fixed(1_000_000_000));
    }

    #[test]
    fn iopoll_windows() {
        let auto = iopoll_mode(true, 0);
        // Never below the floor, also with the mean unknown or long.
        assert_eq!(iopoll_window_ns(auto, 0), IOPOLL_SPIN_MIN_NS);
        assert_eq!(iopoll_window_ns(auto, 5_000), IOPOLL_SPIN_MIN_NS);
        assert_eq!(
            iopoll_window_ns(auto, AUTO_MEAN_MAX_NS + 1),
            IOPOLL_SPIN_MIN_NS
        );
        // Twice the mean above it.
        assert_eq!(iopoll_window_ns(auto, 200_000), 400_000);
        // After a slow first wait, the floor; after one short one, twice
        // the mean it gives.
        let m = mean_after(0, 4_000_000);
        assert_eq!(iopoll_window_ns(auto, m), IOPOLL_SPIN_MIN_NS);
        let m = mean_after(m, 100_000);
        assert_eq!(iopoll_window_ns(auto, m), 2 * m);
        // Off and fixed as they say.
        assert_eq!(iopoll_window_ns(iopoll_mode(false, 0), 200_000), 0);
        assert_eq!(iopoll_window_ns(iopoll_mode(true, 7), 200_000), 7_000);
    }

    #[test]
    fn windows() {
        assert_eq!(window_ns(SyncPoll::Off, 100_000), 0);
        assert_eq!(window_ns(SyncPoll::Fixed(7), 0), 7);
        // Not known yet, or too long: no polling.
        assert_eq!(window_ns(SyncPoll::Auto, 0), 0);
        assert_eq!(window_ns(SyncPoll::Auto, AUTO_MEAN_MAX_NS + 1), 0);
        // Twice the mean, within bounds.
        assert_eq!(window_ns(SyncPoll::Auto, 150_000), 300_000);
        assert_eq!(window_ns(SyncPoll::Auto, 1_000), AUTO_WINDOW_MIN_NS);
        assert_eq!(window_ns(SyncPoll::Auto, AUTO_MEAN_MAX_NS), WINDOW_MAX_NS);
    }

    #[test]
    fn the_mean_follows_and_recovers() {
        let mut m = mean_after(0, 300_000);
        assert_eq!(m, 300_000);
        for _ in 0..100 {
            m = mean_after(m, 100_000);
        }
        assert!((100_000..101_000).contains(&m), "{m}");
        // One stall of seconds moves it by an eighth: polling stays on.
        let before = m;
        m = mean_after(m, 3_000_000_000);
        assert!(m <= before + before / 8 + 1, "{m}");
        assert_ne!(window_ns(SyncPoll::Auto, m), 0);
        // A run of slow operations (a slower peer) turns it off...
        let mut slow = 0;
        while window_ns(SyncPoll::Auto, m) != 0 {
            m = mean_after(m, 2_000_000);
            slow += 1;
        }
        assert!(slow < 20, "{slow} slow operations before polling stops");
        // ... and after a long one, from the bound, fast ones turn it on
        // again soon.
        for _ in 0..1000 {
            m = mean_after(m, 10_000_000);
        }
        assert_eq!(m, 8 * AUTO_MEAN_MAX_NS);
        let mut ops = 0;
        while window_ns(SyncPoll::Auto, m) == 0 {
            m = mean_after(m, 100_000);
            ops += 1;
        }
        assert!(ops < 20, "{ops} operations before polling again");
        // Never 0 (which means unknown) once set.
        assert_eq!(mean_after(0, 0), 1);
        assert_eq!(mean_after(1, 0), 1);
    }

    #[test]
    fn a_slow_first_operation_keeps_one_from_polling() {
        for first in [AUTO_MEAN_MAX_NS + 1, 4_000_000, u64::MAX] {
            let m = mean_after(0, first);
            assert_eq!(window_ns(SyncPoll::Auto, m), 0, "after {first}");
            let m = mean_after(m, 300_000);
            assert_ne!(window_ns(SyncPoll::Auto, m), 0, "{first} then 0.3 ms");
        }
        // A slower peer's second operation keeps polling off.
        let m = mean_after(mean_after(0, 1_000_000), 1_000_000);
        assert_eq!(window_ns(SyncPoll::Auto, m), 0);
        // A fast first one is taken as it is.
        assert_eq!(mean_after(0, AUTO_MEAN_MAX_NS), AUTO_MEAN_MAX_NS);
    }

    #[test]
    fn a_sample_moves_the_mean_an_eighth_at_most() {
        let means = [1, 7, 8, 100, 20_000, 300_000, 500_000, 4_000_000];
        let samples = [0, 1, 50_000, 300_000, 600_000, 5_000_000, u64::MAX];
        for &m in &means {
            for &s in &samples {
                let n = mean_after(m, s);
                assert!(n >= 1);
                assert!(n <= m + m / 8 + 2, "{m} then {s}: {n}");
                assert!(n + m / 8 + 1 >= m, "{m} then {s}: {n}");
            }
        }
    }

    #[test]
    fn a_mean_of_a_few_ns_still_moves() {
        for first in 0..4 {
            let mut m = mean_after(0, first);
            for _ in 0..200 {
                m = mean_after(m, 1_000_000_000);
            }
            assert_eq!(window_ns(SyncPoll::Auto, m), 0, "from {first}: {m}");
        }
    }

    #[test]
    fn a_heavy_tail_keeps_polling_on() {
        // rxe under TCG: 0.3 ms, and one stall of 3 ms in every 20.
        let mut m = 0;
        let mut off = 0;
        for i in 0..2000 {
            if i >= 100 && window_ns(SyncPoll::Auto, m) == 0 {
                off += 1;
            }
            m = mean_after(m, if i % 20 == 19 { 3_000_000 } else { 300_000 });
        }
        assert_eq!(off, 0, "polling off for {off} of 1900 operations");
    }
}
