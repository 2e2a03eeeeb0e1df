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
//!
//! The transitions are in `conn/transition.rs` ([`step`], [`step_with`]),
//! the active side's memory of an early flush in `conn/gated.rs`
//! ([`step_gated`]) and what a state allows in `conn/state.rs`; this file
//! holds the types. The files are included by `#[path]`, relative to this
//! one, so that the module's `#[path]` include of this file finds them too.

use super::errno::Errno;

#[path = "conn/gated.rs"]
mod gated;
#[path = "conn/names.rs"]
mod names;
#[path = "conn/state.rs"]
mod state;
#[path = "conn/transition.rs"]
mod transition;

// Every function keeps its path (`conn::step`). The module's crates use
// only some of them (`rrdma_kunit.ko` only `step`), which
// `rust/module/abi.rs` allows for items but not for their re-exports.
#[allow(unused_imports)]
pub use self::{gated::*, state::Link, transition::*};

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
