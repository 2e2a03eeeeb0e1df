// SPDX-License-Identifier: GPL-2.0

//! The per-file object table: handles to regions, listeners, connections
//! and imported remote regions.
//!
//! Handles come from a per-file counter and are never reused while a
//! program could still hold a stale one (`abi::handle`). A handle of the
//! wrong kind is `EINVAL`; one that names nothing is `ENOENT`. Every object
//! dies with its file.
//!
//! Locking: `FileState::objects` is never held across a user copy (a fault
//! takes the mmap lock, and mmap(2) takes it under the mmap lock), a page
//! allocation or a teardown; `Shared::exports` nests inside it.

use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Arc;

use crate::abi::Result;
use crate::abi::{
    errno::{Errno, EINVAL, ENOENT, ENOMEM, ENOSPC},
    handle::{HandleCounter, MAX_OBJECTS},
};
use crate::conn::{Conn, Import};
use crate::listener::Listener;
use crate::region::Region;

/// An object a handle can name.
#[derive(Clone)]
pub(crate) enum Object {
    /// A region.
    Region(Arc<Region>),
    /// A listener.
    Listener(Arc<Listener>),
    /// A connection.
    Conn(Arc<Conn>),
    /// An imported remote region.
    Import(Arc<Import>),
}

/// Counts shown in fdinfo, so tests can see leaks.
impl Object {
    /// Ends the object as closing its handle does: a listener stops, a
    /// connection is torn down; regions and imports go with their last
    /// reference. Not under `FileState::objects` (both wait for handlers).
    pub(crate) fn close(self) {
        match self {
            Object::Listener(l) => Listener::close(&l),
            Object::Conn(c) => Conn::destroy(&c, crate::abi::conn::Event::UserClose),
            Object::Region(_) | Object::Import(_) => {}
        }
    }
}

#[derive(Default)]
pub(crate) struct ObjectCounts {
    pub(crate) regions: u64,
    pub(crate) region_bytes: u64,
    pub(crate) listeners: u64,
    pub(crate) conns: u64,
    pub(crate) imports: u64,
}

/// Room for one more object, allocated before the table's lock is taken.
pub(crate) struct Slot(RBTreeNodeReservation<u32, Object>);

impl Slot {
    /// Allocates room for one object.
    pub(crate) fn new() -> Result<Self, Errno> {
        RBTreeNodeReservation::new(GFP_KERNEL)
            .map(Self)
            .map_err(|_| ENOMEM)
    }
}

/// The objects of one open file.
pub(crate) struct Objects {
    tree: RBTree<u32, Object>,
    len: usize,
    handles: HandleCounter,
    next_mmap_offset: u64,
}

macro_rules! getter {
    ($get:ident, $remove:ident, $variant:ident, $ty:ty) => {
        /// The object `h` names, if of this kind.
        pub(crate) fn $get(&self, h: u32) -> Result<Arc<$ty>, Errno> {
            match self.tree.get(&h) {
                Some(Object::$variant(o)) => Ok(o.clone()),
                Some(_) => Err(EINVAL),
                None => Err(ENOENT),
            }
        }

        /// Removes the object `h` names, if of this kind, and returns it
        /// (the caller drops it outside the lock).
        pub(crate) fn $remove(&mut self, h: u32) -> Result<Arc<$ty>, Errno> {
            let o = self.$get(h)?;
            self.tree.remove(&h);
            self.len -= 1;
            Ok(o)
        }
    };
}

impl Objects {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self {
            tree: RBTree::new(),
            len: 0,
            handles: HandleCounter::new(),
            next_mmap_offset: 0,
        }
    }

    /// Reserves `len` bytes of mmap offset space for a new region (never
    /// reused within the file).
    pub(crate) fn alloc_mmap_offset(&mut self, len: u64) -> Result<u64, Errno> {
        let off = self.next_mmap_offset;
        self.next_mmap_offset = off.checked_add(len).ok_or(ENOSPC)?;
        Ok(off)
    }

    /// Stores `object` in `slot`, returning its handle.
    pub(crate) fn insert(&mut self, slot: Slot, object: Object) -> Result<u32, Errno> {
        if self.len >= MAX_OBJECTS {
            return Err(ENOSPC);
        }
        let tree = &self.tree;
        let h = self
            .handles
            .allocate(|h| tree.get(&h).is_some())
            .ok_or(ENOSPC)?;
        self.tree.insert(slot.0.into_node(h, object));
        self.len += 1;
        Ok(h)
    }

    /// Removes the object named `h`, whatever its kind.
    pub(crate) fn remove(&mut self, h: u32) -> Option<Object> {
        let o = self.tree.remove(&h)?;
        self.len -= 1;
        Some(o)
    }

    getter!(region, remove_region, Region, Region);
    getter!(listener, remove_listener, Listener, Listener);
    getter!(conn, remove_conn, Conn, Conn);
    getter!(import, remove_import, Import, Import);

    /// The region mapped at byte offset `offset`, if any.
    pub(crate) fn region_at(&self, offset: u64) -> Option<Arc<Region>> {
        self.tree.values().find_map(|o| match o {
            Object::Region(r) if r.mmap_offset() == Some(offset) => Some(r.clone()),
            _ => None,
        })
    }

    /// Takes every object out (file release), in handle order.
    pub(crate) fn take_all(&mut self) -> RBTree<u32, Object> {
        self.len = 0;
        core::mem::take(&mut self.tree)
    }

    /// Current counts, derived from the table (read by fdinfo only).
    pub(crate) fn counts(&self) -> ObjectCounts {
        let mut c = ObjectCounts::default();
        for o in self.tree.values() {
            match o {
                Object::Region(r) => {
                    c.regions += 1;
                    c.region_bytes += r.geometry().bytes();
                }
                Object::Listener(_) => c.listeners += 1,
                Object::Conn(_) => c.conns += 1,
                Object::Import(_) => c.imports += 1,
            }
        }
        c
    }
}
