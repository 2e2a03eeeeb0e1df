// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Reconnect: how an active connection that asked for it
//! (`RRDMA_CONNECT_RECONNECT`) comes back after a failure.
//!
//! After a connection that was established fails (the peer disconnected or
//! went silent, the queue pair broke, the device went), the kernel tears
//! its queue pair down and tries again after a backoff: exponential from
//! `delay_ms`, capped at `max_delay_ms`, with "equal jitter" (half the step
//! fixed, half random) so that the importers of one failed exporter do not
//! come back in step. At most `attempts` tries follow one failure; an
//! establishment refills the budget. The connection then ends for good with
//! the last attempt's errno. A disk's connection tries for as long as the
//! disk is mapped ([`Policy::forever`]): its loss timeout, not the
//! connection's end, decides when its I/O fails.
//!
//! [`Budget`] is the pure logic; the kernel keeps one per connection under
//! its lock and feeds it a random number for each delay.

use super::errno::{
    Errno, EAGAIN, ECONNABORTED, ECONNRESET, EINTR, ENOMEM, ENOTCONN, ERESTARTSYS, ETIMEDOUT,
};

/// Fewest attempts after one failure.
pub const ATTEMPTS_MIN: u32 = 1;
/// Most attempts after one failure.
pub const ATTEMPTS_MAX: u32 = 1000;
/// Shortest first delay, in milliseconds.
pub const DELAY_MS_MIN: u32 = 10;
/// Longest delay, in milliseconds (10 minutes).
pub const DELAY_MS_MAX: u32 = 600_000;
/// Attempts when the module parameter is left alone.
pub const DEFAULT_ATTEMPTS: u32 = 10;
/// First delay when the module parameter is left alone.
pub const DEFAULT_DELAY_MS: u32 = 200;
/// Longest delay when the module parameter is left alone.
pub const DEFAULT_MAX_DELAY_MS: u32 = 10_000;

/// How a connection reconnects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Attempts after one failure.
    pub attempts: u32,
    /// The first delay's step, in milliseconds.
    pub delay_ms: u32,
    /// The longest step, in milliseconds.
    pub max_delay_ms: u32,
}

/// The module parameters' policy: values out of range are clamped (a
/// parameter cannot return an errno), and the cap is at least the first
/// delay.
pub fn from_params(attempts: u32, delay_ms: u32, max_delay_ms: u32) -> Policy {
    let delay_ms = delay_ms.clamp(DELAY_MS_MIN, DELAY_MS_MAX);
    Policy {
        attempts: attempts.clamp(ATTEMPTS_MIN, ATTEMPTS_MAX),
        delay_ms,
        max_delay_ms: max_delay_ms.clamp(delay_ms, DELAY_MS_MAX),
    }
}

/// `attempts` of a policy that never gives up.
const FOREVER: u32 = u32::MAX;

impl Policy {
    /// This policy, with attempts that never run out (the same delays).
    pub fn forever(self) -> Self {
        Self {
            attempts: FOREVER,
            ..self
        }
    }

    /// The step before attempt `n` (0-based): `delay_ms × 2ⁿ`, capped.
    pub fn step_ms(&self, n: u32) -> u32 {
        let step = u64::from(self.delay_ms) << n.min(32);
        step.min(u64::from(self.max_delay_ms)) as u32
    }

    /// The delay before attempt `n` with jitter `random`: half the step
    /// plus up to the other half.
    pub fn delay_ms(&self, n: u32, random: u64) -> u32 {
        let step = self.step_ms(n);
        let half = step / 2;
        half + (random % u64::from(step - half + 1)) as u32
    }
}

/// One connection's reconnect state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    policy: Policy,
    /// Attempts started since the last establishment.
    tried: u32,
    /// Establishments after the first (successful reconnects).
    reconnects: u64,
    /// Attempts started over the connection's life.
    total: u64,
    /// Whether the connection was established once (before that, a
    /// failure is CONNECT's to report, not a reason to retry).
    established: bool,
}

impl Budget {
    /// A budget for a connection not yet established.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            tried: 0,
            reconnects: 0,
            total: 0,
            established: false,
        }
    }

    /// Whether a failure now is followed by an attempt.
    pub fn may_retry(&self) -> bool {
        self.established && (self.policy.attempts == FOREVER || self.tried < self.policy.attempts)
    }

    /// Whether the connection was established before (so that a state
    /// before `Connected` is a reconnect attempt).
    pub fn was_established(&self) -> bool {
        self.established
    }

    /// An attempt starts after the returned delay (milliseconds).
    pub fn next_attempt(&mut self, random: u64) -> u32 {
        let d = self.policy.delay_ms(self.tried, random);
        self.tried = self.tried.saturating_add(1);
        self.total = self.total.saturating_add(1);
        d
    }

    /// The connection is established: the budget is full again.
    pub fn established(&mut self) {
        if self.established {
            self.reconnects = self.reconnects.saturating_add(1);
        }
        self.established = true;
        self.tried = 0;
    }

    /// Attempts since the last establishment.
    pub fn tried(&self) -> u32 {
        self.tried
    }

    /// Successful reconnects.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// Attempts over the connection's life.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }
}

/// Whether `e`, the failure to fetch an import's grant again after a
/// reconnect, is the peer's answer (the export is gone, changed, or
/// restricted: the import is revoked), rather than trouble of the
/// connection's or of this host's (no answer in time, the connection
/// failed again, no memory), after which the connection fails, so that
/// its next establishment asks again: a disk's import is not revoked by a
/// slow peer.
pub fn restore_refused(e: Errno) -> bool {
    ![
        ETIMEDOUT,
        ENOTCONN,
        ECONNRESET,
        ECONNABORTED,
        ENOMEM,
        EAGAIN,
        EINTR,
        ERESTARTSYS,
    ]
    .contains(&e)
}

/// Whether a listener refuses a connect request while `tearing` of the
/// file's connections are being torn down, with at most `max` allowed (0:
/// no limit): the reconnect-storm guard. A peer that reconnects through a
/// storm comes back after its backoff.
pub fn storm(tearing: u32, max: u32) -> bool {
    max != 0 && tearing >= max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        from_params(5, 100, 1000)
    }

    #[test]
    fn params_are_clamped() {
        assert_eq!(
            from_params(0, 1, 0),
            Policy {
                attempts: ATTEMPTS_MIN,
                delay_ms: DELAY_MS_MIN,
                max_delay_ms: DELAY_MS_MIN
            }
        );
        assert_eq!(
            from_params(u32::MAX, u32::MAX, 5),
            Policy {
                attempts: ATTEMPTS_MAX,
                delay_ms: DELAY_MS_MAX,
                max_delay_ms: DELAY_MS_MAX
            }
        );
    }

    #[test]
    fn steps_double_up_to_the_cap() {
        let p = policy();
        let steps: [u32; 6] = core::array::from_fn(|n| p.step_ms(n as u32));
        assert_eq!(steps, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.step_ms(u32::MAX), 1000);
        assert_eq!(p.delay_ms(0, 0), 50);
        assert_eq!(p.delay_ms(0, 50), 100);
        assert_eq!(p.delay_ms(0, 51), 50);
    }

    #[test]
    fn budget_counts_attempts_and_refills() {
        let mut b = Budget::new(policy());
        // CONNECT's own failure is not retried.
        assert!(!b.may_retry() && !b.was_established());
        b.established();
        assert_eq!(b.reconnects(), 0);
        for _ in 0..5 {
            assert!(b.may_retry());
            b.next_attempt(7);
        }
        assert!(!b.may_retry());
        assert_eq!((b.tried(), b.total()), (5, 5));
        b.established();
        assert!(b.may_retry());
        assert_eq!((b.tried(), b.total(), b.reconnects()), (0, 5, 1));
    }

    #[test]
    fn forever_never_runs_out() {
        let p = policy().forever();
        assert_eq!(p.step_ms(40), 1000);
        let mut b = Budget::new(p);
        assert!(!b.may_retry(), "CONNECT's own failure is not retried");
        b.established();
        for _ in 0..10_000 {
            assert!(b.may_retry());
            b.next_attempt(7);
        }
        // Saturated counts still retry.
        b.tried = u32::MAX;
        assert!(b.may_retry());
        b.next_attempt(7);
        assert_eq!(b.tried(), u32::MAX);
        // The parameters' clamp cannot make one.
        assert_ne!(from_params(u32::MAX, 100, 1000).attempts, FOREVER);
    }

    #[test]
    fn only_the_peers_answer_revokes() {
        use super::super::errno::{EACCES, EKEYREVOKED, ENOENT, EPROTO};
        for e in [ENOENT, EACCES, EKEYREVOKED, EPROTO] {
            assert!(restore_refused(e), "{e}");
        }
        for e in [ETIMEDOUT, ECONNRESET, ENOTCONN, ENOMEM, EINTR] {
            assert!(!restore_refused(e), "{e}");
        }
    }

    #[test]
    fn storm_guard() {
        assert!(!storm(1000, 0));
        assert!(!storm(3, 4));
        assert!(storm(4, 4));
    }
}
