// SPDX-License-Identifier: GPL-2.0

//! Listeners: a listening cm_id whose valid connection requests the kernel
//! accepts itself (auto-accept), queueing the established connections for
//! `ACCEPT`.
//!
//! Policy: a request is refused with `EBUSY` when `backlog` connections
//! are already accepted or being accepted but not yet taken; with `ENODEV`
//! when no usable RDMA device owns the route; with the handshake's errno
//! (`EPROTO`, `EPROTONOSUPPORT`) when the request is malformed.
//!
//! A request accepted here holds a backlog slot until the peer completes
//! the handshake. A peer that never does (IB CM: no RTU answers our REP)
//! would hold it for as long as the CM retries, which the request itself
//! sets: [`ACCEPT_DEADLINE_MS`] bounds it. `ACCEPT` drops a request older
//! than that, with `ETIMEDOUT` and a log line, and a request refused for
//! room wakes `ACCEPT` when one is due.
//!
//! Closing (UNLISTEN, file release) destroys the id first, which waits for
//! request handlers still running, and only then destroys the connections
//! accepted but not taken: none is left behind.
//!
//! The C-callable entry points of a listening id are in
//! `entry/listener.rs`.
//!
//! Locking: rdma_cm's handler mutex → `Listener::inner` → `Conn::inner`
//! (a pending connection's state is read under the listener's lock). A
//! request reserves its room under `Listener::inner` and is accepted
//! without it: a refused request's teardown drains its queue pair.

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};

use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, EAGAIN, EBUSY, ECONNREFUSED, EINVAL, ENODEV, ERESTARTSYS},
};
use crate::cm_id::{CmId, InHandler};
use crate::conn::Conn;
use crate::ffi::{warn_user, ShimAddr};
use crate::shared::Shared;

struct ListenerInner {
    /// `None` before it listens, once closed, or once handed to the CM
    /// (device removal).
    id: Option<CmId<Listener>>,
    /// Accepted, handshake in progress.
    pending: KVec<Pending>,
    /// Established, waiting for ACCEPT.
    queue: KVec<Arc<Conn>>,
    /// Requests being accepted (in `Conn::accept_request`, without this
    /// lock): the room they will take in `pending`.
    accepting: usize,
    closed: bool,
}

/// How long an accepted request may take to become established.
pub(crate) const ACCEPT_DEADLINE_MS: u32 = 10_000;

/// A request accepted here whose handshake is in progress.
struct Pending {
    conn: Arc<Conn>,
    /// `jiffies` when it was accepted.
    since: u64,
}

impl Pending {
    /// Whether ACCEPT may drop it: failed, or past the deadline at `now`.
    fn stale(&self, now: u64) -> bool {
        self.conn.is_finished() || self.overdue(now)
    }

    fn overdue(&self, now: u64) -> bool {
        now.wrapping_sub(self.since) > kernel::time::msecs_to_jiffies(ACCEPT_DEADLINE_MS) as u64
    }
}

/// A listener.
#[pin_data]
pub(crate) struct Listener {
    shared: Arc<Shared>,
    backlog: u32,
    /// Guards the id, the pending and queued connections and the
    /// reservations of requests being accepted. Order: after rdma_cm's
    /// handler mutex; before `Conn::inner` (a pending connection's state
    /// is read under it). Never held across an accept or a teardown.
    #[pin]
    inner: Mutex<ListenerInner>,
    #[pin]
    cv: CondVar,
}

impl Listener {
    /// Listens on `addr`.
    pub(crate) fn new(
        shared: &Arc<Shared>,
        addr: &ShimAddr,
        backlog: u32,
    ) -> Result<Arc<Self>, Errno> {
        let nomem = |_| crate::abi::errno::ENOMEM;
        // Both lists have their room from the start: tracking a connection
        // never fails (`request` refuses beyond it).
        let pending = KVec::with_capacity(2 * backlog as usize, GFP_KERNEL).map_err(nomem)?;
        let queue = KVec::with_capacity(backlog as usize, GFP_KERNEL).map_err(nomem)?;
        let this = Arc::pin_init(
            pin_init!(Self {
                shared: shared.clone(),
                backlog,
                inner <- new_mutex!(ListenerInner {
                    id: None,
                    pending,
                    queue,
                    accepting: 0,
                    closed: false,
                }, "Listener::inner"),
                cv <- new_condvar!("Listener::cv"),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| crate::abi::errno::ENOMEM)?;
        // Bound and listening before it is published, with no lock held:
        // on failure, dropping the id destroys it, which must not happen
        // under a lock the handlers take.
        let id = CmId::create(&this, true)?;
        id.bind_listen(addr, backlog)?;
        let mut g = this.inner.lock();
        if g.closed {
            // The device went away in between (its removal event found no
            // id to hand over and is waiting for ours to go).
            drop(g);
            drop(id);
            return Err(ENODEV);
        }
        g.id = Some(id);
        drop(g);
        Ok(this)
    }

    /// A connect request, whose new id `h` handles. Returns the new
    /// connection's context pointer, or the errno it is rejected with.
    pub(crate) fn request(
        self: &Arc<Self>,
        h: &InHandler,
        pdata: &[u8],
        initiator: u8,
        responder: u8,
    ) -> Result<*mut c_void, Errno> {
        // Requests on several devices can run at once: the room checked
        // here is reserved (`accepting`) before the lock is released.
        let mut g = self.inner.lock();
        if g.closed {
            return Err(ECONNREFUSED);
        }
        // A lane joins its connection: it takes no room in the backlog.
        if let Ok(hello) = crate::abi::wire::Hello::decode(pdata) {
            if hello.lane.is_some() {
                drop(g);
                return Conn::join_lane(&self.shared, h, &hello, initiator, responder);
            }
        }
        // The reconnect-storm guard: the peer retries after its backoff.
        if self.shared.reconnect.storm() {
            return Err(EBUSY);
        }
        let open = g.pending.iter().filter(|p| !p.conn.is_finished()).count()
            + g.queue.len()
            + g.accepting;
        // Failed handshakes stay in `pending` until ACCEPT prunes them.
        if open >= self.backlog as usize
            || g.pending.len() + g.accepting >= 2 * self.backlog as usize
        {
            let now = crate::ffi::jiffies();
            if g.pending.iter().any(|p| p.overdue(now)) {
                // ACCEPT frees room: wake a caller that waits.
                self.cv.notify_all();
            }
            return Err(EBUSY);
        }
        g.accepting += 1;
        drop(g);
        // Without the lock: a refused request is torn down here, which
        // drains its queue pair and waits for its completions.
        let accepted = Conn::accept_request(&self.shared, self, h, pdata, initiator, responder);
        let mut g = self.inner.lock();
        g.accepting -= 1;
        let (conn, ctx) = accepted?;
        let since = crate::ffi::jiffies();
        // Within the room reserved above: cannot fail. Pushed even once
        // closed: `close()` destroys the listening id, which waits for
        // this handler, before it takes `pending`.
        let _ = g.pending.push(Pending { conn, since }, GFP_KERNEL);
        Ok(ctx)
    }

    /// A connection this listener accepted is established.
    pub(crate) fn established(&self, conn: &Arc<Conn>) {
        let mut g = self.inner.lock();
        if let Some(i) = g.pending.iter().position(|p| Arc::ptr_eq(&p.conn, conn)) {
            if let Some(Pending { conn: c, .. }) = crate::compat::vec_remove(&mut g.pending, i) {
                // Within capacity: at most `backlog` are open.
                let _ = g.queue.push(c, GFP_KERNEL);
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    /// Takes the next established connection, waiting up to `timeout_ms`
    /// (0: not at all, `u32::MAX`: until a signal).
    pub(crate) fn accept(&self, timeout_ms: u32) -> Result<Arc<Conn>, Errno> {
        let mut left = kernel::time::msecs_to_jiffies(timeout_ms);
        loop {
            let (conn, stale) = {
                let mut g = self.inner.lock();
                if g.closed {
                    return Err(EINVAL);
                }
                // Requests that failed before establishment, or did not
                // make it in time, are freed here.
                let now = crate::ffi::jiffies();
                let stale = match g.pending.iter().position(|p| p.stale(now)) {
                    Some(i) => crate::compat::vec_swap_remove(&mut g.pending, i),
                    None => None,
                };
                let conn = if g.queue.is_empty() {
                    None
                } else {
                    crate::compat::vec_remove(&mut g.queue, 0)
                };
                if conn.is_none() && stale.is_none() {
                    if timeout_ms == 0 {
                        return Err(EAGAIN);
                    }
                    if timeout_ms == u32::MAX {
                        if self.cv.wait_interruptible(&mut g) {
                            return Err(ERESTARTSYS);
                        }
                    } else {
                        match self.cv.wait_interruptible_timeout(&mut g, left) {
                            kernel::sync::CondVarTimeoutResult::Timeout => return Err(EAGAIN),
                            kernel::sync::CondVarTimeoutResult::Signal { .. } => {
                                return Err(ERESTARTSYS)
                            }
                            kernel::sync::CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                        }
                    }
                }
                (conn, stale)
            };
            if let Some(s) = stale {
                if !s.conn.is_finished() {
                    warn_user!(
                        "listener: a connection not established {} ms after its accept; dropped\n",
                        ACCEPT_DEADLINE_MS
                    );
                }
                Conn::destroy(&s.conn, Event::Timeout);
            }
            match conn {
                // A connection that closed in the queue is of no use.
                Some(c) if c.is_finished() => Conn::destroy(&c, Event::UserClose),
                Some(c) => return Ok(c),
                None => {}
            }
        }
    }

    /// rdma_cm's device removal on the listening id (in its handler `h`):
    /// no more connections. Returns non-zero when the CM must destroy the
    /// id (handed over here); 0 when `close()` or `new()` owns it.
    pub(crate) fn device_removal(&self, h: &InHandler) -> c_int {
        let mut g = self.inner.lock();
        g.closed = true;
        let id = g.id.take();
        drop(g);
        self.cv.notify_all();
        match id {
            Some(id) => {
                pr_warn!("listener: its RDMA device is going away; no more connections\n");
                // The caller keeps the listener alive until the CM has
                // destroyed the id.
                id.into_cm(h)
            }
            None => 0,
        }
    }

    /// Stops listening and destroys the connections not yet taken.
    pub(crate) fn close(this: &Arc<Self>) {
        let id = {
            let mut g = this.inner.lock();
            g.closed = true;
            g.id.take()
        };
        this.cv.notify_all();
        // Destroying the id waits for request handlers still running: once
        // it returns, every connection this listener accepted is in
        // `pending` or `queue`, and no new one comes.
        drop(id);
        let (pending, queue) = {
            let mut g = this.inner.lock();
            (
                core::mem::take(&mut g.pending),
                core::mem::take(&mut g.queue),
            )
        };
        for p in pending.iter() {
            Conn::destroy(&p.conn, Event::UserClose);
        }
        for c in queue.iter() {
            Conn::destroy(c, Event::UserClose);
        }
    }
}
