// SPDX-License-Identifier: GPL-2.0

//! The exporter side of a connection: registrations granted to the peer
//! for this file's exports, and their revocation.
//!
//! A grant registers chunks of the exported region for this connection
//! only (its own protection domain), with remote write access only for a
//! read-write export. Registrations are allocated outside the connection's
//! lock and enter the cache, under it, with their registration work
//! request's post; those the queue pair refused leave it at once: a
//! refused or failed grant leaves nothing behind.
//!
//! Revocation (UNEXPORT) is a round trip: the importer is told, refuses
//! new operations on the export, lets those in flight complete and
//! acknowledges; then the registrations are deregistered. If the importer
//! does not acknowledge in time, the connection ends (its teardown
//! deregisters). Either way, when UNEXPORT returns nothing of the export is
//! registered here, so no write of the peer can land afterwards.

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Arc;

use super::{ctrl, deadline, wait_until, Conn};
use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, EBUSY, EINVAL, ENOENT, ENOMEM, ENOTCONN, ERESTARTSYS},
    wc,
    wire::{Grant, GRANT_KEYS_MAX},
};
use crate::calling::Task;
use crate::ffi::{self, ShimWr};
use crate::mr::{Chunks, Lent, Mr};
use crate::region::Region;

/// How long UNEXPORT waits for an importer's acknowledgement before it
/// ends the connection instead.
const REVOKE_TIMEOUT_MS: u32 = 30_000;

/// What this connection registered for one export.
/// Field order is drop order: the registrations go before the region
/// reference, which may be the last one keeping the pages.
pub(super) struct Granted {
    chunks: Chunks,
    _region: Arc<Region>,
}

impl Granted {
    /// Chunk `i`'s registration, lent to its registration work request.
    fn lent(&self, i: usize) -> Option<Lent<'_>> {
        let mr = self.chunks.get(i)?;
        // SAFETY: a grant leaves its connection's cache only once every
        // registration request posted before its revoke began has
        // completed (`RevokeTicket::finish` waits for
        // `Grants::regs_done_through`), and none naming it is posted after
        // (a grant first finds its token in the export table, which
        // UNEXPORT left before revoking), or with the connection's
        // resources after its queue pair is destroyed; a chunk leaves it
        // only unposted (`Chunks::take_unposted`).
        Some(unsafe { Lent::new(mr) })
    }
}

/// The grants of a connection, by token.
pub(super) struct Grants {
    tree: RBTree<u64, Granted>,
    /// Registration work requests posted, and completed: they complete in
    /// the order they were posted (one send queue).
    regs_posted: u64,
    regs_done: u64,
}

impl Grants {
    pub(super) fn new() -> Self {
        Self {
            tree: RBTree::new(),
            regs_posted: 0,
            regs_done: 0,
        }
    }

    /// Registration work requests posted and not completed yet.
    fn regs_in_flight(&self) -> u32 {
        (self.regs_posted - self.regs_done) as u32
    }

    /// Whether the first `posted` registration requests have completed
    /// (also when these counts are a newer queue pair's, which posted
    /// fewer: the old one's are gone with it).
    fn regs_done_through(&self, posted: u64) -> bool {
        self.regs_done >= posted || self.regs_posted < posted
    }

    pub(super) fn contains(&self, token: u64) -> bool {
        self.tree.get(&token).is_some()
    }

    /// Exports granted on the connection.
    pub(super) fn len(&self) -> usize {
        self.tree.iter().count()
    }

    /// Their tokens.
    pub(super) fn tokens(&self) -> impl Iterator<Item = u64> + '_ {
        self.tree.keys().copied()
    }

    /// A registration work request of a grant completed (or flushed).
    pub(super) fn reg_done(&mut self) {
        self.regs_done = (self.regs_done + 1).min(self.regs_posted);
    }
}

impl Conn {
    /// A grant's registration work request completed with `wc_status`.
    pub(crate) fn grant_reg_done(self: &Arc<Self>, t: &Task, wc_status: c_int) {
        if wc::to_errno(wc_status as u32).is_some() {
            return self.wc_failed(t, wc_status, super::FailedWr::Registration);
        }
        let mut g = self.inner.lock();
        if let Some(res) = g.res.as_mut() {
            res.grants.reg_done();
        }
        drop(g);
        // A grant may wait for room (`Conn::grant`).
        self.cv.notify_all();
    }
}

/// How long a grant waits in all for earlier registrations to complete
/// before it answers `EBUSY` (or with the keys it has).
const GRANT_ROOM_WAIT_MS: u32 = 1000;

/// What one batch of a grant registered ([`Conn::grant_batch`]).
struct Batch {
    /// Keys written, one per chunk from the batch's first.
    keys: u32,
    /// The connection's chunk size, as a shift.
    chunk_shift: u32,
    /// Whether the batch reached the region's last chunk.
    last: bool,
}

/// A revocation under way on one connection (see [`Conn::start_revoke`]).
pub(crate) struct RevokeTicket {
    conn: Arc<Conn>,
    token: u64,
    /// Registration requests posted when it began: the grant's are among
    /// them.
    regs_posted: u64,
    /// The revoke's id, if it could be sent.
    id: Option<u64>,
}

impl Conn {
    /// Answers an import request: registers the chunks of the export behind
    /// `token` from `first` on for the peer and returns their keys, as many
    /// as an answer holds ([`GRANT_KEYS_MAX`]).
    ///
    /// The registrations go out in batches of at most the queue pair's
    /// `grant_regs` (61, a laned connection's own 13, a small NIC's fewer),
    /// each once the earlier ones completed, so that a small send queue
    /// costs the importer no more rounds than a large one. A batch that
    /// finds no room (its waits take [`GRANT_ROOM_WAIT_MS`] in all) or no
    /// memory after others succeeded ends the answer with the keys it
    /// has: the importer asks for the rest.
    ///
    /// No other grant of the connection runs meanwhile (its control
    /// messages are handled one by one), and its queue pair stays: a
    /// teardown that destroys it waits for this handler first.
    pub(super) fn grant(self: &Arc<Self>, token: u64, first: u32) -> Result<Grant, Errno> {
        let export = self
            .shared
            .exports
            .lock()
            .find(token)
            .cloned()
            .ok_or(ENOENT)?;
        if export.conn.is_some_and(|s| s != self.serial) {
            // Same answer as an unknown token: do not confirm it exists.
            return Err(ENOENT);
        }
        let geometry = *export.region.geometry();
        let mut grant = Grant {
            block_size: geometry.block_size(),
            nblocks: geometry.nblocks(),
            generation: export.generation,
            writable: export.writable,
            chunk_shift: 0,
            first_chunk: first,
            nkeys: 0,
            rkeys: [0; GRANT_KEYS_MAX],
        };
        let mut done = 0;
        // What is left of the answer's waits for room.
        let mut left = deadline(GRANT_ROOM_WAIT_MS);
        while (done as usize) < GRANT_KEYS_MAX {
            let keys = &mut grant.rkeys[done as usize..];
            match self.grant_batch(&export, token, first + done, keys, &mut left) {
                Ok(batch) => {
                    done += batch.keys;
                    grant.chunk_shift = batch.chunk_shift as u8;
                    if batch.last {
                        break;
                    }
                }
                Err(e) if done > 0 && (e == EBUSY || e == ENOMEM) => break,
                Err(e) => return Err(e),
            }
        }
        grant.nkeys = done as u16;
        Ok(grant)
    }

    /// Registers the chunks of `export` from `first` on that one batch
    /// holds (at most `keys.len()` and the queue pair's `grant_regs`),
    /// those not registered already, and writes their keys to `keys`.
    /// `EINVAL` if `first` is past the region's last chunk; `EBUSY` if
    /// earlier registrations leave no room for it within `left`.
    fn grant_batch(
        self: &Arc<Self>,
        export: &crate::export::Export,
        token: u64,
        first: u32,
        keys: &mut [u32],
        left: &mut Option<kernel::time::Jiffies>,
    ) -> Result<Batch, Errno> {
        let geometry = *export.region.geometry();
        // What is missing, under the lock (a bit per key of the batch).
        let (pd, shift, n, last, missing, have) = {
            let g = self.inner.lock();
            let res = g
                .res
                .as_ref()
                .filter(|_| g.state.can_talk())
                .ok_or(ENOTCONN)?;
            let shift = res.chunk_shift;
            let nchunks = geometry.bytes().div_ceil(1u64 << shift);
            if u64::from(first) >= nchunks {
                return Err(EINVAL);
            }
            // No more registrations than may be in flight (a small queue).
            let n = (nchunks - u64::from(first))
                .min(keys.len() as u64)
                .min(u64::from(res.grant_regs)) as u32;
            let last = u64::from(first + n) == nchunks;
            let entry = res.grants.tree.get(&token);
            let mut missing: u128 = 0;
            for k in 0..n {
                if entry.map_or(true, |e| e.chunks.get((first + k) as usize).is_none()) {
                    missing |= 1 << k;
                }
            }
            (res.pd.clone(), shift, n, last, missing, entry.is_some())
        };
        let count = missing.count_ones();
        // Allocated outside the lock: the registrations and, for a first
        // grant of the token, its tree node and chunk table.
        let node = if have {
            None
        } else {
            Some((
                RBTreeNodeReservation::new(GFP_KERNEL).map_err(|_| ENOMEM)?,
                Chunks::new(geometry.bytes(), shift).map_err(|_| ENOMEM)?,
            ))
        };
        let mut mrs = KVec::with_capacity(count as usize, GFP_KERNEL).map_err(|_| ENOMEM)?;
        let mut wrs = KVec::with_capacity(count as usize, GFP_KERNEL).map_err(|_| ENOMEM)?;
        // Registrations not installed are freed after the lock is dropped.
        let mut spare = KVec::with_capacity(count as usize, GFP_KERNEL).map_err(|_| ENOMEM)?;
        let access = if export.writable {
            ffi::ACCESS_REMOTE_READ | ffi::ACCESS_REMOTE_WRITE | ffi::ACCESS_LOCAL_WRITE
        } else {
            ffi::ACCESS_REMOTE_READ
        };
        for k in (0..n).filter(|k| missing & (1 << k) != 0) {
            let c = first + k;
            let mr = Mr::new(&pd, &export.region, u64::from(c), shift).map_err(|_| ENOMEM)?;
            // Within capacity: cannot fail.
            let _ = mrs.push((c as usize, mr), GFP_KERNEL);
        }

        let mut g = self.inner.lock();
        // Earlier registrations (this answer's earlier batches, a small
        // NIC's earlier grants) must complete first; completions come in
        // the order of the send queue, behind whatever was posted before.
        // `EBUSY` in time fails the import, or ends a partial answer.
        wait_until(&self.cv, g.guard(), left, |i| {
            !i.state.can_talk()
                || i.res
                    .as_ref()
                    .map_or(true, |r| r.grants.regs_in_flight() + count <= r.grant_regs)
        })
        .map_err(|_| EBUSY)?;
        if !g.state.can_talk() {
            return Err(ENOTCONN);
        }
        // Unexport may have run since the lookup: it revokes under our lock.
        if self.shared.exports.lock().find(token).is_none() {
            return Err(ENOENT);
        }
        let inner = &mut *g;
        let qp = inner.id.as_ref().and_then(|id| id.qp()).ok_or(ENOTCONN)?;
        let res = inner
            .res
            .as_mut()
            .filter(|r| Arc::ptr_eq(&r.pd, &pd))
            .ok_or(ENOTCONN)?;
        if let Some((reservation, chunks)) = node {
            if !res.grants.contains(token) {
                res.grants.tree.insert(reservation.into_node(
                    token,
                    Granted {
                        chunks,
                        _region: export.region.clone(),
                    },
                ));
            }
        }
        let in_flight = res.grants.regs_in_flight();
        let entry = res.grants.tree.get_mut(&token).ok_or(ENOENT)?;
        // Installed before the post, so that each request names a
        // registration the grant holds; what a concurrent grant registered
        // meanwhile is kept, ours freed after the lock.
        let mut fresh: u128 = 0;
        for (c, mr) in mrs {
            match entry.chunks.set(c, mr) {
                Ok(()) => fresh |= 1 << (c - first as usize),
                // Within capacity: cannot fail.
                Err(mr) => drop(spare.push(mr, GFP_KERNEL)),
            }
        }
        for k in (0..n).filter(|k| fresh & (1 << k) != 0) {
            if let Some(lent) = entry.lent((first + k) as usize) {
                // Within capacity (one per registration allocated).
                let _ = wrs.push(ShimWr::reg(lent, access, true), GFP_KERNEL);
            }
        }
        let room = in_flight + wrs.len() as u32 <= res.grant_regs;
        let (posted, r) = if room { qp.post(&mut wrs) } else { (0, Ok(())) };
        res.grants.regs_posted += u64::from(posted);
        // Those not posted leave the grant: no posted request names them.
        for k in (0..n)
            .filter(|k| fresh & (1 << k) != 0)
            .skip(posted as usize)
        {
            if let Some(mr) = entry.chunks.take_unposted((first + k) as usize) {
                // Within capacity: cannot fail.
                let _ = spare.push(mr, GFP_KERNEL);
            }
        }
        if !room {
            return Err(EBUSY);
        }
        if let Err(e) = r {
            drop(g);
            drop(spare);
            self.fail(Event::QpFatal, "cannot post a registration", e);
            return Err(e);
        }
        for k in 0..n {
            keys[k as usize] = entry
                .chunks
                .get((first + k) as usize)
                .map_or(0, |m| m.rkey());
        }
        drop(g);
        drop(spare);
        Ok(Batch {
            keys: n,
            chunk_shift: shift,
            last,
        })
    }

    /// Starts revoking the export `token` on this connection: tells the
    /// importer. `None` if nothing of it is granted here.
    pub(crate) fn start_revoke(
        self: &Arc<Self>,
        token: u64,
        generation: u32,
    ) -> Option<RevokeTicket> {
        let mut g = self.inner.lock();
        let regs_posted = match g.res.as_ref() {
            Some(r) if r.grants.contains(token) => r.grants.regs_posted,
            _ => return None,
        };
        let mut left = deadline(REVOKE_TIMEOUT_MS);
        let id = self.send_revoke(&mut g, token, generation, &mut left).ok();
        Some(RevokeTicket {
            conn: self.clone(),
            token,
            regs_posted,
            id,
        })
    }
}

impl RevokeTicket {
    /// Waits for the importer's acknowledgement and deregisters what was
    /// granted for the token. Without an acknowledgement in time (or if
    /// interrupted, or if the revoke could not be sent) the connection
    /// ends instead, and this returns once its teardown deregistered
    /// everything.
    pub(crate) fn finish(self) {
        let conn = &self.conn;
        let mut acked = false;
        // Why the connection ends instead, for the log.
        let mut why = "the revoke could not be sent";
        if let Some(id) = self.id {
            let mut g = conn.inner.lock();
            let mut left = deadline(REVOKE_TIMEOUT_MS);
            // The grant's registration requests must be done too: they name
            // what is deregistered below (later grants' do not matter).
            let posted = self.regs_posted;
            let done = |i: &super::ConnInner| {
                i.res
                    .as_ref()
                    .map_or(true, |r| r.grants.regs_done_through(posted))
            };
            let waited = wait_until(&conn.cv, g.guard(), &mut left, |i| {
                !i.state.can_talk() || (ctrl::revoke_answered(i, id) && done(i))
            });
            let regs_done = done(&g);
            let answered = Conn::revoke_acked(&mut g, id, true);
            acked = answered && regs_done;
            why = match (answered, regs_done, waited) {
                (true, false, _) => "its registrations did not complete",
                (false, _, Err(e)) if e == ERESTARTSYS => {
                    "interrupted while waiting for the importer"
                }
                (false, _, Ok(())) => "the connection ended",
                _ => "the importer did not acknowledge in time",
            };
            if acked {
                let granted = g
                    .res
                    .as_mut()
                    .and_then(|r| r.grants.tree.remove(&self.token));
                drop(g);
                // Deregistered: the NIC refuses the old keys from now on.
                drop(granted);
            }
        }
        if !acked {
            if crate::ffi::ratelimit() {
                pr_warn!(
                    "connection {}: revoking an export: {}; closing the connection\n",
                    conn.serial,
                    why
                );
            }
            Conn::destroy(conn, Event::Timeout);
        }
    }
}
