// SPDX-License-Identifier: GPL-2.0

//! The per-file object table: handles to regions (and, later, connections,
//! exports and imports).
//!
//! Handles are small integers with a generation (`abi::handle`); a destroyed
//! object's handle stays invalid when its slot is reused. Every object dies
//! with its file.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::{
    errno::{Errno, ENOENT, ENOSPC},
    handle,
};
use crate::region::Region;

/// An object a handle can name.
pub(crate) enum Object {
    /// A region.
    Region(Arc<Region>),
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
}

/// The objects of one open file.
pub(crate) struct Objects {
    slots: KVec<Slot>,
    next_mmap_offset: u64,
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

    /// Removes the region named by `h` and returns it (the caller drops it
    /// outside the lock).
    pub(crate) fn remove_region(&mut self, h: u32) -> Result<Arc<Region>, Errno> {
        let index = self.index(h)?;
        let slot = &mut self.slots[index];
        // `index()` found the slot live; once other kinds exist, check the
        // kind (EINVAL) before taking the object out.
        let Some(Object::Region(r)) = slot.object.take() else {
            return Err(ENOENT);
        };
        slot.generation = slot.generation.wrapping_add(1);
        Ok(r)
    }

    /// The region mapped at byte offset `offset`, if any.
    pub(crate) fn region_at(&self, offset: u64) -> Option<Arc<Region>> {
        self.slots.iter().find_map(|s| match &s.object {
            Some(Object::Region(r)) if r.mmap_offset() == offset => Some(r.clone()),
            _ => None,
        })
    }

    /// Current counts, derived from the table (read by fdinfo only).
    pub(crate) fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for Object::Region(r) in self.slots.iter().filter_map(|s| s.object.as_ref()) {
            c.regions += 1;
            c.region_bytes += r.geometry().bytes();
        }
        c
    }
}
