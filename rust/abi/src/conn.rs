// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The connection state machine, driven by rdma_cm events and user calls.
//!
//! Pure: the kernel feeds [`Event`]s (from its rdma_cm handler, its timers
//! and its ioctls) to [`step`] and performs the returned [`Action`]s. Every
//! path ends in [`State::Closed`] exactly once, with the errno userspace
//! sees for the connection: `None` for an orderly close.
//!
//! Active side: `Resolving` (address) → `RoutePending` → `Connecting` →
//! `Connected`. Passive side: `Accepting` → `Connected`. Teardown:
//! `Closing` until rdma_cm reports the disconnect, then `Closed`.

use super::errno::{
    Errno, ECONNABORTED, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENODEV, ENOTCONN, ETIMEDOUT,
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
    /// Disconnect requested or observed; waiting for rdma_cm to finish and
    /// the QP to drain.
    Closing {
        /// The errno the connection will end with (`None`: orderly).
        error: Option<Errno>,
    },
    /// Gone; resources may be freed.
    Closed {
        /// The errno userspace sees (`None`: orderly close).
        error: Option<Errno>,
    },
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`.
    AddrResolved,
    /// `RDMA_CM_EVENT_ADDR_ERROR` with the CM's status.
    AddrError(Errno),
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
    RouteResolved,
    /// `RDMA_CM_EVENT_ROUTE_ERROR` with the CM's status.
    RouteError(Errno),
    /// `RDMA_CM_EVENT_ESTABLISHED` (the handshake reply was valid).
    Established,
    /// `RDMA_CM_EVENT_REJECTED`, with the errno of an rrdma reject if the
    /// private data carried one.
    Rejected(Option<Errno>),
    /// `RDMA_CM_EVENT_UNREACHABLE`.
    Unreachable,
    /// `RDMA_CM_EVENT_CONNECT_ERROR`, or a handshake reply that did not parse.
    ConnectError(Errno),
    /// `RDMA_CM_EVENT_DISCONNECTED` (or `TIMEWAIT_EXIT` after it).
    Disconnected,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`, or the ib_client removing the device.
    DeviceRemoval,
    /// The connect timeout expired.
    Timeout,
    /// A work completion failed or the QP hit a fatal async event (e.g. a
    /// peer's access error).
    QpFatal,
    /// Userspace asked to disconnect, or closed the file.
    UserClose,
}

/// What the kernel must do after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// `rdma_resolve_route()`.
    ResolveRoute,
    /// Create the QPs and `rdma_connect()` with a hello.
    Connect,
    /// Wake waiters: the connection is usable.
    Ready,
    /// `rdma_disconnect()` (moves the QP to error, flushing its work).
    Disconnect,
    /// Drain the QPs, complete what is in flight with the close errno,
    /// destroy the QPs and the cm_id, wake waiters.
    Teardown,
}

fn fail(e: Errno) -> (State, Action) {
    (State::Closed { error: Some(e) }, Action::Teardown)
}

/// One transition. Events that do not apply to a state leave it unchanged
/// (`Action::None`): rdma_cm may report late events after a close.
pub fn step(state: State, event: Event) -> (State, Action) {
    use Event as E;
    use State as S;
    match (state, event) {
        (S::Closed { .. }, _) => (state, Action::None),

        (S::Closing { error }, E::Disconnected | E::DeviceRemoval | E::Timeout) => {
            (S::Closed { error }, Action::Teardown)
        }
        (S::Closing { .. }, _) => (state, Action::None),

        (S::Connected, E::UserClose) => (S::Closing { error: None }, Action::Disconnect),
        (S::Connected, E::Disconnected) => (
            S::Closing {
                error: Some(ECONNRESET),
            },
            Action::Disconnect,
        ),
        (S::Connected, E::QpFatal) => (
            S::Closing {
                error: Some(ECONNABORTED),
            },
            Action::Disconnect,
        ),
        (S::Connected, E::DeviceRemoval) => fail(ENODEV),
        (S::Connected, _) => (state, Action::None),

        // Before establishment, a user close or any failure ends at once.
        (_, E::UserClose) => (S::Closed { error: None }, Action::Teardown),
        (_, E::DeviceRemoval) => fail(ENODEV),
        (_, E::Timeout) => fail(ETIMEDOUT),

        (S::Resolving, E::AddrResolved) => (S::RoutePending, Action::ResolveRoute),
        (S::Resolving, E::AddrError(e)) => fail(nonzero(e, EHOSTUNREACH)),
        (S::RoutePending, E::RouteResolved) => (S::Connecting, Action::Connect),
        (S::RoutePending, E::RouteError(e)) => fail(nonzero(e, EHOSTUNREACH)),
        (S::Connecting | S::Accepting, E::Established) => (S::Connected, Action::Ready),
        (S::Connecting, E::Rejected(e)) => fail(e.unwrap_or(ECONNREFUSED)),
        (S::Connecting | S::Accepting, E::Unreachable) => fail(EHOSTUNREACH),
        (S::Connecting | S::Accepting, E::ConnectError(e)) => fail(nonzero(e, ECONNRESET)),
        (S::Connecting | S::Accepting, E::Disconnected | E::QpFatal) => fail(ECONNRESET),

        _ => (state, Action::None),
    }
}

/// rdma_cm reports statuses as negative or positive errnos, or 0.
fn nonzero(e: Errno, default: Errno) -> Errno {
    match e.checked_abs() {
        Some(e) if e > 0 && e < 4096 => e,
        _ => default,
    }
}

impl State {
    /// Whether operations may be posted.
    pub fn is_connected(&self) -> bool {
        matches!(self, State::Connected)
    }

    /// Whether the connection is gone.
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
    /// the close errno if it carries one, else `ENOTCONN`.
    pub fn errno(&self) -> Errno {
        match *self {
            State::Closed { error: Some(e) } | State::Closing { error: Some(e) } => e,
            _ => ENOTCONN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::ENETUNREACH;

    fn run(start: State, events: &[Event]) -> State {
        events.iter().fold(start, |s, &e| step(s, e).0)
    }

    #[test]
    fn talking_and_errnos_by_state() {
        assert!(State::Connected.can_talk());
        assert!(State::Accepting.can_talk());
        assert!(!State::Connecting.can_talk());
        assert!(!State::Closing { error: None }.can_talk());
        assert_eq!(
            State::Closed {
                error: Some(ENODEV)
            }
            .errno(),
            ENODEV
        );
        assert_eq!(
            State::Closing {
                error: Some(ECONNRESET)
            }
            .errno(),
            ECONNRESET
        );
        assert_eq!(State::Closed { error: None }.errno(), ENOTCONN);
        assert_eq!(State::Resolving.errno(), ENOTCONN);
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
            (State::Closing { error: None }, Action::Disconnect)
        );
        let s = run(s, &[Event::UserClose, Event::Disconnected]);
        assert_eq!(s, State::Closed { error: None });
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
    fn failures_carry_clear_errnos() {
        assert_eq!(
            run(State::Resolving, &[Event::AddrError(-ENETUNREACH)]),
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
            run(State::Connecting, &[Event::Rejected(Some(93))]),
            State::Closed { error: Some(93) }
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
    fn closing_waits_for_the_cm_but_not_forever() {
        let s = run(
            State::Connected,
            &[Event::UserClose, Event::Established, Event::QpFatal],
        );
        assert_eq!(s, State::Closing { error: None });
        assert_eq!(
            step(s, Event::Timeout),
            (State::Closed { error: None }, Action::Teardown)
        );
        assert_eq!(
            step(s, Event::DeviceRemoval),
            (State::Closed { error: None }, Action::Teardown)
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
        ] {
            assert_eq!(step(s, e), (s, Action::None));
        }
    }
}
