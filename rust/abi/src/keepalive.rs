// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Keepalive: how a connection notices a peer that went silent.
//!
//! A one-sided operation costs the peer's CPU nothing and tells the
//! exporter nothing, and a peer that is paused, cut off or dead sends no
//! disconnect: over iWARP the TCP stack retransmits for many minutes before
//! it gives up. So each side checks its peer on its own: when no answer to
//! anything of ours (an import response, a revoke acknowledgement, a pong,
//! or the successful completion of a block operation) has arrived for one
//! interval, it sends a `Ping`, and when none has arrived for `interval ×
//! misses`, the peer is gone and the connection ends with `ETIMEDOUT`. Only
//! answers count: they prove that the peer got something of ours and is
//! sending, so a link that fails one way is noticed on both sides. One ping
//! is outstanding at most (the wire protocol's bound).
//!
//! The timer runs every half interval (and at the limit), so a ping leaves
//! one to one and a half intervals after the last answer, and the peer has
//! at least `misses − 1.5` intervals to answer it. Control messages share
//! the queue pair with data: a pong waits behind the operations the peer
//! queued before it, so the limit must exceed the time the peer needs to
//! send what it has queued.
//!
//! Each side's settings are its own (CONNECT's fields on the active side,
//! the module parameters on the passive side); a peer of protocol version
//! 3 or newer answers pings whatever its own settings. [`Clock`] is the
//! pure timer logic, in the kernel's time unit (jiffies).

use super::errno::{Errno, EINVAL, EPROTO};

/// Shortest interval, in milliseconds.
pub const INTERVAL_MS_MIN: u32 = 100;
/// Longest interval, in milliseconds (CONNECT's field is 16 bits).
pub const INTERVAL_MS_MAX: u32 = u16::MAX as u32;
/// Fewest intervals without an answer before the peer is declared gone.
pub const MISSES_MIN: u32 = 2;
/// Most intervals without an answer before the peer is declared gone.
pub const MISSES_MAX: u32 = 255;
/// Interval when neither CONNECT nor the module parameter sets one.
pub const DEFAULT_INTERVAL_MS: u32 = 5000;
/// Misses when neither CONNECT nor the module parameter sets them.
pub const DEFAULT_MISSES: u32 = 6;

/// A connection's keepalive settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Milliseconds without an answer before a ping goes out.
    pub interval_ms: u32,
    /// Intervals without an answer before the peer is declared gone.
    pub misses: u32,
}

impl Settings {
    /// How long the peer may stay silent, in milliseconds.
    pub fn limit_ms(&self) -> u64 {
        u64::from(self.interval_ms) * u64::from(self.misses)
    }
}

/// The module parameters' settings: an interval of 0 turns keepalive off;
/// values out of range are clamped (a parameter cannot return an errno).
pub fn from_params(interval_ms: u32, misses: u32) -> Option<Settings> {
    (interval_ms != 0).then(|| Settings {
        interval_ms: interval_ms.clamp(INTERVAL_MS_MIN, INTERVAL_MS_MAX),
        misses: misses.clamp(MISSES_MIN, MISSES_MAX),
    })
}

/// CONNECT's settings: `off` (`RRDMA_CONNECT_NO_KEEPALIVE`) with both
/// fields 0 turns keepalive off; otherwise a field of 0 takes the module's
/// value (`params`, or the defaults when the module has keepalive off). A
/// field out of range, or `off` with a field set, is `EINVAL`.
pub fn from_connect(
    off: bool,
    interval_ms: u16,
    misses: u16,
    params: Option<Settings>,
) -> Result<Option<Settings>, Errno> {
    let (ms, n) = (u32::from(interval_ms), u32::from(misses));
    if off {
        return if ms == 0 && n == 0 {
            Ok(None)
        } else {
            Err(EINVAL)
        };
    }
    if (ms != 0 && ms < INTERVAL_MS_MIN) || (n != 0 && !(MISSES_MIN..=MISSES_MAX).contains(&n)) {
        return Err(EINVAL);
    }
    let base = params.unwrap_or(Settings {
        interval_ms: DEFAULT_INTERVAL_MS,
        misses: DEFAULT_MISSES,
    });
    let s = Settings {
        interval_ms: if ms == 0 { base.interval_ms } else { ms },
        misses: if n == 0 { base.misses } else { n },
    };
    // A field of 0 with the module's keepalive off: off, unless the other
    // field asks for it.
    Ok((params.is_some() || ms != 0 || n != 0).then_some(s))
}

/// The timer's period: half an interval (at least one tick).
fn step(interval: u64) -> u64 {
    (interval / 2).max(1)
}

/// What the timer must do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// Send a ping carrying `seq`; run again `next` ticks from now.
    Ping {
        /// The ping's sequence number (never 0), which its pong echoes.
        seq: u64,
        /// Ticks until the next run (at least 1).
        next: u64,
    },
    /// Nothing due; run again `next` ticks from now.
    Wait {
        /// Ticks until the next run (at least 1).
        next: u64,
    },
    /// No answer for `silent` ticks, at least the limit: the peer is gone.
    Dead {
        /// Ticks since the last answer (or since establishment).
        silent: u64,
    },
}

/// The keepalive state of one connection, in ticks of the caller's clock
/// (jiffies). Times are compared with wrapping arithmetic.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    interval: u64,
    limit: u64,
    last_answer: u64,
    ping: Option<u64>,
    next_seq: u64,
}

impl Clock {
    /// Starts at `now` (establishment counts as an answer). `interval` is
    /// at least one tick; `misses` at least [`MISSES_MIN`].
    pub fn new(interval: u64, misses: u32, now: u64) -> Self {
        let interval = interval.max(1);
        Self {
            interval,
            limit: interval.saturating_mul(u64::from(misses.max(MISSES_MIN))),
            last_answer: now,
            ping: None,
            next_seq: 1,
        }
    }

    /// Whether a ping is outstanding.
    pub fn ping_outstanding(&self) -> bool {
        self.ping.is_some()
    }

    /// The peer answered one of our requests (any answer).
    pub fn answered(&mut self, now: u64) {
        self.last_answer = now;
    }

    /// The peer's transport answered at `at` (a data operation's
    /// completion, recorded where it was handled and read at the tick):
    /// counts as an answer unless an answer after it is known already.
    pub fn heard(&mut self, at: u64) {
        if (at.wrapping_sub(self.last_answer) as i64) > 0 {
            self.last_answer = at;
        }
    }

    /// The peer answered ping `seq`: `EPROTO` if that is not the ping
    /// outstanding.
    pub fn pong(&mut self, seq: u64, now: u64) -> Result<(), Errno> {
        if self.ping != Some(seq) {
            return Err(EPROTO);
        }
        self.ping = None;
        self.answered(now);
        Ok(())
    }

    /// The timer ran at `now`.
    pub fn tick(&mut self, now: u64) -> Tick {
        let silent = now.wrapping_sub(self.last_answer);
        if silent >= self.limit {
            return Tick::Dead { silent };
        }
        let next = step(self.interval).min(self.limit - silent);
        if self.ping.is_some() || silent < self.interval {
            return Tick::Wait { next };
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        self.ping = Some(seq);
        Tick::Ping { seq, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn params_clamp_and_zero_is_off() {
        assert_eq!(from_params(0, 3), None);
        assert_eq!(
            from_params(1, 0),
            Some(Settings {
                interval_ms: INTERVAL_MS_MIN,
                misses: MISSES_MIN
            })
        );
        assert_eq!(
            from_params(u32::MAX, u32::MAX),
            Some(Settings {
                interval_ms: INTERVAL_MS_MAX,
                misses: MISSES_MAX
            })
        );
    }

    #[test]
    fn connect_fields() {
        let p = from_params(5000, 3);
        let s = |interval_ms, misses| {
            Some(Settings {
                interval_ms,
                misses,
            })
        };
        assert_eq!(from_connect(false, 0, 0, p), Ok(p));
        assert_eq!(from_connect(false, 300, 0, p), Ok(s(300, 3)));
        assert_eq!(from_connect(false, 0, 7, p), Ok(s(5000, 7)));
        assert_eq!(from_connect(false, 300, 4, None), Ok(s(300, 4)));
        assert_eq!(
            from_connect(false, 300, 0, None),
            Ok(s(300, DEFAULT_MISSES))
        );
        assert_eq!(from_connect(false, 0, 0, None), Ok(None));
        assert_eq!(from_connect(true, 0, 0, p), Ok(None));
        assert_eq!(from_connect(true, 300, 0, p), Err(EINVAL));
        assert_eq!(from_connect(true, 0, 2, p), Err(EINVAL));
        assert_eq!(from_connect(false, 99, 0, p), Err(EINVAL));
        assert_eq!(from_connect(false, 0, 1, p), Err(EINVAL));
        assert_eq!(from_connect(false, 0, 256, p), Err(EINVAL));
        assert_eq!(from_connect(false, u16::MAX, 255, p), Ok(s(65535, 255)));
    }

    #[test]
    fn a_silent_peer_is_pinged_then_declared_gone() {
        let mut c = Clock::new(10, 3, 1000);
        assert_eq!(c.tick(1004), Tick::Wait { next: 5 });
        assert_eq!(c.tick(1010), Tick::Ping { seq: 1, next: 5 });
        assert_eq!(c.tick(1020), Tick::Wait { next: 5 });
        assert_eq!(c.tick(1027), Tick::Wait { next: 3 });
        assert_eq!(c.tick(1030), Tick::Dead { silent: 30 });
    }

    #[test]
    fn answers_keep_it_alive_and_pongs_must_match() {
        let mut c = Clock::new(10, 2, 0);
        assert_eq!(c.tick(10), Tick::Ping { seq: 1, next: 5 });
        assert_eq!(c.pong(2, 12), Err(EPROTO));
        assert_eq!(c.pong(1, 12), Ok(()));
        assert_eq!(c.pong(1, 13), Err(EPROTO));
        assert_eq!(c.tick(15), Tick::Wait { next: 5 });
        c.answered(20);
        assert_eq!(c.tick(29), Tick::Wait { next: 5 });
        assert_eq!(c.tick(30), Tick::Ping { seq: 2, next: 5 });
    }

    #[test]
    fn heard_only_moves_forward() {
        let base = Clock::new(10, 2, 100);
        // Older than what is known: nothing changes.
        let mut older = base;
        older.heard(90);
        assert_eq!(older.tick(125), base.clone().tick(125));
        // Newer: as an answer then.
        let (mut newer, mut answered) = (base, base);
        newer.heard(115);
        answered.answered(115);
        assert_eq!(newer.tick(125), answered.tick(125));
        assert_ne!(newer.tick(125), base.clone().tick(125));
        // Across the clock's wrap.
        let (mut w, mut a) = (
            Clock::new(10, 2, u64::MAX - 2),
            Clock::new(10, 2, u64::MAX - 2),
        );
        w.heard(3);
        a.answered(3);
        assert_eq!(w.tick(20), a.tick(20));
        w.heard(u64::MAX - 1);
        assert_eq!(w.tick(21), a.tick(21));
    }

    #[test]
    fn wraps_with_the_clock() {
        let mut c = Clock::new(10, 2, u64::MAX - 5);
        assert_eq!(c.tick(4), Tick::Ping { seq: 1, next: 5 });
        assert_eq!(c.tick(14), Tick::Dead { silent: 20 });
    }

    proptest! {
        /// Whatever the timing: at most one ping is outstanding, the timer
        /// never sleeps past the limit nor more than half an interval, and
        /// a peer is declared gone exactly when it has not answered for the
        /// limit.
        #[test]
        fn clock_invariants(
            interval in 1u64..1000,
            misses in 2u32..10,
            steps in proptest::collection::vec((0u64..1500, any::<bool>()), 1..60),
        ) {
            let mut c = Clock::new(interval, misses, 0);
            let limit = interval * u64::from(misses);
            let (mut now, mut last) = (0u64, 0u64);
            for (dt, answer) in steps {
                now += dt;
                if answer {
                    if let Some(seq) = c.ping {
                        prop_assert_eq!(c.pong(seq, now), Ok(()));
                        last = now;
                    }
                }
                let had_ping = c.ping_outstanding();
                match c.tick(now) {
                    Tick::Dead { silent } => {
                        prop_assert_eq!(silent, now - last);
                        prop_assert!(silent >= limit);
                        return Ok(());
                    }
                    Tick::Ping { seq, next } => {
                        prop_assert!(!had_ping && seq != 0);
                        prop_assert!(now - last >= interval);
                        prop_assert!(next >= 1 && next <= step(interval));
                        prop_assert!(now + next - last <= limit);
                    }
                    Tick::Wait { next } => {
                        prop_assert!(next >= 1 && next <= step(interval));
                        prop_assert!(now + next - last <= limit);
                    }
                }
            }
        }

        /// With the timer run when it asks, a ping leaves less than one
        /// and a half intervals after the last answer, and a peer that
        /// answers within the rest of the limit is never declared gone.
        #[test]
        fn a_prompt_peer_is_never_declared_gone(
            interval in 2u64..1000,
            misses in 2u32..10,
            delays in proptest::collection::vec(0u64..100_000, 1..60),
        ) {
            let mut c = Clock::new(interval, misses, 0);
            let limit = interval * u64::from(misses);
            let window = limit - interval - step(interval);
            let (mut now, mut last) = (0u64, 0u64);
            let mut pong: Option<(u64, u64)> = None;
            for d in delays {
                let next = match c.tick(now) {
                    Tick::Dead { .. } => {
                        prop_assert!(false, "declared gone");
                        unreachable!()
                    }
                    Tick::Ping { seq, next } => {
                        prop_assert!(now - last < interval + step(interval));
                        pong = Some((seq, now + d % window.max(1)));
                        next
                    }
                    Tick::Wait { next } => next,
                };
                // The pong arrives before the next run if it is due by then.
                if let Some((seq, at)) = pong {
                    if at <= now + next {
                        prop_assert_eq!(c.pong(seq, at), Ok(()));
                        last = at;
                        pong = None;
                    }
                }
                now += next;
            }
        }
    }
}
