// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The names of a connection's events, states and actions, as its
//! tracepoint (`rrdma_conn_state`) prints them: one word each, C strings
//! (the tracepoint copies them), and the status or errno each carries.

use core::ffi::CStr;

use super::{Action, Event, State};

impl Event {
    /// The event's name.
    pub fn name(&self) -> &'static CStr {
        match self {
            Event::AddrResolved => c"addr_resolved",
            Event::AddrError(_) => c"addr_error",
            Event::RouteResolved => c"route_resolved",
            Event::RouteError(_) => c"route_error",
            Event::Established => c"established",
            Event::Rejected(_) => c"rejected",
            Event::Unreachable => c"unreachable",
            Event::ConnectError(_) => c"connect_error",
            Event::Disconnected => c"disconnected",
            Event::DeviceRemoval => c"device_removal",
            Event::Timeout => c"timeout",
            Event::QpFatal => c"qp_fatal",
            Event::Flushed => c"flushed",
            Event::UserClose => c"user_close",
            Event::TornDown => c"torn_down",
            Event::Retry => c"retry",
        }
    }

    /// The status it carries: the CM's (either sign), a reject's errno
    /// (negative), or 0.
    pub fn status(&self) -> i32 {
        match *self {
            Event::AddrError(s) | Event::RouteError(s) | Event::ConnectError(s) => s,
            Event::Rejected(Some(e)) => -e.get(),
            _ => 0,
        }
    }
}

impl State {
    /// The state's name.
    pub fn name(&self) -> &'static CStr {
        match self {
            State::Resolving => c"resolving",
            State::RoutePending => c"route_pending",
            State::Connecting => c"connecting",
            State::Accepting => c"accepting",
            State::Connected => c"connected",
            State::Closing { .. } => c"closing",
            State::Closed { .. } => c"closed",
            State::Waiting { .. } => c"waiting",
        }
    }

    /// Its `RRDMA_CONN_STATE_*` number (`RRDMA_IOCTL_STATUS`).
    pub fn code(&self) -> u32 {
        match self {
            State::Resolving => 1,
            State::RoutePending => 2,
            State::Connecting => 3,
            State::Accepting => 4,
            State::Connected => 5,
            State::Closing { .. } => 6,
            State::Closed { .. } => 7,
            State::Waiting { .. } => 8,
        }
    }

    /// The errno it ends with (negative), or 0: orderly, or not ending.
    pub fn error(&self) -> i32 {
        match *self {
            State::Closing { error: Some(e), .. }
            | State::Closed { error: Some(e) }
            | State::Waiting { error: e } => -e.get(),
            _ => 0,
        }
    }
}

impl Action {
    /// The action's name.
    pub fn name(&self) -> &'static CStr {
        match self {
            Action::None => c"none",
            Action::ResolveRoute => c"resolve_route",
            Action::Connect => c"connect",
            Action::Ready => c"ready",
            Action::Teardown => c"teardown",
            Action::Backoff => c"backoff",
            Action::Reconnect => c"reconnect",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::errno::ECONNRESET;
    use super::*;

    #[test]
    fn names_are_one_word_and_errors_negative() {
        let states = [
            State::Resolving,
            State::RoutePending,
            State::Connecting,
            State::Accepting,
            State::Connected,
            State::Closing {
                error: Some(ECONNRESET),
                retry: true,
            },
            State::Closed { error: None },
            State::Waiting { error: ECONNRESET },
        ];
        for (i, a) in states.iter().enumerate() {
            let n = a.name().to_str().unwrap();
            assert!(!n.is_empty() && !n.contains(' '), "{n}");
            for b in &states[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
        }
        assert_eq!(states[5].error(), -ECONNRESET.get());
        assert_eq!(states[7].error(), -ECONNRESET.get());
        assert_eq!(states[6].error(), 0);
        assert_eq!(
            Event::Rejected(Some(ECONNRESET)).status(),
            -ECONNRESET.get()
        );
        assert_eq!(Event::ConnectError(-110).status(), -110);
        assert_eq!(Event::Established.name(), c"established");
        assert_eq!(Action::Teardown.name(), c"teardown");
    }
}
