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
    /// Finished: the teardown is scheduled or running. Nothing new is
    /// posted; operations in flight complete with `error` (or their own).
    Closing {
        /// The errno the connection ends with (`None`: orderly).
        error: Option<Errno>,
    },
    /// Torn down: no queue pair, no registration, no cm_id.
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
    /// Userspace asked to disconnect, closed the file, or gave up waiting.
    UserClose,
    /// The teardown finished.
    TornDown,
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
    /// report [`Event::TornDown`]. Returned exactly once per connection.
    Teardown,
}

fn end(e: Option<Errno>) -> (State, Action) {
    (State::Closing { error: e }, Action::Teardown)
}

/// One transition. Events that do not apply to a state leave it unchanged
/// (`Action::None`): rdma_cm may report late events after a close.
pub fn step(state: State, event: Event) -> (State, Action) {
    use Event as E;
    use State as S;
    match (state, event) {
        (S::Closed { .. }, _) => (state, Action::None),
        (S::Closing { error }, E::TornDown) => (S::Closed { error }, Action::None),
        (S::Closing { .. }, _) => (state, Action::None),
        // Only a teardown reports TornDown, and only from Closing.
        (_, E::TornDown) => (state, Action::None),

        (S::Connected, E::UserClose) => end(None),
        (S::Connected, E::Disconnected) => end(Some(ECONNRESET)),
        (S::Connected, E::QpFatal) => end(Some(ECONNABORTED)),
        (S::Connected, E::DeviceRemoval) => end(Some(ENODEV)),
        (S::Connected, E::Timeout) => end(Some(ETIMEDOUT)),
        (S::Connected, _) => (state, Action::None),

        // Before establishment, a user close or any failure ends at once.
        (_, E::UserClose) => end(None),
        (_, E::DeviceRemoval) => end(Some(ENODEV)),
        (_, E::Timeout) => end(Some(ETIMEDOUT)),

        (S::Resolving, E::AddrResolved) => (S::RoutePending, Action::ResolveRoute),
        (S::Resolving, E::AddrError(e)) => end(Some(nonzero(e, EHOSTUNREACH))),
        (S::RoutePending, E::RouteResolved) => (S::Connecting, Action::Connect),
        (S::RoutePending, E::RouteError(e)) => end(Some(nonzero(e, EHOSTUNREACH))),
        (S::Connecting | S::Accepting, E::Established) => (S::Connected, Action::Ready),
        (S::Connecting, E::Rejected(e)) => end(Some(e.unwrap_or(ECONNREFUSED))),
        // The peer refused our accept (IB CM: a REJ answering the REP, as
        // when the active side destroys its id): the connection never was.
        (S::Accepting, E::Rejected(e)) => end(Some(e.unwrap_or(ECONNRESET))),
        (S::Connecting | S::Accepting, E::Unreachable) => end(Some(EHOSTUNREACH)),
        (S::Connecting | S::Accepting, E::ConnectError(e)) => end(Some(nonzero(e, ECONNRESET))),
        (S::Connecting | S::Accepting, E::Disconnected | E::QpFatal) => end(Some(ECONNRESET)),
        // A failed `rdma_connect()` right after route resolution.
        (S::RoutePending, E::ConnectError(e)) => end(Some(nonzero(e, ECONNRESET))),

        _ => (state, Action::None),
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

    /// Whether the connection is finished (closing or closed).
    pub fn is_finished(&self) -> bool {
        matches!(self, State::Closing { .. } | State::Closed { .. })
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
    /// the close errno if it carries one, else `ENOTCONN`.
    pub fn errno(&self) -> Errno {
        match *self {
            State::Closed { error: Some(e) } | State::Closing { error: Some(e) } => e,
            _ => ENOTCONN,
        }
    }

    /// The status of an operation the teardown flushed: the close errno,
    /// or `ECANCELED` for an orderly close by this side.
    pub fn flush_errno(&self) -> Errno {
        match *self {
            State::Closed { error: Some(e) } | State::Closing { error: Some(e) } => e,
            State::Closed { error: None } | State::Closing { error: None } => {
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
        assert_eq!(State::Closing { error: None }.flush_errno(), ECANCELED);
        assert_eq!(
            State::Closing {
                error: Some(ENODEV)
            }
            .flush_errno(),
            ENODEV
        );
        assert_eq!(State::Connected.flush_errno(), ECONNRESET);
        assert!(State::Closing { error: None }.is_finished());
        assert!(!State::Closing { error: None }.is_closed());
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
            (State::Closing { error: None }, Action::Teardown)
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
            (Event::DeviceRemoval, Some(ENODEV)),
            (Event::Timeout, Some(ETIMEDOUT)),
            (Event::UserClose, None),
        ] {
            assert_eq!(
                step(State::Connected, event),
                (State::Closing { error: errno }, Action::Teardown),
                "{event:?}"
            );
        }
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
