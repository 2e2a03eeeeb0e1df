// SPDX-License-Identifier: GPL-2.0

//! The per-file object table: handles to regions, listeners, connections
//! and imported remote regions.
//!
//! Handles are small integers with a generation (`abi::handle`); a destroyed
//! object's handle stays invalid when its slot is reused. A handle of the
//! wrong kind is `EINVAL`; one that names nothing is `ENOENT`. Every object
//! dies with its file.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::{
    errno::{Errno, EINVAL, ENOENT, ENOSPC},
    handle,
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

struct Slot {
    generation: u8,
    object: Option<Object>,
}

/// Counts shown in fdinfo, so tests can see leaks.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) regions: u64,
    pub(crate) region_bytes: u64,
    pub(crate) listeners: u64,
    pub(crate) conns: u64,
    pub(crate) imports: u64,
}

/// The objects of one open file.
pub(crate) struct Objects {
    slots: KVec<Slot>,
    next_mmap_offset: u64,
}

macro_rules! getter {
    ($get:ident, $remove:ident, $variant:ident, $ty:ty) => {
        /// The object `h` names, if of this kind.
        pub(crate) fn $get(&self, h: u32) -> Result<Arc<$ty>, Errno> {
            match &self.slots[self.index(h)?].object {
                Some(Object::$variant(o)) => Ok(o.clone()),
                _ => Err(EINVAL),
            }
        }

        /// Removes the object `h` names, if of this kind, and returns it
        /// (the caller drops it outside the lock).
        pub(crate) fn $remove(&mut self, h: u32) -> Result<Arc<$ty>, Errno> {
            let o = self.$get(h)?;
            self.take(h)?;
            Ok(o)
        }
    };
}

impl Objects {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self {
            slots: KVec::new(),
            next_mmap_offset: 0,
        }
    }

    /// Reserves `len` bytes of mmap offset space for a new region.
    pub(crate) fn alloc_mmap_offset(&mut self, len: u64) -> Result<u64, Errno> {
        let off = self.next_mmap_offset;
        self.next_mmap_offset = off.checked_add(len).ok_or(ENOSPC)?;
        Ok(off)
    }

    /// Stores `object`, returning its handle.
    pub(crate) fn insert(&mut self, object: Object) -> Result<u32> {
        let index = match self.slots.iter().position(|s| s.object.is_none()) {
            Some(i) => i,
            None => {
                if self.slots.len() >= handle::MAX_SLOTS as usize {
                    return Err(crate::abi::error(ENOSPC));
                }
                self.slots.push(
                    Slot {
                        generation: 0,
                        object: None,
                    },
                    GFP_KERNEL,
                )?;
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.object = Some(object);
        Ok(handle::encode(index as u32, slot.generation))
    }

    /// The index of the live slot `h` names: `ENOENT` if it names nothing
    /// (0, stale, destroyed).
    fn index(&self, h: u32) -> Result<usize, Errno> {
        let (index, generation) = handle::decode(h).ok_or(ENOENT)?;
        match self.slots.get(index as usize) {
            Some(s) if s.generation == generation && s.object.is_some() => Ok(index as usize),
            _ => Err(ENOENT),
        }
    }

    fn take(&mut self, h: u32) -> Result<Object, Errno> {
        let index = self.index(h)?;
        let slot = &mut self.slots[index];
        slot.generation = slot.generation.wrapping_add(1);
        slot.object.take().ok_or(ENOENT)
    }

    getter!(region, remove_region, Region, Region);
    getter!(listener, remove_listener, Listener, Listener);
    getter!(conn, remove_conn, Conn, Conn);
    getter!(import, remove_import, Import, Import);

    /// The region mapped at byte offset `offset`, if any.
    pub(crate) fn region_at(&self, offset: u64) -> Option<Arc<Region>> {
        self.slots.iter().find_map(|s| match &s.object {
            Some(Object::Region(r)) if r.mmap_offset() == offset => Some(r.clone()),
            _ => None,
        })
    }

    /// Removes every object, handing each to `f` (file release).
    pub(crate) fn drain(&mut self, mut f: impl FnMut(Object)) {
        for s in self.slots.iter_mut() {
            if let Some(o) = s.object.take() {
                s.generation = s.generation.wrapping_add(1);
                f(o);
            }
        }
    }

    /// Current counts, derived from the table (read by fdinfo only).
    pub(crate) fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for o in self.slots.iter().filter_map(|s| s.object.as_ref()) {
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
