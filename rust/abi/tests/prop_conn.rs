// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the connection state machine: whatever happens, each
//! connection or attempt is torn down exactly once, and a user close ends
//! it for good.

use proptest::prelude::*;
use rrdma_abi::conn::{step, step_with, Action, Event, State};
use rrdma_abi::errno::{Errno, MAX_ERRNO};

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::AddrResolved),
        (-200i32..200).prop_map(Event::AddrError),
        Just(Event::RouteResolved),
        (-200i32..200).prop_map(Event::RouteError),
        Just(Event::Established),
        proptest::option::of(1i32..200).prop_map(|e| Event::Rejected(e.and_then(Errno::new))),
        Just(Event::Unreachable),
        (-200i32..200).prop_map(Event::ConnectError),
        Just(Event::Disconnected),
        Just(Event::DeviceRemoval),
        Just(Event::Timeout),
        Just(Event::QpFatal),
        Just(Event::Flushed),
        Just(Event::UserClose),
        Just(Event::TornDown),
        Just(Event::Retry),
    ]
}

proptest! {
    /// Whatever rdma_cm, the data path and userspace do: the teardown is
    /// asked for exactly once, on entering Closing; only its report
    /// (TornDown) leads from Closing to Closed; Closed is final; every
    /// close errno is a valid errno; and a user close always ends it.
    /// The teardown's report may arrive at any later point.
    #[test]
    fn teardown_exactly_once(
        start_active in any::<bool>(),
        events in proptest::collection::vec(event(), 0..40),
        report_after in 0usize..8,
    ) {
        let mut s = if start_active { State::Resolving } else { State::Accepting };
        let mut teardowns = 0;
        let mut pending_report: Option<usize> = None;
        let events: Vec<Event> = events.into_iter().chain([Event::UserClose]).collect();
        let mut feed: Vec<Event> = events;
        let mut i = 0;
        while i < feed.len() {
            let e = feed[i];
            let (next, action) = step(s, e);
            if action == Action::Teardown {
                teardowns += 1;
                let closing = next.is_finished() && !next.is_closed();
                prop_assert!(closing);
                prop_assert!(!s.is_finished());
                // The teardown reports a few events later (or at the end).
                let at = (i + 1 + report_after).min(feed.len());
                feed.insert(at, Event::TornDown);
                pending_report = Some(at);
            }
            if next.is_closed() && !s.is_closed() {
                prop_assert_eq!(e, Event::TornDown);
                let was_closing = s.is_finished() && !s.is_closed();
                prop_assert!(was_closing);
            }
            if s.is_closed() {
                prop_assert_eq!(next, s);
            }
            if let State::Closed { error: Some(errno) } | State::Closing { error: Some(errno), .. } = next {
                prop_assert!(errno.get() > 0 && errno.get() <= MAX_ERRNO);
            }
            s = next;
            i += 1;
        }
        prop_assert!(pending_report.is_some());
        prop_assert!(s.is_closed());
        prop_assert_eq!(teardowns, 1);
    }
}

proptest! {
    /// A connection that reconnects (`retry` drawn at each step, as a
    /// budget that may run out): a teardown is asked for only when none
    /// is under way, and each is reported before the next; its report
    /// leads to `Waiting` (then only `Retry` or a close move on) or to
    /// `Closed`, which is final; operations flushed by a retrying
    /// teardown see `ECONNRESET`, new ones `EAGAIN`; and a user close
    /// always ends it for good.
    #[test]
    fn reconnects_tear_down_once_per_attempt(
        events in proptest::collection::vec((event(), any::<bool>()), 0..60),
    ) {
        let mut s = State::Connected;
        let mut tearing = false;
        let feed = events.into_iter().chain([(Event::UserClose, true)]);
        let run = |s: State, e: Event, retry: bool, tearing: &mut bool| -> Result<State, TestCaseError> {
            let (next, action) = step_with(s, e, retry);
            if s.is_closed() {
                prop_assert_eq!(next, s);
            }
            if action == Action::Teardown {
                prop_assert!(!*tearing);
                let closing = matches!(next, State::Closing { .. });
                prop_assert!(closing);
                if next.is_waiting() {
                    prop_assert_eq!(next.flush_errno(), rrdma_abi::errno::ECONNRESET);
                    prop_assert_eq!(next.errno(true), rrdma_abi::errno::EAGAIN);
                }
                *tearing = true;
            }
            if let State::Waiting { .. } = s {
                let allowed = next == s || matches!(e, Event::Retry | Event::UserClose);
                prop_assert!(allowed);
            }
            Ok(next)
        };
        for (e, retry) in feed {
            if e == Event::TornDown {
                continue;
            }
            s = run(s, e, retry, &mut tearing)?;
            if tearing {
                // The teardown reports at once here; the other property
                // covers late reports.
                let (next, action) = step_with(s, Event::TornDown, retry);
                let waiting = matches!(next, State::Waiting { .. });
                prop_assert!(waiting || next.is_closed());
                prop_assert_eq!(action == Action::Backoff, waiting);
                tearing = false;
                s = next;
            }
        }
        prop_assert!(s.is_closed());
    }
}
