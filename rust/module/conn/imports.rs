// SPDX-License-Identifier: GPL-2.0

//! The importer side of a connection: imports of the peer's exports, and
//! the peer's revocations of them.
//!
//! Each import has an entry in the connection's table (from the moment the
//! import starts, so that a revoke arriving meanwhile is not missed) with
//! its token, whether it was revoked and how many operations on it are in
//! flight. A revoke marks the entries of its token (new operations fail
//! with `EKEYREVOKED`) and is acknowledged once none of them has an
//! operation in flight. The table holds live imports only: an entry goes
//! when its import does (or, if operations are still in flight, when the
//! last completes), so a peer's revokes cannot grow it.
//!
//! An entry's in-flight count (`Uses`) is atomic and shared with the
//! operations on it, which end where their completions are handled
//! (softirq, `data/complete.rs`) without the connection's lock: a count that drops
//! to zero while a revoke's acknowledgement or the entry's removal waits
//! for it asks the connection's follow-up work to act (`data/followups.rs`,
//! `Followups`).
//!
//! The entry holds the peer's keys, so that a reconnect (`reconnect.rs`)
//! can replace them: it marks every entry stale (operations fail with
//! `EAGAIN`) and restores each with the keys of a grant of the same shape,
//! or revokes it.

use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Arc;

pub(super) use super::uses::Uses;
use super::{ctrl, deadline, Conn};
use crate::abi::Result;
use crate::abi::{
    blocks::Geometry,
    conn::Event,
    errno::{Errno, E2BIG, EAGAIN, EINVAL, EKEYREVOKED, ENOENT, ENOMEM, ENOTCONN, EPROTO},
    ops,
    wire::Grant,
};

/// Most registration chunks an import accepts (1 TiB at 1 MiB chunks).
const IMPORT_CHUNKS_MAX: u64 = 1 << 20;

/// What an import's grant promised: a restored grant must match it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shape {
    block_size: u32,
    nblocks: u64,
    chunk_shift: u8,
    generation: u32,
    writable: bool,
}

impl Shape {
    fn of(g: &Grant) -> Self {
        Self {
            block_size: g.block_size,
            nblocks: g.nblocks,
            chunk_shift: g.chunk_shift,
            generation: g.generation,
            writable: g.writable,
        }
    }
}

/// A grant fetched from the peer: its first message and every chunk's key.
pub(super) struct Fetched {
    head: Grant,
    rkeys: KVVec<u32>,
}

/// What `RRDMA_IOCTL_STATUS` shows of an import (`status.rs`).
pub(super) struct ImportView {
    /// Given up by its file with operations still in flight.
    pub(super) orphan: bool,
    pub(super) writable: bool,
    pub(super) revoked: bool,
    pub(super) stale: bool,
    /// 0 while not known (never, as shapes go).
    pub(super) block_size: u32,
    pub(super) nblocks: u64,
    pub(super) in_flight: u32,
}

/// One import, as the connection tracks it.
struct Entry {
    token: u64,
    /// Its keys belong to a queue pair gone (reconnect): not usable until
    /// restored.
    stale: bool,
    /// Operations in flight on it.
    uses: Arc<Uses>,
    /// Its import is gone; the entry goes with its last operation.
    orphan: bool,
    /// What the grant promised (`None` while the import starts).
    shape: Option<Shape>,
    /// The peer's key of each of its registration chunks.
    rkeys: KVVec<u32>,
}

/// An import's entry an operation may start on, found under the
/// connection's lock ([`Table::usable`]).
pub(super) struct Usable<'a>(&'a Entry);

impl Usable<'_> {
    /// Its in-flight count, which the operation joins.
    pub(super) fn uses(&self) -> &Arc<Uses> {
        &self.0.uses
    }

    /// The peer's key for its chunk `chunk`.
    pub(super) fn rkey(&self, chunk: usize) -> Option<u32> {
        self.0.rkeys.get(chunk).copied()
    }
}

/// The imports of a connection, by entry id.
pub(super) struct Table {
    tree: RBTree<u64, Entry>,
    next: u64,
}

impl Table {
    pub(super) fn new() -> Self {
        Self {
            tree: RBTree::new(),
            next: 1,
        }
    }

    /// Operations in flight on imports of `token`; if some are, the one
    /// that ends the last asks the follow-up work to look again.
    pub(super) fn inflight(&self, token: u64) -> u32 {
        self.tree
            .values()
            .filter(|e| e.token == token)
            .map(|e| e.uses.waited_count())
            .sum()
    }

    /// The follow-up work runs: nothing waits for counts to reach zero
    /// until what it runs asks again (the revokes' acknowledgements), and
    /// every orphan whose operations all ended goes.
    pub(super) fn settle(&mut self) {
        for e in self.tree.values() {
            e.uses.unwait();
        }
        while let Some(id) = self
            .tree
            .iter()
            .find(|(_, e)| e.orphan && e.uses.waited_count() == 0)
            .map(|(&id, _)| id)
        {
            self.tree.remove(&id);
        }
    }

    /// The peer revoked `token`: its imports refuse new operations.
    pub(super) fn revoke(&mut self, token: u64, _generation: u32) {
        for e in self.tree.values_mut().filter(|e| e.token == token) {
            e.uses.revoke();
        }
    }

    /// Whether operations may start on import `id`: `EKEYREVOKED` once
    /// revoked, `EAGAIN` until a reconnect restored it.
    pub(super) fn check(&self, id: u64) -> Result<(), Errno> {
        self.usable(id).map(|_| ())
    }

    /// Import `id`'s entry, if an operation may start on it now
    /// ([`Self::check`]): the one lookup an operation's posting makes, for
    /// its check, its in-flight count and every segment's key.
    pub(super) fn usable(&self, id: u64) -> Result<Usable<'_>, Errno> {
        match self.tree.get(&id) {
            Some(e) if e.uses.is_revoked() => Err(EKEYREVOKED),
            Some(e) if e.orphan => Err(ENOENT),
            Some(e) if e.stale => Err(EAGAIN),
            Some(e) => Ok(Usable(e)),
            None => Err(ENOENT),
        }
    }

    /// The connection failed and reconnects: every import waits for its
    /// restore.
    pub(super) fn stale_all(&mut self) {
        for e in self.tree.values_mut() {
            e.stale = true;
            e.uses.sent.connection_ended();
        }
    }

    /// Every import of the table, those given up with operations in
    /// flight too.
    pub(super) fn views(&self) -> impl Iterator<Item = ImportView> + '_ {
        self.tree.values().map(|e| ImportView {
            orphan: e.orphan,
            writable: e.shape.is_some_and(|s| s.writable),
            revoked: e.uses.is_revoked(),
            stale: e.stale,
            block_size: e.shape.map_or(0, |s| s.block_size),
            nblocks: e.shape.map_or(0, |s| s.nblocks),
            in_flight: e.uses.in_flight(),
        })
    }

    /// The first stale import after entry `after` to restore, with its
    /// token.
    pub(super) fn next_stale(&self, after: u64) -> Option<(u64, u64)> {
        self.tree
            .iter()
            .find(|(&id, e)| id > after && e.stale && !e.uses.is_revoked() && !e.orphan)
            .map(|(&id, e)| (id, e.token))
    }

    /// Restores import `id` with a grant fetched on the new queue pair:
    /// `EKEYREVOKED` if it is not the same export as before.
    pub(super) fn restore(&mut self, id: u64, f: Fetched) -> Result<(), Errno> {
        let e = self.tree.get_mut(&id).ok_or(ENOENT)?;
        if e.shape != Some(Shape::of(&f.head)) || f.rkeys.len() != e.rkeys.len() {
            return Err(EKEYREVOKED);
        }
        e.rkeys = f.rkeys;
        e.stale = false;
        Ok(())
    }

    /// Import `id` cannot be restored: it fails with `EKEYREVOKED`.
    pub(super) fn revoke_entry(&mut self, id: u64) {
        if let Some(e) = self.tree.get(&id) {
            e.uses.revoke();
        }
    }
}

/// A remote region imported over a connection (a handle's object).
pub(crate) struct Import {
    pub(crate) conn: Arc<Conn>,
    /// Its entry in the connection's table.
    entry: u64,
    /// What its entry shares without the connection's lock.
    uses: Arc<Uses>,
    pub(crate) geometry: Geometry,
    pub(crate) writable: bool,
    /// The exporter's registration chunk size (log2).
    pub(super) chunk_shift: u32,
    /// The largest block count of one operation on this import.
    pub(crate) max_op_blocks: u32,
}

impl Import {
    /// Waits for a queue pair that takes an operation of `len` bytes on
    /// this import, if its connection's own does not
    /// ([`Conn::wait_lane`]); `EAGAIN` instead of a wait unless `block`.
    pub(crate) fn wait_lane(&self, len: u64, block: bool) -> Result<(), Errno> {
        match self.conn.own_takes(len, self.chunk_shift) {
            true => Ok(()),
            false => self.conn.wait_lane(self, len, block),
        }
    }

    /// The remote view `abi::ops::check_op` needs (no lock: posting
    /// checks the import again under the connection's).
    pub(crate) fn view(&self) -> ops::RemoteView {
        ops::RemoteView {
            geometry: self.geometry,
            writable: self.writable,
            revoked: self.uses.is_revoked(),
            max_blocks: self.max_op_blocks,
        }
    }

    /// Its entry in the connection's table.
    pub(super) fn entry(&self) -> u64 {
        self.entry
    }

    /// The export token it was imported with.
    pub(crate) fn token(&self) -> Option<u64> {
        self.conn
            .inner
            .lock()
            .imports
            .tree
            .get(&self.entry)
            .map(|e| e.token)
    }
}

impl Drop for Import {
    fn drop(&mut self) {
        self.conn.forget_import(self.entry);
    }
}

impl Conn {
    /// Imports the peer's export `token`.
    pub(crate) fn import(self: &Arc<Self>, token: u64, timeout_ms: u32) -> Result<Import, Errno> {
        // The entry exists before the first request goes out.
        let node = RBTreeNodeReservation::new(GFP_KERNEL).map_err(|_| ENOMEM)?;
        let uses = Uses::new().map_err(|_| ENOMEM)?;
        let shared = uses.clone();
        let entry = {
            let mut g = self.inner.lock();
            let id = g.imports.next;
            g.imports.next += 1;
            g.imports.tree.insert(node.into_node(
                id,
                Entry {
                    token,
                    stale: false,
                    uses,
                    orphan: false,
                    shape: None,
                    rkeys: KVVec::new(),
                },
            ));
            id
        };
        let r = self.import_rounds(token, entry, shared, timeout_ms);
        if r.is_err() {
            self.forget_import(entry);
        }
        r
    }

    fn import_rounds(
        self: &Arc<Self>,
        token: u64,
        entry: u64,
        uses: Arc<Uses>,
        timeout_ms: u32,
    ) -> Result<Import, Errno> {
        let Fetched { head: h, rkeys } = self.fetch_grant(token, timeout_ms)?;
        let (local_shift, depth, iwarp) = {
            let mut g = self.inner.lock();
            // Revoked while importing: as for an import after the revoke.
            match g.imports.check(entry) {
                Err(e) if e == EKEYREVOKED => return Err(ENOENT),
                r => r?,
            }
            let res = g.res.as_ref().ok_or(ENOTCONN)?;
            // A small own queue pair with no lane granted carries all.
            let depth = match res.own_small && g.lanes == 0 {
                true => res.own_budget,
                false => res.import_budget,
            };
            let sized = (res.chunk_shift, depth, res.iwarp);
            let e = g.imports.tree.get_mut(&entry).ok_or(ENOENT)?;
            e.shape = Some(Shape::of(&h));
            e.rkeys = rkeys;
            sized
        };
        let remote_shift = u32::from(h.chunk_shift);
        Ok(Import {
            conn: self.clone(),
            entry,
            uses,
            geometry: Geometry::new(h.block_size, h.nblocks, u64::MAX).map_err(|_| EPROTO)?,
            writable: h.writable,
            chunk_shift: remote_shift,
            max_op_blocks: ops::max_op_blocks(
                h.block_size,
                local_shift,
                remote_shift,
                u64::from(depth),
                iwarp,
            ),
        })
    }

    /// Asks the peer for export `token`'s grant, in as many rounds as its
    /// keys take, within `timeout_ms`.
    pub(super) fn fetch_grant(
        self: &Arc<Self>,
        token: u64,
        timeout_ms: u32,
    ) -> Result<Fetched, Errno> {
        let mut left = deadline(timeout_ms);
        let mut rkeys: KVVec<u32> = KVVec::new();
        let mut first: u32 = 0;
        let mut head: Option<Grant> = None;
        loop {
            let g = self.request(token, first, &mut left)?;
            crate::ffi::trace::import_answer(self.serial, token, g.first_chunk, g.nkeys);
            let chunks = g.chunks();
            match &head {
                None => {
                    Geometry::new(g.block_size, g.nblocks, u64::MAX).map_err(|_| EPROTO)?;
                    if chunks > IMPORT_CHUNKS_MAX {
                        return Err(E2BIG);
                    }
                    rkeys =
                        KVVec::with_capacity(chunks as usize, GFP_KERNEL).map_err(|_| ENOMEM)?;
                }
                Some(h) => {
                    if Shape::of(h) != Shape::of(&g) {
                        return Err(EPROTO);
                    }
                }
            }
            if g.first_chunk != first
                || g.nkeys == 0
                || u64::from(first) + u64::from(g.nkeys) > chunks
            {
                return Err(EPROTO);
            }
            for k in g.keys() {
                // Within the capacity reserved above.
                rkeys.push(*k, GFP_KERNEL).map_err(|_| ENOMEM)?;
            }
            first += u32::from(g.nkeys);
            if head.is_none() {
                head = Some(g);
            }
            if u64::from(first) >= chunks {
                break;
            }
        }
        let head = head.ok_or(EINVAL)?;
        Ok(Fetched { head, rkeys })
    }

    /// Import `entry` is gone (unimported, or its import failed).
    fn forget_import(self: &Arc<Self>, entry: u64) {
        let mut g = self.inner.lock();
        match g.imports.tree.get_mut(&entry) {
            // The operation that ends the last asks the follow-up work to
            // remove it.
            Some(e) if e.uses.waited_count() > 0 => e.orphan = true,
            Some(_) => {
                g.imports.tree.remove(&entry);
            }
            None => {}
        }
        let unsent = ctrl::send_due_acks(&mut g, &self.shared.ctrl);
        drop(g);
        if let Some(e) = unsent {
            self.fail(
                Event::QpFatal,
                "no memory for a revoke's acknowledgement",
                e,
            );
        }
    }
}
