// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The connection state machine, driven by rdma_cm events, the data path
//! and user calls.
//!
//! Pure: the kernel feeds [`Event`]s (from its rdma_cm handler, its
//! completion handlers, its ioctls and device removal) to [`step`], which is
//! the only place a connection's state changes, and performs the returned
//! [`Action`]. Every path ends in [`State::Closed`] exactly once, through
//! exactly one [`Action::Teardown`], with the errno userspace sees for the
//! connection: `None` for an orderly close.
//!
//! Active side: `Resolving` (address) → `RoutePending` → `Connecting` →
//! `Connected`. Passive side: `Accepting` → `Connected`. End: any failure or
//! close moves to `Closing` with [`Action::Teardown`] (disconnect, drain and
//! destroy the queue pair, complete what is in flight, free registrations,
//! destroy the cm_id); the teardown reports [`Event::TornDown`], which moves
//! to `Closed`. Nothing waits for rdma_cm's own disconnect handshake: the
//! drain flushes the queue pair whatever the peer does.
//!
//! Reconnect (an active connection that asked for it, once established):
//! the kernel steps with `retry` set while its budget (`abi::reconnect`)
//! has attempts left. A failure then moves to `Closing` with `retry`, the
//! teardown's report to `Waiting` with [`Action::Backoff`], and the
//! backoff's end ([`Event::Retry`]) back to `Resolving` with
//! [`Action::Reconnect`] (a new id and queue pair, the same connection).
//! A failure without `retry` (budget spent, or a user close) ends in
//! `Closed` as before.

use super::errno::{
    Errno, EAGAIN, ECONNABORTED, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENODEV, ENOTCONN,
    ETIMEDOUT,
};

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Active: resolving the peer's address to a device.
    Resolving,
    /// Active: resolving the route.
    RoutePending,
    /// Active: connect request sent, waiting for the peer.
    Connecting,
    /// Passive: accept sent, waiting for establishment.
    Accepting,
    /// Established: operations may be posted.
    Connected,
    /// Finished: the teardown is scheduled or running. Nothing new is
    /// posted; operations in flight complete with `error` (or their own).
    Closing {
        /// The errno the connection ends with (`None`: orderly).
        error: Option<Errno>,
        /// After the teardown, reconnect (`Waiting`) instead of `Closed`.
        retry: bool,
    },
    /// Torn down: no queue pair, no registration, no cm_id.
    Closed {
        /// The errno userspace sees (`None`: orderly close).
        error: Option<Errno>,
    },
    /// Reconnecting: torn down, waiting for the backoff before the next
    /// attempt. Holds no queue pair, registration or cm_id.
    Waiting {
        /// Why the last connection or attempt ended.
        error: Errno,
    },
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`.
    AddrResolved,
    /// `RDMA_CM_EVENT_ADDR_ERROR` with the CM's status (an errno of
    /// either sign, or 0).
    AddrError(i32),
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
    RouteResolved,
    /// `RDMA_CM_EVENT_ROUTE_ERROR` with the CM's status (as `AddrError`).
    RouteError(i32),
    /// `RDMA_CM_EVENT_ESTABLISHED` (the handshake reply was valid).
    Established,
    /// `RDMA_CM_EVENT_REJECTED`, with the errno of an rrdma reject if the
    /// private data carried one.
    Rejected(Option<Errno>),
    /// `RDMA_CM_EVENT_UNREACHABLE`.
    Unreachable,
    /// `RDMA_CM_EVENT_CONNECT_ERROR`, a failed `rdma_connect()`, or a
    /// handshake reply that did not parse, with its status (as `AddrError`).
    ConnectError(i32),
    /// `RDMA_CM_EVENT_DISCONNECTED`: the peer closed or went away.
    Disconnected,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`, or the ib_client removing the device.
    DeviceRemoval,
    /// A timeout expired (connect, or a peer that stopped answering).
    Timeout,
    /// A work completion failed, a control message was malformed, or the
    /// peer broke the protocol.
    QpFatal,
    /// A work request completed flushed: the provider moved the queue pair
    /// to the error state (rxe on a failure its requester found, the CM on
    /// the peer's disconnect request) before anything else said so. Ends a
    /// connected connection at once, and an accepted one not yet
    /// established (its peer may talk already: a Write with a bad key
    /// kills the queue pair, and the CM reports nothing). While connecting
    /// it waits for the CM ([`step_gated`]): a reject moves the queue pair
    /// to the error state before its event. In any other state it is the
    /// teardown's own flush.
    Flushed,
    /// Userspace asked to disconnect, closed the file, or gave up waiting.
    UserClose,
    /// The teardown finished.
    TornDown,
    /// The backoff between reconnect attempts is over.
    Retry,
}

/// What the kernel must do after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// `rdma_resolve_route()`.
    ResolveRoute,
    /// Create the queue pair and `rdma_connect()` with a hello.
    Connect,
    /// Wake waiters: the connection is usable.
    Ready,
    /// Tear down: disconnect, drain and destroy the queue pair, complete
    /// what is in flight, free registrations, destroy the cm_id, then
    /// report [`Event::TornDown`]. Returned exactly once per connection
    /// and attempt.
    Teardown,
    /// Reconnecting: arm the backoff timer, which reports
    /// [`Event::Retry`].
    Backoff,
    /// Reconnecting: a new cm_id, and `rdma_resolve_addr()` to the peer.
    Reconnect,
}

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

/// One transition with the active side's memory of an early flush
/// (`flushed`, false at each new attempt). A flush while `Connecting` is
/// kept, not acted on: the CM moves the queue pair to the error state
/// before it reports a reject, whose errno the caller must get. If the CM
/// establishes the connection instead, its queue pair failed in the
/// handshake (the peer's first packets came in right after its reply):
/// the connection ends then, as a connected one that is flushed.
pub fn step_gated(state: State, event: Event, retry: bool, flushed: &mut bool) -> (State, Action) {
    match (state, event) {
        (State::Connecting, Event::Flushed) => {
            *flushed = true;
            (state, Action::None)
        }
        (State::Connecting, Event::Established) if *flushed => {
            step_with(State::Connected, Event::Flushed, retry)
        }
        _ => {
            let (next, action) = step_with(state, event, retry);
            if action == Action::Connect {
                // A new attempt: a new queue pair.
                *flushed = false;
            }
            (next, action)
        }
    }
}

/// rdma_cm reports statuses as negative or positive errnos, or 0.
fn nonzero(status: i32, default: Errno) -> Errno {
    Errno::from_status(status).unwrap_or(default)
}

impl State {
    /// Whether operations may be posted.
    pub fn is_connected(&self) -> bool {
        matches!(self, State::Connected)
    }

    /// Whether the connection is finished (closing or closed), or between
    /// two of its queue pairs (a reconnect's teardown, its backoff).
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            State::Closing { .. } | State::Closed { .. } | State::Waiting { .. }
        )
    }

    /// Whether the connection will reconnect (its teardown, its backoff).
    pub fn is_waiting(&self) -> bool {
        matches!(
            self,
            State::Closing { retry: true, .. } | State::Waiting { .. }
        )
    }

    /// Whether the teardown has finished.
    pub fn is_closed(&self) -> bool {
        matches!(self, State::Closed { .. })
    }

    /// Whether control messages may flow: established, or accepted by us
    /// with the peer already talking (on IB/RoCE the passive side's
    /// ESTABLISHED event can trail the peer's first message; its QP is
    /// ready to send by then).
    pub fn can_talk(&self) -> bool {
        matches!(self, State::Connected | State::Accepting)
    }

    /// The errno an operation on a connection in this state fails with:
    /// `EAGAIN` while it reconnects (`again`: it was established before,
    /// so a state before `Connected` is a reconnect attempt), the close
    /// errno if it carries one, else `ENOTCONN`.
    pub fn errno(&self, again: bool) -> Errno {
        match *self {
            State::Closing { retry: true, .. } | State::Waiting { .. } => EAGAIN,
            State::Resolving | State::RoutePending | State::Connecting if again => EAGAIN,
            State::Closed { error: Some(e) } | State::Closing { error: Some(e), .. } => e,
            _ => ENOTCONN,
        }
    }

    /// The status of an operation the teardown flushed: `ECONNRESET` when
    /// the connection reconnects, else the close errno, or `ECANCELED` for
    /// an orderly close by this side.
    pub fn flush_errno(&self) -> Errno {
        match *self {
            State::Closing { retry: true, .. } => ECONNRESET,
            State::Closed { error: Some(e) } | State::Closing { error: Some(e), .. } => e,
            State::Closed { error: None } | State::Closing { error: None, .. } => {
                super::errno::ECANCELED
            }
            // Flushed while still up: the provider gave up under us.
            _ => ECONNRESET,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::{EADDRINUSE, ECANCELED, ENETUNREACH, EPROTONOSUPPORT};

    /// Runs `events`, then the teardown's report if one was asked for.
    fn run(start: State, events: &[Event]) -> State {
        events.iter().fold(start, |s, &e| match step(s, e) {
            (next, Action::Teardown) => step(next, Event::TornDown).0,
            (next, _) => next,
        })
    }

    #[test]
    fn talking_and_errnos_by_state() {
        assert!(State::Connected.can_talk());
        assert!(State::Accepting.can_talk());
        assert!(!State::Connecting.can_talk());
        assert!(!State::Closing {
            error: None,
            retry: false
        }
        .can_talk());
        assert_eq!(
            State::Closed {
                error: Some(ENODEV)
            }
            .errno(false),
            ENODEV
        );
        assert_eq!(
            State::Closing {
                error: Some(ECONNRESET),
                retry: false
            }
            .errno(false),
            ECONNRESET
        );
        assert_eq!(State::Closed { error: None }.errno(false), ENOTCONN);
        assert_eq!(State::Resolving.errno(false), ENOTCONN);
        assert_eq!(
            State::Closing {
                error: None,
                retry: false
            }
            .flush_errno(),
            ECANCELED
        );
        assert_eq!(
            State::Closing {
                error: Some(ENODEV),
                retry: false
            }
            .flush_errno(),
            ENODEV
        );
        assert_eq!(State::Connected.flush_errno(), ECONNRESET);
        assert!(State::Closing {
            error: None,
            retry: false
        }
        .is_finished());
        assert!(!State::Closing {
            error: None,
            retry: false
        }
        .is_closed());
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
    fn an_early_flush_while_connecting_waits_for_the_cm() {
        // A reject after the flush keeps its own errno.
        let mut f = false;
        let (s, a) = step_gated(State::Connecting, Event::Flushed, false, &mut f);
        assert_eq!((s, a), (State::Connecting, Action::None));
        let (s, a) = step_gated(s, Event::Rejected(Some(EPROTONOSUPPORT)), false, &mut f);
        assert_eq!(a, Action::Teardown);
        assert_eq!(s.errno(false), EPROTONOSUPPORT);
        // Established after a flush: the queue pair is dead, it ends.
        let mut f = false;
        let (s, _) = step_gated(State::Connecting, Event::Flushed, false, &mut f);
        let (s, a) = step_gated(s, Event::Established, false, &mut f);
        assert_eq!(a, Action::Teardown);
        assert_eq!(s.errno(false), ECONNRESET);
        // ... or reconnects when it may.
        let mut f = true;
        let (s, a) = step_gated(State::Connecting, Event::Established, true, &mut f);
        assert_eq!(a, Action::Teardown);
        assert!(s.is_waiting());
        // Without a flush, Established is Ready; a new attempt forgets one.
        let mut f = false;
        let (s, a) = step_gated(State::Connecting, Event::Established, false, &mut f);
        assert_eq!((s, a), (State::Connected, Action::Ready));
        let mut f = true;
        let (_, a) = step_gated(State::RoutePending, Event::RouteResolved, false, &mut f);
        assert_eq!((a, f), (Action::Connect, false));
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
