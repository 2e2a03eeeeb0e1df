// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The active side's memory of an early flush: a flush while connecting
//! waits for the CM's verdict.

use super::{step_with, Action, Event, State};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::{ECONNRESET, EPROTONOSUPPORT};

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
}
