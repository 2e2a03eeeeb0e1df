// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A connection's transitions: the one place its state changes.

use super::super::errno::{
    Errno, ECONNABORTED, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENODEV, ETIMEDOUT,
};
use super::{Action, Event, State};

/// One transition of a connection that does not reconnect: [`step_with`]
/// without `retry`.
pub fn step(state: State, event: Event) -> (State, Action) {
    step_with(state, event, false)
}

/// One transition. Events that do not apply to a state leave it unchanged
/// (`Action::None`): rdma_cm may report late events after a close. `retry`:
/// a failure now is followed by a reconnect attempt (the connection asked
/// for it, was established once, and has attempts left).
pub fn step_with(state: State, event: Event, retry: bool) -> (State, Action) {
    use Event as E;
    use State as S;
    let fail = |e: Errno| {
        (
            S::Closing {
                error: Some(e),
                retry,
            },
            Action::Teardown,
        )
    };
    let close = || {
        (
            S::Closing {
                error: None,
                retry: false,
            },
            Action::Teardown,
        )
    };
    match (state, event) {
        (S::Closed { .. }, _) => (state, Action::None),
        (S::Closing { error, retry: true }, E::TornDown) => (
            S::Waiting {
                error: error.unwrap_or(ECONNRESET),
            },
            Action::Backoff,
        ),
        (S::Closing { error, .. }, E::TornDown) => (S::Closed { error }, Action::None),
        (S::Closing { .. }, _) => (state, Action::None),
        // Only a teardown reports TornDown, and only from Closing.
        (_, E::TornDown) => (state, Action::None),

        // Between attempts nothing is held: only a close or the backoff's
        // end apply. The close's teardown stops the timer.
        (S::Waiting { .. }, E::UserClose) => close(),
        (S::Waiting { .. }, E::Retry) => (S::Resolving, Action::Reconnect),
        (S::Waiting { .. }, _) => (state, Action::None),
        (_, E::Retry) => (state, Action::None),

        (S::Connected, E::UserClose) => close(),
        (S::Connected, E::Disconnected) => fail(ECONNRESET),
        (S::Connected, E::QpFatal) => fail(ECONNABORTED),
        (S::Connected, E::Flushed) => fail(ECONNRESET),
        (S::Connected, E::DeviceRemoval) => fail(ENODEV),
        (S::Connected, E::Timeout) => fail(ETIMEDOUT),
        (S::Connected, _) => (state, Action::None),

        // Before establishment, a user close or any failure ends at once.
        (_, E::UserClose) => close(),
        (_, E::DeviceRemoval) => fail(ENODEV),
        (_, E::Timeout) => fail(ETIMEDOUT),

        (S::Resolving, E::AddrResolved) => (S::RoutePending, Action::ResolveRoute),
        (S::Resolving, E::AddrError(e)) => fail(nonzero(e, EHOSTUNREACH)),
        (S::RoutePending, E::RouteResolved) => (S::Connecting, Action::Connect),
        (S::RoutePending, E::RouteError(e)) => fail(nonzero(e, EHOSTUNREACH)),
        (S::Connecting | S::Accepting, E::Established) => (S::Connected, Action::Ready),
        (S::Connecting, E::Rejected(e)) => fail(e.unwrap_or(ECONNREFUSED)),
        // The peer refused our accept (IB CM: a REJ answering the REP, as
        // when the active side destroys its id): the connection never was.
        (S::Accepting, E::Rejected(e)) => fail(e.unwrap_or(ECONNRESET)),
        (S::Connecting | S::Accepting, E::Unreachable) => fail(EHOSTUNREACH),
        (S::Connecting | S::Accepting, E::ConnectError(e)) => fail(nonzero(e, ECONNRESET)),
        (S::Connecting | S::Accepting, E::Disconnected | E::QpFatal) => fail(ECONNRESET),
        // Accepted, not yet established, and the queue pair failed: the
        // peer's first packets are in before our ESTABLISHED event, and the
        // CM will establish a connection whose queue pair is dead.
        (S::Accepting, E::Flushed) => fail(ECONNRESET),
        // A failed `rdma_connect()` right after route resolution.
        (S::RoutePending, E::ConnectError(e)) => fail(nonzero(e, ECONNRESET)),

        _ => (state, Action::None),
    }
}

/// rdma_cm reports statuses as negative or positive errnos, or 0.
fn nonzero(status: i32, default: Errno) -> Errno {
    Errno::from_status(status).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::{EADDRINUSE, EAGAIN, ENETUNREACH, ENOTCONN, EPROTONOSUPPORT};

    /// Runs `events`, then the teardown's report if one was asked for.
    fn run(start: State, events: &[Event]) -> State {
        events.iter().fold(start, |s, &e| match step(s, e) {
            (next, Action::Teardown) => step(next, Event::TornDown).0,
            (next, _) => next,
        })
    }

    #[test]
    fn active_happy_path_and_orderly_close() {
        let s = run(
            State::Resolving,
            &[
                Event::AddrResolved,
                Event::RouteResolved,
                Event::Established,
            ],
        );
        assert_eq!(s, State::Connected);
        assert_eq!(
            step(s, Event::UserClose),
            (
                State::Closing {
                    error: None,
                    retry: false
                },
                Action::Teardown
            )
        );
        assert_eq!(run(s, &[Event::UserClose]), State::Closed { error: None });
    }

    #[test]
    fn actions_follow_the_cm_sequence() {
        assert_eq!(
            step(State::Resolving, Event::AddrResolved).1,
            Action::ResolveRoute
        );
        assert_eq!(
            step(State::RoutePending, Event::RouteResolved).1,
            Action::Connect
        );
        assert_eq!(step(State::Connecting, Event::Established).1, Action::Ready);
        assert_eq!(step(State::Accepting, Event::Established).1, Action::Ready);
    }

    #[test]
    fn every_end_tears_down_at_once() {
        for (event, errno) in [
            (Event::Disconnected, Some(ECONNRESET)),
            (Event::QpFatal, Some(ECONNABORTED)),
            (Event::Flushed, Some(ECONNRESET)),
            (Event::DeviceRemoval, Some(ENODEV)),
            (Event::Timeout, Some(ETIMEDOUT)),
            (Event::UserClose, None),
        ] {
            assert_eq!(
                step(State::Connected, event),
                (
                    State::Closing {
                        error: errno,
                        retry: false
                    },
                    Action::Teardown
                ),
                "{event:?}"
            );
        }
    }

    #[test]
    fn a_flush_ends_only_a_connected_connection() {
        // Before establishment the CM reports the failure with its own
        // reason (a reject's errno); while closing it is the teardown's.
        for s in [
            State::Resolving,
            State::RoutePending,
            State::Connecting,
            State::Closing {
                error: None,
                retry: false,
            },
            State::Closing {
                error: Some(ETIMEDOUT),
                retry: true,
            },
            State::Closed { error: None },
        ] {
            assert_eq!(step(s, Event::Flushed), (s, Action::None), "{s:?}");
        }
        // New operations then fail at once instead of being posted to the
        // failed queue pair and flushed too.
        let (s, _) = step_with(State::Connected, Event::Flushed, true);
        assert_eq!(s.errno(true), EAGAIN);
        let (s, _) = step(State::Connected, Event::Flushed);
        assert_eq!(s.errno(true), ECONNRESET);
    }

    #[test]
    fn an_accepted_connection_whose_queue_pair_failed_ends_before_establishment() {
        let (s, a) = step(State::Accepting, Event::Flushed);
        assert_eq!(a, Action::Teardown);
        assert_eq!(s.errno(false), ECONNRESET);
        // Its late ESTABLISHED changes nothing.
        let (s, _) = step(s, Event::TornDown);
        assert_eq!(step(s, Event::Established), (s, Action::None));
    }

    #[test]
    fn failures_carry_clear_errnos() {
        assert_eq!(
            run(State::Resolving, &[Event::AddrError(-ENETUNREACH.get())]),
            State::Closed {
                error: Some(ENETUNREACH)
            }
        );
        assert_eq!(
            run(State::Resolving, &[Event::AddrError(0)]),
            State::Closed {
                error: Some(EHOSTUNREACH)
            }
        );
        assert_eq!(
            run(State::Connecting, &[Event::Rejected(None)]),
            State::Closed {
                error: Some(ECONNREFUSED)
            }
        );
        assert_eq!(
            run(State::Connecting, &[Event::Rejected(Some(EPROTONOSUPPORT))]),
            State::Closed {
                error: Some(EPROTONOSUPPORT)
            }
        );
        // Found by the hostile peer: a passive connection whose accept the
        // peer rejected stayed `Accepting`, holding a backlog slot.
        assert_eq!(
            run(State::Accepting, &[Event::Rejected(None)]),
            State::Closed {
                error: Some(ECONNRESET)
            }
        );
        assert_eq!(
            run(State::Connecting, &[Event::Timeout]),
            State::Closed {
                error: Some(ETIMEDOUT)
            }
        );
        assert_eq!(
            run(State::Connecting, &[Event::Unreachable]),
            State::Closed {
                error: Some(EHOSTUNREACH)
            }
        );
        assert_eq!(
            run(
                State::RoutePending,
                &[Event::ConnectError(-EADDRINUSE.get())]
            ),
            State::Closed {
                error: Some(EADDRINUSE)
            }
        );
        assert_eq!(
            run(State::Connected, &[Event::DeviceRemoval]),
            State::Closed {
                error: Some(ENODEV)
            }
        );
        assert_eq!(
            run(
                State::Connected,
                &[Event::Disconnected, Event::Disconnected]
            ),
            State::Closed {
                error: Some(ECONNRESET)
            }
        );
        assert_eq!(
            run(State::Connected, &[Event::QpFatal, Event::Disconnected]),
            State::Closed {
                error: Some(ECONNABORTED)
            }
        );
    }

    #[test]
    fn closing_ignores_everything_but_its_teardown() {
        let s = State::Closing {
            error: Some(ECONNRESET),
            retry: false,
        };
        for e in [
            Event::Established,
            Event::Disconnected,
            Event::UserClose,
            Event::DeviceRemoval,
            Event::QpFatal,
            Event::Timeout,
        ] {
            assert_eq!(step(s, e), (s, Action::None));
        }
        assert_eq!(
            step(s, Event::TornDown),
            (
                State::Closed {
                    error: Some(ECONNRESET)
                },
                Action::None
            )
        );
        assert_eq!(
            step(State::Connected, Event::TornDown),
            (State::Connected, Action::None)
        );
    }

    /// Runs `events` with `retry`, then the teardown's report if one was
    /// asked for.
    fn run_retrying(start: State, events: &[Event]) -> State {
        events
            .iter()
            .fold(start, |s, &e| match step_with(s, e, true) {
                (next, Action::Teardown) => step_with(next, Event::TornDown, true).0,
                (next, _) => next,
            })
    }

    #[test]
    fn a_retrying_failure_waits_and_reconnects() {
        for (event, errno) in [
            (Event::Disconnected, ECONNRESET),
            (Event::QpFatal, ECONNABORTED),
            (Event::Flushed, ECONNRESET),
            (Event::DeviceRemoval, ENODEV),
            (Event::Timeout, ETIMEDOUT),
        ] {
            let (s, a) = step_with(State::Connected, event, true);
            assert_eq!(a, Action::Teardown);
            // In flight: ECONNRESET; new operations: EAGAIN.
            assert_eq!(s.flush_errno(), ECONNRESET);
            assert_eq!(s.errno(true), EAGAIN);
            assert!(s.is_waiting());
            let (s, a) = step_with(s, Event::TornDown, true);
            assert_eq!((s, a), (State::Waiting { error: errno }, Action::Backoff));
            assert_eq!(s.errno(true), EAGAIN);
            assert!(s.is_finished() && !s.is_closed());
            assert_eq!(
                step_with(s, Event::Retry, true),
                (State::Resolving, Action::Reconnect)
            );
        }
        // An attempt that fails waits again; one that succeeds is Connected.
        assert_eq!(
            run_retrying(State::Resolving, &[Event::AddrError(0)]),
            State::Waiting {
                error: EHOSTUNREACH
            }
        );
        assert_eq!(State::Connecting.errno(true), EAGAIN);
        assert_eq!(State::Connecting.errno(false), ENOTCONN);
        assert_eq!(
            run_retrying(
                State::Waiting { error: ETIMEDOUT },
                &[
                    Event::Retry,
                    Event::AddrResolved,
                    Event::RouteResolved,
                    Event::Rejected(None),
                    Event::Retry,
                    Event::AddrResolved,
                    Event::RouteResolved,
                    Event::Established
                ]
            ),
            State::Connected
        );
    }

    #[test]
    fn a_spent_budget_or_a_close_ends_for_good() {
        // The last attempt fails without retry: Closed with its errno.
        assert_eq!(
            run(State::Connecting, &[Event::Rejected(None)]),
            State::Closed {
                error: Some(ECONNREFUSED)
            }
        );
        // A user close never retries, in any state.
        for s in [
            State::Connected,
            State::Resolving,
            State::Connecting,
            State::Waiting { error: ENODEV },
        ] {
            assert_eq!(
                step_with(s, Event::UserClose, true),
                (
                    State::Closing {
                        error: None,
                        retry: false
                    },
                    Action::Teardown
                ),
                "{s:?}"
            );
        }
        // Waiting ignores the CM and the data path (nothing is held).
        let w = State::Waiting { error: ENODEV };
        for e in [
            Event::Disconnected,
            Event::DeviceRemoval,
            Event::QpFatal,
            Event::Flushed,
            Event::Timeout,
            Event::Established,
            Event::TornDown,
        ] {
            assert_eq!(step_with(w, e, true), (w, Action::None), "{e:?}");
        }
        // Retry applies only to Waiting.
        assert_eq!(
            step_with(State::Connected, Event::Retry, true),
            (State::Connected, Action::None)
        );
    }

    #[test]
    fn closed_ignores_late_events() {
        let s = State::Closed {
            error: Some(ENODEV),
        };
        for e in [
            Event::Established,
            Event::Disconnected,
            Event::UserClose,
            Event::DeviceRemoval,
            Event::TornDown,
        ] {
            assert_eq!(step(s, e), (s, Action::None));
        }
    }
}
