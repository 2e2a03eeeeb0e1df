// SPDX-License-Identifier: GPL-2.0

//! Keepalive of a connection (the rules are `abi::keepalive`): the timer's
//! tick, which pings a quiet peer and ends the connection with `ETIMEDOUT`
//! when it stays silent, and the counts fdinfo shows.
//!
//! The tick runs on the module's work queue (`timer.rs`) and re-arms itself
//! under `Conn::inner` only while the connection is established, so once
//! the state has left `Connected` no run is queued again, and the
//! teardown's cancel is final. The timer starts when the connection is
//! established and both sides speak protocol version 3 or newer.
//!
//! A data operation that ends well is an answer of the peer's transport
//! too. Its completion, handled without the connection's lock (softirq),
//! records when in `Conn::heard`, which the tick reads.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use super::{ctrl, Conn, ConnInner};
use crate::abi::{
    conn::Event,
    errno::{ENOMEM, ETIMEDOUT},
    keepalive::{self, Clock, Settings, Tick},
    wire::{Ctrl, KEEPALIVE_VERSION},
};
use crate::ffi;

/// A connection's keepalive (under `Conn::inner`).
pub(super) struct Keepalive {
    /// What this side asked for; `None`: off.
    settings: Option<Settings>,
    /// Running once established (with a peer that answers pings).
    clock: Option<Clock>,
}

impl Keepalive {
    pub(super) fn new(settings: Option<Settings>) -> Self {
        Self {
            settings,
            clock: None,
        }
    }

    /// The queue pair is gone (a reconnect): the clock starts again on
    /// the next establishment.
    pub(super) fn stop(&mut self) {
        self.clock = None;
    }

    /// The peer answered a request of ours.
    pub(super) fn answered(&mut self) {
        if let Some(c) = self.clock.as_mut() {
            c.answered(ffi::jiffies());
        }
    }

    /// The peer answered ping `seq`; `EPROTO` if no such ping is
    /// outstanding.
    pub(super) fn pong(&mut self, seq: u64) -> crate::abi::Result {
        match self.clock.as_mut() {
            Some(c) => c.pong(seq, ffi::jiffies()),
            None => Err(crate::abi::errno::EPROTO),
        }
    }
}

/// The passive side's settings: the module parameters.
pub(super) fn accepted_settings() -> Option<Settings> {
    let (ms, misses) = ffi::keepalive_params();
    keepalive::from_params(ms, misses)
}

/// Keepalive counts of one file's connections, connections gone included.
pub(crate) struct KeepaliveCounts {
    pings: AtomicU64,
    timeouts: AtomicU64,
}

impl KeepaliveCounts {
    pub(crate) const fn new() -> Self {
        Self {
            pings: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }

    /// The fdinfo lines: pings sent, connections ended because the peer
    /// went silent.
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 2] {
        [
            (
                b"rrdma-keepalive-pings\0",
                self.pings.load(Ordering::Relaxed),
            ),
            (
                b"rrdma-keepalive-timeouts\0",
                self.timeouts.load(Ordering::Relaxed),
            ),
        ]
    }
}

impl Conn {
    /// Starts the timer on establishment (under `Conn::inner`), if this
    /// side wants keepalive and the peer answers pings.
    pub(super) fn keepalive_start(self: &Arc<Self>, g: &mut ConnInner) {
        let Some(s) = g.keepalive.settings else {
            return;
        };
        if g.version < KEEPALIVE_VERSION {
            return;
        }
        let interval = kernel::time::msecs_to_jiffies(s.interval_ms) as u64;
        g.keepalive.clock = Some(Clock::new(interval, s.misses, ffi::jiffies()));
        // Moves the reconnect attempt's deadline, if one is pending.
        self.timer.arm(self, interval, true);
    }

    /// A data operation ended well: the peer's transport answered now
    /// (any context, no lock).
    pub(super) fn heard(&self) {
        // 0 means nothing new; a tick later is no harm.
        self.heard.store(ffi::jiffies().max(1), Ordering::Relaxed);
    }

    /// The timer's run while established: pings a quiet peer, ends the
    /// connection with a silent one, and re-arms while established.
    pub(super) fn keepalive_tick(self: &Arc<Self>) {
        let mut g = self.inner.lock();
        if !g.state.is_connected() {
            return;
        }
        let Some(clock) = g.keepalive.clock.as_mut() else {
            return;
        };
        let heard = self.heard.swap(0, Ordering::Relaxed);
        if heard != 0 {
            clock.heard(heard);
        }
        match clock.tick(ffi::jiffies()) {
            Tick::Dead { silent } => {
                let limit = g.keepalive.settings.map_or(0, |s| s.limit_ms());
                drop(g);
                let ended = self.fail_with(Event::Timeout, || {
                    pr_warn!(
                        "connection {} closing: no answer from the peer for {} ms (keepalive limit {} ms) (errno {})\n",
                        self.serial,
                        ffi::jiffies_to_msecs(silent),
                        limit,
                        ETIMEDOUT.get()
                    )
                });
                if ended {
                    let timeouts = &self.shared.keepalive.timeouts;
                    timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
            Tick::Ping { seq, next } => {
                // Bounded by the wire protocol (one ping outstanding), so
                // the backlog has room if no buffer is free: a failure
                // means the connection is ending (an unanswered ping ends
                // it anyway), or that no buffer was left for the ping to
                // wait in.
                match ctrl::answer(&mut g, &self.shared.ctrl, Ctrl::Ping { seq }) {
                    Ok(()) => {
                        self.shared.keepalive.pings.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e == ENOMEM => {
                        drop(g);
                        return self.fail(Event::QpFatal, "no memory for a ping to wait in", e);
                    }
                    Err(_) => {}
                }
                self.timer.arm(self, next, false);
            }
            Tick::Wait { next } => self.timer.arm(self, next, false),
        }
    }
}
