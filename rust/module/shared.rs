// SPDX-License-Identifier: GPL-2.0

//! State of one open file that its connections reach too: the completion
//! ring, the exports, the registry of connections, the work, control,
//! keepalive and reconnect counts.
//!
//! Connections hold an `Arc<Shared>` (not the file's object table), and the
//! registry holds every connection of the file until it is torn down, so
//! that release, revocation and region destruction can reach them all,
//! including those a listener accepted but userspace has not yet taken.
//!
//! Locking (each field's declaration says more): no user memory is
//! touched under these locks. `Shared::conns` is taken alone and takes
//! nothing; `Shared::ring`, a softirq-safe spinlock, alone or under a
//! connection's path lock (a completion in softirq reports a batch
//! fence's writes), and takes only `SyncWait::status` (a fence's write
//! that was a synchronous operation). `Shared::exports` nests inside
//! `FileState::objects` and `Conn::inner`.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

use crate::abi::caps::Kind;
use crate::abi::errno::{Errno, ENOMEM};
use crate::abi::uapi::Completion;
use crate::abi::Result;
use crate::caps::Charges;
use crate::compat::{new_bh_lock, BhLock};
use crate::conn::{Conn, CtrlCounts, KeepaliveCounts, ReconnectCounts};
use crate::context::Context;
use crate::export::Exports;
use crate::ffi::{FileWaitq, Owner, ShimAddr};
use crate::noio::NoIoMutex;
use crate::ring::Ring;
use crate::work::FabricWork;

/// Source of file ids (`RRDMA_IOCTL_STATUS`), never reused.
static FILE_IDS: AtomicU64 = AtomicU64::new(1);

/// Shared per-file state.
#[pin_data]
pub(crate) struct Shared {
    /// Module-wide state (devices).
    pub(crate) context: Arc<Context>,
    /// The file's id for `RRDMA_IOCTL_STATUS`: unique, never reused.
    pub(crate) id: u64,
    /// Who opened the file (`None`: a disk's connection).
    pub(crate) owner: Option<Owner>,
    /// The file's wait queue, woken for each completion (`None`: the
    /// connection of a disk, which no file has and nothing reads).
    waitq: Option<FileWaitq>,
    /// Completions of asynchronous operations. A softirq-safe spinlock:
    /// completions push into it where they are handled. Order: after a
    /// path's lock (a completion batch) or alone; before
    /// `SyncWait::status` (a fence's writes end under it, and one may be a
    /// synchronous operation's).
    #[pin]
    pub(crate) ring: BhLock<Ring>,
    /// Exports, by token. Order: after `Conn::inner` (a grant re-checks
    /// its export) and `FileState::objects` (a region's destruction checks
    /// its exports); a leaf.
    #[pin]
    pub(crate) exports: NoIoMutex<Exports>,
    /// Every live connection of the file. Taken alone; a leaf.
    #[pin]
    pub(crate) conns: Mutex<KVec<Arc<Conn>>>,
    /// Callbacks into the file's connections (no lock: atomic counts).
    pub(crate) work: FabricWork,
    /// Control messages of the file's connections that waited for a send
    /// buffer (atomic).
    pub(crate) ctrl: CtrlCounts,
    /// Keepalive pings and timeouts of the file's connections (atomic).
    pub(crate) keepalive: KeepaliveCounts,
    /// Reconnects of the file's connections, and teardowns under way
    /// (atomic).
    pub(crate) reconnect: ReconnectCounts,
    /// What the file holds against its caps and its user's (atomic;
    /// regions hold it too, beyond the file's life).
    pub(crate) charges: Arc<Charges>,
}

impl Shared {
    /// State for a file whose wait queue is `waitq`, opened by the current
    /// task, or (`None`) for the connection a disk owns (see `blk/own.rs`).
    pub(crate) fn new(context: Arc<Context>, waitq: Option<FileWaitq>) -> Result<Arc<Self>> {
        let ring = Ring::new()?;
        let owner = waitq.is_some().then(Owner::current);
        let charges = Charges::new(&context, owner.as_ref().map(Owner::kuid))?;
        let exports = Exports::new(charges.clone());
        Arc::pin_init(
            pin_init!(Self {
                context,
                id: FILE_IDS.fetch_add(1, Ordering::Relaxed),
                owner,
                waitq,
                ring <- new_bh_lock!(ring, "Shared::ring"),
                exports <- NoIoMutex::new(new_mutex!(exports, "Shared::exports")),
                conns <- new_mutex!(KVec::new(), "Shared::conns"),
                work: FabricWork::new(),
                ctrl: CtrlCounts::new(),
                keepalive: KeepaliveCounts::new(),
                reconnect: ReconnectCounts::new(),
                charges,
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    /// Whether this is a disk's (`blk/own.rs`), not a file's: its
    /// connection may be what swap waits for.
    pub(crate) fn backs_disk(&self) -> bool {
        self.waitq.is_none()
    }

    /// Wakes readers for completions already pushed into the ring (a
    /// fence's writes, under their path's lock): one trip of arrivals
    /// for read(2)'s gathering (`abi::gather`).
    pub(crate) fn pushed(&self) {
        self.ring.lock().arrived(crate::ffi::now_ns());
        self.wake_readers();
    }

    /// Queues completions (their slots were reserved) with one trip
    /// through the ring's lock, and wakes readers once.
    pub(crate) fn complete(&self, cs: impl IntoIterator<Item = Completion>) {
        let mut n = 0;
        {
            let mut ring = self.ring.lock();
            for c in cs {
                ring.push(c);
                n += 1;
            }
            if n > 0 {
                ring.arrived(crate::ffi::now_ns());
            }
        }
        if n > 0 {
            self.wake_readers();
        }
    }

    /// Wakes readers (completions were queued under the ring's lock).
    pub(crate) fn wake_readers(&self) {
        if let Some(w) = &self.waitq {
            w.wake();
        }
    }

    /// Adds a connection to the registry, charged to the file and its
    /// user (`what`: the call, for the log; `None`: the caller logs).
    pub(crate) fn register(&self, conn: &Arc<Conn>, what: Option<&str>) -> Result<(), Errno> {
        self.charges.take(Kind::Conn, what)?;
        if self.conns.lock().push(conn.clone(), GFP_KERNEL).is_err() {
            self.charges.give(Kind::Conn);
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Removes a connection from the registry, and its charge.
    pub(crate) fn unregister(&self, conn: &Conn) {
        let removed = crate::compat::vec_remove_arc(&mut self.conns.lock(), conn);
        if removed.is_some() {
            self.charges.give(Kind::Conn);
        }
        // The last reference may go here: outside the lock.
        drop(removed);
    }

    /// A reconnecting peer at `peer` names its previous connection
    /// (`nonce`): ends it, if this file still holds it, before the new one
    /// is accepted (`Conn::replaced_by`). Works on a snapshot (no
    /// `Conn::inner` under `Shared::conns`); without memory for it,
    /// `ENOMEM`: the request is refused and the peer tries again after its
    /// backoff, rather than accepted with the old connection live.
    pub(crate) fn end_replaced(&self, peer: &ShimAddr, nonce: u64) -> Result<(), Errno> {
        let conns = self.conns().map_err(|_| ENOMEM)?;
        for c in conns.iter() {
            if c.replaced_by(peer, nonce) {
                break;
            }
        }
        Ok(())
    }

    /// A snapshot of the live connections.
    pub(crate) fn conns(&self) -> Result<KVec<Arc<Conn>>> {
        let conns = self.conns.lock();
        let mut out = KVec::with_capacity(conns.len(), GFP_KERNEL)?;
        for c in conns.iter() {
            out.push(c.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }
}
