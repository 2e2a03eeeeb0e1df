// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What a connection's [`State`] allows: posting, talking, and the errnos
//! its operations fail with.

use super::super::errno::{Errno, EAGAIN, ECONNRESET, ENOTCONN};
use super::State;

/// How a connection looks to an operator (a disk's sysfs `state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Established (or accepted, its peer already talking).
    Up,
    /// Failed after establishment, and connecting again.
    Reconnecting,
    /// Not established yet, or ended for good.
    Down,
}

impl State {
    /// The connection's [`Link`]; `again`: it was established before (as
    /// for [`State::errno`]).
    pub fn link(&self, again: bool) -> Link {
        match *self {
            State::Connected | State::Accepting => Link::Up,
            State::Closing { retry: true, .. } | State::Waiting { .. } => Link::Reconnecting,
            State::Resolving | State::RoutePending | State::Connecting if again => {
                Link::Reconnecting
            }
            _ => Link::Down,
        }
    }

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

    /// What CONNECT returns when its wait ends in this state:
    /// `established`, the connection was up once. The connection if it is
    /// up, or if it was up and already reconnects (it failed before the
    /// caller woke, even attempted again; a reconnect is what it asked
    /// for); else the errno of its failure (never `EAGAIN`: a first attempt
    /// does not retry).
    pub fn connect_result(&self, established: bool) -> Result<(), Errno> {
        match self.link(established) {
            Link::Up | Link::Reconnecting => Ok(()),
            Link::Down => Err(self.errno(false)),
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
                super::super::errno::ECANCELED
            }
            // Flushed while still up: the provider gave up under us.
            _ => ECONNRESET,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::{ECANCELED, ECONNREFUSED, ENODEV};

    /// The fuzzer's finding: a RECONNECT connection that failed between
    /// its ESTABLISHED event and CONNECT's wakeup made CONNECT fail with
    /// `EAGAIN`, an errno CONNECT does not document.
    #[test]
    fn connect_returns_a_connection_that_already_reconnects() {
        let failed_after_up = [
            State::Closing {
                error: Some(ECONNRESET),
                retry: true,
            },
            State::Waiting { error: ECONNRESET },
        ];
        for s in failed_after_up {
            assert_eq!(s.connect_result(true), Ok(()), "{s:?}");
        }
        // Woken late: the first reconnect attempt is under way.
        for s in [State::Resolving, State::RoutePending, State::Connecting] {
            assert_eq!(s.connect_result(true), Ok(()), "{s:?}");
        }
        assert_eq!(State::Connected.connect_result(false), Ok(()));
        assert_eq!(
            State::Closed {
                error: Some(ECONNREFUSED)
            }
            .connect_result(false),
            Err(ECONNREFUSED)
        );
        assert_eq!(
            State::Closing {
                error: Some(ECONNRESET),
                retry: false
            }
            .connect_result(true),
            Err(ECONNRESET)
        );
        assert_eq!(
            State::Closed { error: None }.connect_result(false),
            Err(ENOTCONN)
        );
    }

    #[test]
    fn links_by_state() {
        let reconnecting = [
            State::Closing {
                error: Some(ECONNRESET),
                retry: true,
            },
            State::Waiting { error: ECONNRESET },
        ];
        for s in reconnecting {
            assert_eq!(s.link(true), Link::Reconnecting, "{s:?}");
        }
        for s in [State::Resolving, State::RoutePending, State::Connecting] {
            assert_eq!(s.link(true), Link::Reconnecting, "{s:?}");
            assert_eq!(s.link(false), Link::Down, "{s:?}");
        }
        assert_eq!(State::Connected.link(true), Link::Up);
        let ended = State::Closing {
            error: Some(ECONNRESET),
            retry: false,
        };
        assert_eq!(ended.link(true), Link::Down);
        assert_eq!(State::Closed { error: None }.link(true), Link::Down);
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
}
