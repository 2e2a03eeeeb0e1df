// SPDX-License-Identifier: GPL-2.0 OR MIT

//! rrdma's wire protocol between two kernels.
//!
//! - The **handshake** rides in rdma_cm private data: a [`Hello`] in the
//!   connect request and in the accept, a [`reject`] message carrying an
//!   errno when the passive side refuses. A reconnecting active side names
//!   the connection it replaces ([`Hello::replaces`], version 4), and the
//!   passive side ends that one before it accepts: nothing still queued on
//!   the old connection can land after the new one is up. From version 5
//!   the request offers queue pairs and the accept grants some
//!   ([`grant_qps`], [`granted_lanes`]): the connection's own, for control
//!   messages, and data lanes, each connected by a request of its own that
//!   names the connection it joins ([`Hello::lane`]).
//! - **Control messages** ([`Ctrl`]) travel as fixed-size SEND/RECV
//!   messages over the connection's QP into pre-posted receive buffers.
//!   Every message a side sends on its own initiative is a request that the
//!   peer answers ([`Ctrl::ImportReq`] → [`Ctrl::ImportResp`],
//!   [`Ctrl::Revoke`] → [`Ctrl::RevokeAck`], [`Ctrl::Ping`] →
//!   [`Ctrl::Pong`]), and each side keeps at most [`REQ_MAX`] import
//!   requests, [`REVOKE_MAX`] revokes and [`PING_MAX`] pings outstanding. A
//!   receiver re-posts a buffer before it answers what the buffer held, so
//!   an answer also returns the buffer: the messages a peer can have in
//!   our buffers at once are bounded by [`CTRL_RECV_MIN`], whatever the
//!   timing. (iWARP has no receiver-not-ready retry: a SEND that finds no
//!   buffer kills the connection.) Of these, a side needs only
//!   [`ctrl_recv_idle_min`] posted until its first request or revoke.
//!
//! All integers are little-endian (the peers need not share endianness).
//! Decoders check length, magic, version and every reserved byte, and never
//! panic on any input: a peer is not trusted.
//!
//! The handshake's hello is in `wire/hello.rs`, its rejects in
//! `wire/refusal.rs` and the control messages in `wire/ctrl.rs`; this file
//! holds what they share: the magic, the versions, the bounds on
//! outstanding messages and the little-endian field accessors. The files
//! are included by `#[path]`, relative to this one, so that the module's
//! `#[path]` include of this file finds them too.

#[path = "wire/ctrl.rs"]
mod ctrl;
#[path = "wire/hello.rs"]
mod hello;
#[path = "wire/refusal.rs"]
mod refusal;

// Every item keeps its path (`wire::Hello`). The module's crates use only
// some of them (`rrdma_kunit.ko` no reject), which `rust/module/abi.rs`
// allows for items but not for their re-exports.
#[allow(unused_imports)]
pub use self::{ctrl::*, hello::*, refusal::*};

/// `"RRDM"` as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"RRDM");
/// Newest protocol version this build speaks. Version 2 acknowledges
/// revokes ([`Ctrl::RevokeAck`]) and bounds outstanding messages; version 3
/// adds keepalive ([`Ctrl::Ping`], [`Ctrl::Pong`]); version 4 lets a
/// reconnect name the connection it replaces ([`Hello::replaces`]);
/// version 5 negotiates queue pairs and lets a lane join its connection
/// ([`Hello::lane`]); version 6 lets the passive side ask for the lanes
/// ([`Ctrl::LanesWanted`]).
pub const VERSION: u16 = 6;
/// First protocol version with keepalive.
pub const KEEPALIVE_VERSION: u16 = 3;
/// First protocol version whose hello names the connection it replaces.
pub const REPLACES_VERSION: u16 = 4;
/// First protocol version with data lanes.
pub const LANES_VERSION: u16 = 5;
/// First protocol version in which the passive side asks the active side
/// to open the lanes ([`Ctrl::LanesWanted`]).
pub const LANES_WANTED_VERSION: u16 = 6;
/// Most queue pairs of one connection: its own and its lanes.
pub const QPS_MAX: u16 = 16;
/// Oldest protocol version this build accepts: version 1 sent revokes
/// without flow control, which iWARP cannot survive.
pub const MIN_VERSION: u16 = 2;

/// Import requests one side may have outstanding on a connection.
pub const REQ_MAX: usize = 8;
/// Revokes one side may have outstanding on a connection.
pub const REVOKE_MAX: usize = 4;
/// Pings one side may have outstanding on a connection (version 3).
pub const PING_MAX: usize = 1;
/// Receive buffers a side must post (and advertise in its [`Hello`]) to
/// speak `version`: the peer's requests, revokes and pings, the answers
/// to ours, and the passive side's one [`Ctrl::LanesWanted`].
pub const fn ctrl_recv_min(version: u16) -> u16 {
    let per_side = if version >= KEEPALIVE_VERSION {
        REQ_MAX + REVOKE_MAX + PING_MAX
    } else {
        REQ_MAX + REVOKE_MAX
    };
    let lanes_wanted = if version >= LANES_WANTED_VERSION {
        1
    } else {
        0
    };
    (2 * per_side + lanes_wanted) as u16
}
/// Receive buffers a side must post to speak [`VERSION`].
pub const CTRL_RECV_MIN: u16 = ctrl_recv_min(VERSION);
/// Receive buffers enough while a side has no import request or revoke of
/// its own outstanding: the peer's requests, revokes and ping, the passive
/// side's [`Ctrl::LanesWanted`], and the answer to our ping. A side may
/// post only these until it sends its first request or revoke (it posts
/// the rest of [`ctrl_recv_min`] before); what it advertises is what it
/// will have posted by then.
pub const fn ctrl_recv_idle_min(version: u16) -> u16 {
    // The peer's ping and the answer to ours.
    let pings = if version >= KEEPALIVE_VERSION {
        2 * PING_MAX
    } else {
        0
    };
    let lanes_wanted = if version >= LANES_WANTED_VERSION {
        1
    } else {
        0
    };
    (REQ_MAX + REVOKE_MAX + pings + lanes_wanted) as u16
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}
fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
