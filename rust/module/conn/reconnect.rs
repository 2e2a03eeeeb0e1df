// SPDX-License-Identifier: GPL-2.0

//! Reconnect of a connection (the rules are `abi::reconnect` and the state
//! machine's `Waiting`): the backoff, the attempts, putting the imports
//! back on the new queue pair, and the counts fdinfo shows.
//!
//! A failed connection that reconnects keeps everything userspace holds:
//! its handle, its imports' handles, its completion ring. The teardown
//! frees what belonged to the old queue pair (flushing operations in
//! flight with `ECONNRESET`), marks the imports stale, and arms the
//! connection's timer with the backoff. The timer's run starts an attempt:
//! a new cm_id resolving the same address, with the connection's timeout
//! as its deadline (the same timer). On establishment the restore work
//! asks the peer for each import's grant again: the same shape gets the
//! new keys, anything else (the export is gone, changed, or restricted to
//! the old connection) is revoked: `EKEYREVOKED`. Until then operations and
//! imports fail with `EAGAIN`.
//!
//! The fence: an attempt's hello names the last connection that was
//! established (its nonce, `Hello::replaces` of `abi::wire`). The peer ends that
//! connection, if it still holds it, before it accepts the attempt
//! ([`Conn::replaced_by`]): its queue pair goes to the error state at once,
//! so a write the old connection still carried (siw's TCP stream delivers
//! what it had queued after our side gave up) cannot land after the new
//! connection's writes. Without the fence such a write, failed here with
//! `ECONNRESET`, could overwrite a newer acknowledged one.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, WorkItem};

use super::{Conn, ConnInner};
use crate::abi::{
    conn::{Action, Event, State},
    reconnect::{self, Budget},
};
use crate::cm_id::CmId;
use crate::ffi::{self, ShimAddr};

/// How long a connection made with CONNECT reconnects after a failure
/// (an accepted one never does: its peer does).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Never: it ends at its first failure.
    No,
    /// Up to the module parameter `reconnect_attempts` tries in a row
    /// (`RRDMA_CONNECT_RECONNECT`).
    Params,
    /// For as long as it lives, with the parameters' delays (a disk's,
    /// which its loss timeout, not its end, fails I/O for).
    Forever,
}

/// A reconnecting connection's state (under `Conn::inner`).
pub(super) struct Reconnect {
    pub(super) budget: Budget,
    /// Where to connect again.
    pub(super) addr: ShimAddr,
    /// When the connection failed (jiffies), for the log line.
    failed_at: u64,
    /// When the last attempt started (jiffies), for the log line.
    attempt_at: u64,
    /// The nonce of the last established connection, which an attempt's
    /// hello names for the peer to end.
    pub(super) replaces: Option<u64>,
}

impl Reconnect {
    /// The state of a connection to `addr` that reconnects as `retry`
    /// says (None: never).
    pub(super) fn new(addr: ShimAddr, retry: Retry) -> Option<Self> {
        let (params, _) = ffi::reconnect_params();
        let policy = match retry {
            Retry::No => return None,
            Retry::Params => params,
            Retry::Forever => params.forever(),
        };
        Some(Self {
            budget: Budget::new(policy),
            addr,
            failed_at: 0,
            attempt_at: 0,
            replaces: None,
        })
    }
}

/// Reconnect counts of one file's connections, connections gone included,
/// and the storm guard's count.
pub(crate) struct ReconnectCounts {
    attempts: AtomicU64,
    reconnects: AtomicU64,
    gave_up: AtomicU64,
    refused: AtomicU64,
    /// Accepted connections ended by the fence of their peer's reconnect.
    replaced: AtomicU64,
    /// Connections between two queue pairs now.
    pub(super) waiting: AtomicU32,
    /// Teardowns queued or running on the work queue now.
    pub(super) tearing: AtomicU32,
}

impl ReconnectCounts {
    pub(crate) const fn new() -> Self {
        Self {
            attempts: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            replaced: AtomicU64::new(0),
            waiting: AtomicU32::new(0),
            tearing: AtomicU32::new(0),
        }
    }

    /// Whether a listener of this file refuses a connect request now (the
    /// reconnect-storm guard); counts and logs a refusal.
    pub(crate) fn storm(&self) -> bool {
        let (_, max) = ffi::reconnect_params();
        let tearing = self.tearing.load(Ordering::Relaxed);
        if !reconnect::storm(tearing, max) {
            return false;
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        if ffi::ratelimit() {
            pr_warn!(
                "listener refusing a connect request: {} connections being torn down (accept_max_teardowns {})\n",
                tearing,
                max
            );
        }
        true
    }

    /// Reconnects that succeeded (only grows).
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    /// The fdinfo lines.
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 6] {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            (b"rrdma-reconnect-attempts\0", get(&self.attempts)),
            (b"rrdma-reconnects\0", get(&self.reconnects)),
            (b"rrdma-reconnect-gave-up\0", get(&self.gave_up)),
            (
                b"rrdma-connections-reconnecting\0",
                u64::from(self.waiting.load(Ordering::Relaxed)),
            ),
            (b"rrdma-storm-refusals\0", get(&self.refused)),
            (b"rrdma-connections-replaced\0", get(&self.replaced)),
        ]
    }
}

impl_has_work! {
    impl HasWork<Self, 1> for Conn { self.restore_work }
}

impl WorkItem<1> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::scoped(this, |this| this.restore_imports());
    }
}

impl Conn {
    /// The fence (exporter side): ends this connection if it is the one a
    /// reconnecting peer at `peer` names with `nonce`, before its new
    /// connection is accepted. The queue pair stops here (nothing more is
    /// placed); the rest of the teardown runs on the work queue. Returns
    /// whether it was. Called in a listener's request handler, with no
    /// rrdma lock held.
    pub(crate) fn replaced_by(self: &Arc<Self>, peer: &ShimAddr, nonce: u64) -> bool {
        if self.active {
            return false;
        }
        let mut g = self.inner.lock();
        if g.nonce != nonce || !g.peer.same_host(peer) || g.state.is_finished() {
            return false;
        }
        // Its lanes stop too.
        g.stop_qps(self.serial);
        // Not `fail_with`: the state changes under the same lock as the
        // stop, before the provider's own close of the stopped queue pair
        // can end it first (this end is counted and logged as the fence's).
        let action = self.advance(&mut g, Event::Disconnected);
        drop(g);
        self.cv.notify_all();
        self.shared
            .reconnect
            .replaced
            .fetch_add(1, Ordering::Relaxed);
        if ffi::ratelimit() {
            pr_info!(
                "connection {} replaced by its peer's reconnect: closing\n",
                self.serial
            );
        }
        if action == Action::Teardown {
            self.schedule_teardown();
        }
        true
    }

    /// The teardown of a failed connection that reconnects has freed the
    /// old queue pair (under `Conn::inner`, the state is now `Waiting`):
    /// clears what belonged to it and arms the backoff.
    pub(super) fn backoff(self: &Arc<Self>, g: &mut ConnInner) {
        g.ctrl.reset();
        g.imports.stale_all();
        let _ = self.size_path0(g, 0, 0, 0);
        g.keepalive.stop();
        g.version = 0;
        let Some(r) = g.reconnect.as_mut() else {
            return;
        };
        let error = match g.state {
            State::Waiting { error } => error.get(),
            _ => 0,
        };
        if r.budget.tried() == 0 {
            r.failed_at = ffi::jiffies();
            self.shared
                .reconnect
                .waiting
                .fetch_add(1, Ordering::Relaxed);
            if ffi::ratelimit() {
                pr_info!(
                    "connection {} lost (errno {}): reconnecting\n",
                    self.serial,
                    error
                );
            }
        } else if ffi::ratelimit() {
            pr_info!(
                "connection {}: reconnect attempt {} failed after {} ms (errno {})\n",
                self.serial,
                r.budget.tried(),
                ffi::jiffies_to_msecs(ffi::jiffies().wrapping_sub(r.attempt_at)),
                error
            );
        }
        let ms = r.budget.next_attempt(ffi::random_u64());
        self.shared
            .reconnect
            .attempts
            .fetch_add(1, Ordering::Relaxed);
        self.timer
            .arm(self, kernel::time::msecs_to_jiffies(ms) as u64, false);
    }

    /// The backoff is over (the timer's run): starts an attempt.
    pub(super) fn reconnect_tick(self: &Arc<Self>) {
        let mut g = self.inner.lock();
        if self.advance(&mut g, Event::Retry) != Action::Reconnect {
            return;
        }
        let Some((addr, attempt)) = g.reconnect.as_mut().map(|r| {
            r.attempt_at = ffi::jiffies();
            (r.addr, r.budget.tried())
        }) else {
            return;
        };
        ffi::trace::reconnect_attempt(self.serial, attempt, &addr);
        // The connection's timeout bounds the attempt: the timer ends it.
        let timeout_ms = g.timeout_ms;
        if timeout_ms != u32::MAX {
            self.timer.arm(
                self,
                kernel::time::msecs_to_jiffies(timeout_ms) as u64,
                false,
            );
        }
        // rdma_create_id() and rdma_resolve_addr() take no handler mutex;
        // the id's first event waits for the lock until it is published.
        let r = CmId::create(self, false).and_then(|id| {
            let r = id.resolve_addr(&addr, timeout_ms);
            g.install_id(id);
            r
        });
        if let Err(e) = r {
            let action = self.advance(&mut g, Event::AddrError(e.to_errno()));
            drop(g);
            if action == Action::Teardown {
                self.schedule_teardown();
            }
        }
    }

    /// The attempt's deadline (the timer's run): ends an attempt not
    /// established by now.
    pub(super) fn attempt_timeout(self: &Arc<Self>) {
        let mut g = self.inner.lock();
        let attempt = matches!(
            g.state,
            State::Resolving | State::RoutePending | State::Connecting
        );
        if !attempt || !g.was_established() {
            return;
        }
        let action = self.advance(&mut g, Event::Timeout);
        let ms = g.timeout_ms;
        drop(g);
        self.cv.notify_all();
        if action == Action::Teardown {
            if ffi::ratelimit() {
                pr_info!(
                    "connection {}: reconnect attempt not established within {} ms\n",
                    self.serial,
                    ms
                );
            }
            self.schedule_teardown();
        }
    }

    /// Established again (under `Conn::inner`): refills the budget and
    /// queues the restore of the imports.
    pub(super) fn reconnected(self: &Arc<Self>, g: &mut ConnInner) {
        let Some(r) = g.reconnect.as_mut() else {
            return;
        };
        let again = r.budget.was_established();
        let tried = r.budget.tried();
        r.budget.established();
        if !again {
            return;
        }
        self.shared
            .reconnect
            .waiting
            .fetch_sub(1, Ordering::Relaxed);
        self.shared
            .reconnect
            .reconnects
            .fetch_add(1, Ordering::Relaxed);
        if ffi::ratelimit() {
            pr_info!(
                "connection {} reconnected after {} ms ({} attempts)\n",
                self.serial,
                ffi::jiffies_to_msecs(ffi::jiffies().wrapping_sub(r.failed_at)),
                tried
            );
        }
        // Queued once per establishment: a run still pending from the one
        // before covers this one too.
        let _ = ffi::wq().enqueue::<Arc<Conn>, 1>(self.clone());
    }

    /// The connection ends for good (the teardown, under `Conn::inner`,
    /// the state now `Closed`): counts and logs a reconnect that gave up.
    pub(super) fn gave_up(&self, g: &ConnInner) {
        // Attempts since the last establishment: it was reconnecting.
        if !g.reconnect.as_ref().is_some_and(|r| r.budget.tried() > 0) {
            return;
        }
        self.shared
            .reconnect
            .waiting
            .fetch_sub(1, Ordering::Relaxed);
        if g.state.errno(false) == crate::abi::errno::ENOTCONN {
            // A user close, not a failure.
            return;
        }
        self.shared
            .reconnect
            .gave_up
            .fetch_add(1, Ordering::Relaxed);
        let tried = g.reconnect.as_ref().map_or(0, |r| r.budget.tried());
        if ffi::ratelimit() {
            pr_warn!(
                "connection {} closing: no reconnect after {} attempts (errno {})\n",
                self.serial,
                tried,
                g.state.errno(false).get()
            );
        }
    }

    /// Asks the peer for each stale import's grant again (the module's
    /// work queue, after establishment). Stops when the connection fails
    /// again: the next establishment queues it anew.
    fn restore_imports(self: &Arc<Self>) {
        let mut after = 0;
        loop {
            let (entry, token, timeout_ms) = {
                let g = self.inner.lock();
                if !g.state.is_connected() {
                    return;
                }
                match g.imports.next_stale(after) {
                    Some((entry, token)) => (entry, token, g.timeout_ms),
                    None => return,
                }
            };
            after = entry;
            let fetched = self.fetch_grant(token, timeout_ms);
            let mut g = self.inner.lock();
            if !g.state.is_connected() {
                return;
            }
            let why = match fetched {
                Ok(f) => match g.imports.restore(entry, f) {
                    Ok(()) => None,
                    Err(e) => Some(("its export changed", e)),
                },
                Err(e) if reconnect::restore_refused(e) => Some(("the peer refused it", e)),
                Err(e) => {
                    // No answer: the import stays stale, and the
                    // connection's next establishment asks again.
                    drop(g);
                    self.fail(Event::Timeout, "an import's grant was not restored", e);
                    return;
                }
            };
            if let Some((why, e)) = why {
                g.imports.revoke_entry(entry);
                ffi::trace::import_revoked(self.serial, token);
                if ffi::ratelimit() {
                    pr_warn!(
                        "connection {}: import of token {:#x} revoked after reconnect: {} (errno {})\n",
                        self.serial,
                        token,
                        why,
                        e.get()
                    );
                }
            }
        }
    }
}
