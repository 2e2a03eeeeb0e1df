// SPDX-License-Identifier: GPL-2.0

//! The module's table of rrdma-blk disks ([`Disks`], in the module's
//! `Context`): BLK_MAP adds a disk at a free index, BLK_UNMAP removes one.
//! A disk is no file's: it has its own connection (`own.rs`) and holds
//! the module until unmapped.

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

use super::own::ConnEnd;
use super::{DiskIo, OwnImport};
use crate::abi::blkdev::{DiskPlan, QUEUE_DEPTH};
use crate::abi::errno::{EBUSY, ENOENT, ENOSPC};
use crate::abi::Result;
use crate::ffi::{self, warn_user, BlkShape, ModuleRef};
use crate::region::Region;

/// The most disks mapped at once.
const DISKS_MAX: usize = 256;

/// A disk added to the block layer. Field order is drop order: the disk
/// goes first (waiting for its requests), then what they used.
struct Mapped {
    disk: ffi::Disk,
    /// What the disk's requests use, through its owner pointer.
    io: Arc<DiskIo>,
    /// Its own connection, which ends with it.
    conn: ConnEnd,
    /// Held while the disk exists: `rmmod` is refused.
    module: ModuleRef,
    /// Which mapping it is: an index is reused, this never.
    generation: u64,
}

/// The next mapping's [`Mapped::generation`].
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// A slot of the table.
enum Slot {
    Free,
    /// Being added or removed, outside the table's lock: its index (the
    /// disk's name) is not free yet.
    Busy,
    Mapped(Mapped),
}

/// What `RRDMA_IOCTL_STATUS` shows of a disk.
pub(crate) struct DiskView {
    pub(crate) index: u32,
    pub(crate) plan: DiskPlan,
    pub(crate) conn: Arc<crate::conn::Conn>,
}

/// The module's disks, by index. Never held across adding or removing a
/// disk; an unmap's check takes a disk's `open_mutex` under it
/// ([`ffi::Disk::close`]), and nothing takes it under that one.
pub(crate) struct Disks {
    slots: KVec<Slot>,
}

impl Disks {
    /// No disks.
    pub(crate) fn new() -> Self {
        Self { slots: KVec::new() }
    }

    /// The mapped disks, each with its connection.
    pub(crate) fn views(&self) -> Result<KVec<DiskView>> {
        let mut out = KVec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            if let Slot::Mapped(m) = slot {
                out.push(
                    DiskView {
                        index: i as u32,
                        plan: m.io.plan,
                        conn: m.conn.conn().clone(),
                    },
                    GFP_KERNEL,
                )?;
            }
        }
        Ok(out)
    }

    /// Reserves a free index: `ENOSPC` past [`DISKS_MAX`].
    fn reserve(&mut self) -> Result<u32> {
        if let Some(i) = self.slots.iter().position(|s| matches!(s, Slot::Free)) {
            self.slots[i] = Slot::Busy;
            return Ok(i as u32);
        }
        if self.slots.len() >= DISKS_MAX {
            return Err(ENOSPC);
        }
        self.slots.push(Slot::Busy, GFP_KERNEL)?;
        Ok((self.slots.len() - 1) as u32)
    }

    /// Takes disk `index` out if `take` says so (its slot stays busy);
    /// `ENOENT` if there is none, `EBUSY` if it is being added or
    /// removed, `take`'s errno if it refuses.
    fn take(&mut self, index: u32, take: impl FnOnce(&Mapped) -> Result) -> Result<Mapped> {
        let slot = self.slots.get_mut(index as usize).ok_or(ENOENT)?;
        match slot {
            Slot::Mapped(m) => take(m)?,
            Slot::Busy => return Err(EBUSY),
            Slot::Free => return Err(ENOENT),
        }
        match core::mem::replace(slot, Slot::Busy) {
            Slot::Mapped(m) => Ok(m),
            _ => Err(ENOENT),
        }
    }
}

impl crate::context::Context {
    /// Adds a disk of shape `plan` over `own`, the disk's own import,
    /// whose connection ends if the disk cannot be added; returns its
    /// index and its generation (see [`Context::blk_undo`]).
    pub(crate) fn blk_map(&self, own: OwnImport, plan: DiskPlan) -> Result<(u32, u64)> {
        let reserved = self.disks.lock().reserve();
        let mapped = reserved.and_then(|index| {
            let m = map_disk(index, own, plan);
            if m.is_err() {
                self.disks.lock().slots[index as usize] = Slot::Free;
            }
            m.map(|m| (index, m))
        });
        match mapped {
            Ok((index, m)) => {
                let generation = m.generation;
                self.disks.lock().slots[index as usize] = Slot::Mapped(m);
                Ok((index, generation))
            }
            Err(e) => {
                if e == ENOSPC {
                    warn_user!("BLK_MAP: {} disks already mapped\n", DISKS_MAX);
                }
                Err(e)
            }
        }
    }

    /// Removes disk `index`: `EBUSY` if it is open and not `force`d.
    /// Returns once its requests have ended.
    pub(crate) fn blk_unmap(&self, index: u32, force: bool) -> Result {
        let m = self.disks.lock().take(index, |m| m.disk.close(force))?;
        self.blk_remove(index, m);
        Ok(())
    }

    /// Removes disk `index` of generation `generation` if it is still
    /// there (a BLK_MAP whose answer could not be written; another file
    /// may have unmapped it, and mapped another at the index since).
    pub(crate) fn blk_undo(&self, index: u32, generation: u64) {
        let m = self.disks.lock().take(index, |m| {
            if m.generation == generation {
                Ok(())
            } else {
                Err(ENOENT)
            }
        });
        if let Ok(m) = m {
            self.blk_remove(index, m);
        }
    }

    /// Drops disk `m` (no lock held: it waits for its requests), frees
    /// its index, ends its connection, then lets the module go.
    fn blk_remove(&self, index: u32, m: Mapped) {
        let Mapped {
            disk,
            io,
            conn,
            module,
            ..
        } = m;
        drop(disk);
        drop(io);
        self.disks.lock().slots[index as usize] = Slot::Free;
        drop(conn);
        drop(module);
    }
}

/// Builds disk `index` over `own`: its staging region, then the shim's
/// disk. On failure `own`'s connection ends.
fn map_disk(index: u32, own: OwnImport, plan: DiskPlan) -> Result<Mapped> {
    let OwnImport { import, end } = own;
    let staging = Region::new(plan.staging, 0, None)?;
    let mut pages = staging.page_ptrs(0, staging.npages())?;
    // The vector's buffer does not move with it.
    let pages_ptr = pages.as_mut_ptr();
    let io = Arc::new(DiskIo::new(index, import, plan, staging, pages), GFP_KERNEL)?;
    let shape = BlkShape {
        sectors: plan.sectors,
        block_size: plan.block_size,
        io_bytes: plan.io_bytes,
        depth: QUEUE_DEPTH,
        read_only: u32::from(plan.read_only),
    };
    // SAFETY: `io` outlives the disk (`Mapped`'s drop order) and is what
    // `rrdma_rust_blk_queue` gets; `pages` lists `io.staging`'s pages
    // (`QUEUE_DEPTH` slots of `io_bytes`, `DiskPlan::new`), kept with it.
    let disk = unsafe {
        ffi::Disk::add(
            core::ptr::from_ref::<DiskIo>(&io).cast(),
            index,
            &shape,
            pages_ptr,
        )
    }
    .inspect_err(|e| warn_user!("BLK_MAP: cannot add rrdmab{}: errno {}\n", index, e.get()))?;
    Ok(Mapped {
        disk,
        io,
        conn: end,
        module: ModuleRef::take(),
        generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
    })
}
