// SPDX-License-Identifier: GPL-2.0

//! rrdma-blk: an import as a block device `/dev/rrdmabN`
//! (`RRDMA_IOCTL_BLK_MAP`).
//!
//! The block layer side is the shim's (`shim/blk.c`); here a disk's
//! requests become operations on its import, through its staging region:
//! a request's bytes go through the slot of its tag (one copy on this
//! host), and its operation is posted as any other, on the import's
//! connection's first queue pair: a write completes once sent (the disk's
//! volatile write cache), a FUA write once placed, a flush is a fence.
//! The exporter does no work per I/O.
//!
//! The module's table of disks ([`Disks`]) gives each its index, and is
//! how BLK_UNMAP and a closing file find theirs.

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::blkdev::{DiskPlan, IoKind, QUEUE_DEPTH};
use crate::abi::errno::{EAGAIN, EBUSY, EINVAL, ENOENT, ENOSPC, EROFS};
use crate::abi::{ops, Result};
use crate::conn::{Import, OpWork, Posted, ReportTo, Waiter};
use crate::ffi::{self, warn_user, BlkIo, BlkRequest, BlkShape};
use crate::region::Region;

/// The most disks mapped at once.
const DISKS_MAX: usize = 256;

/// What a disk's requests need: shared by the shim's queue calls, which
/// see it through the disk's owner pointer.
pub(crate) struct DiskIo {
    index: u32,
    import: Arc<Import>,
    plan: DiskPlan,
    /// [`QUEUE_DEPTH`] slots of `plan.io_bytes`.
    staging: Arc<Region>,
    /// `staging`'s pages, which the shim's copies index (through the
    /// pointer it was given).
    _pages: KVVec<*mut c_void>,
}

// SAFETY: `_pages` holds pointers to pages `staging` owns, only read (by
// the shim's copies) while the disk exists.
unsafe impl Send for DiskIo {}
// SAFETY: as for `Send`; the rest is `Sync`.
unsafe impl Sync for DiskIo {}

impl DiskIo {
    /// Posts one request (the shim's queue call): `EAGAIN` when the
    /// connection has no room now, another errno when it cannot be done.
    ///
    /// Every operation goes on the connection's first queue pair: a read
    /// after a write that completed once sent then finds its bytes.
    pub(crate) fn queue(&self, rq: BlkRequest, io: &BlkIo) -> Result {
        let kind = match io.op {
            ffi::BLK_READ => IoKind::Read,
            ffi::BLK_WRITE => IoKind::Write,
            ffi::BLK_WRITE_FUA => IoKind::WriteFua,
            ffi::BLK_FLUSH => IoKind::Flush,
            _ => return Err(EINVAL),
        };
        let posted = self.post(kind, rq, io);
        match posted {
            Ok(Posted::Yes) => Ok(()),
            Ok(Posted::Full) => Err(EAGAIN),
            Err(e) => {
                let what = match kind {
                    IoKind::Read => "read",
                    IoKind::Write => "write",
                    IoKind::WriteFua => "FUA write",
                    IoKind::Flush => "flush",
                };
                warn_user!(
                    "rrdmab{}: {} of {} bytes at {} failed: errno {}\n",
                    self.index,
                    what,
                    io.len,
                    io.pos,
                    e.get()
                );
                Err(e)
            }
        }
    }

    /// Checks and posts request `rq` of kind `kind`.
    fn post(&self, kind: IoKind, rq: BlkRequest, io: &BlkIo) -> Result<Posted> {
        // The block layer only warns about a write to a read-only disk.
        if self.plan.read_only && matches!(kind, IoKind::Write | IoKind::WriteFua) {
            return Err(EROFS);
        }
        let op = self.plan.op(kind, io.pos, io.len, io.tag)?;
        let view = self.import.view();
        let checked = match kind {
            IoKind::Flush => {
                ops::check_fence(&op, &view)?;
                None
            }
            _ => Some(ops::check_op(&op, self.staging.geometry(), &view)?),
        };
        let work = match checked.as_ref() {
            Some(c) => OpWork::Blocks(&self.staging, c),
            None => OpWork::Fence,
        };
        let mut to = ReportTo {
            user_data: 0,
            opcode: op.opcode,
            waiter: Some(Waiter::Blk(rq)),
        };
        let conn = &self.import.conn;
        Ok(conn.post_op_on(&self.import, work, &mut to, true)?.0)
    }
}

impl Drop for DiskIo {
    /// The disk is gone and its requests have ended: its connection's
    /// cached registrations of the staging region go with it (a connection
    /// that outlives many disks keeps none of theirs).
    fn drop(&mut self) {
        self.staging.mark_destroyed();
        self.import.conn.forget_region(&self.staging);
    }
}

/// A disk added to the block layer. Field order is drop order: the disk
/// goes first (waiting for its requests), then what they used.
struct Mapped {
    disk: ffi::Disk,
    /// What the disk's requests use, through its owner pointer.
    _io: Arc<DiskIo>,
    /// The file that mapped it (identity only).
    owner: usize,
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

/// The module's disks, by index. A leaf lock, never held across adding
/// or removing a disk.
pub(crate) struct Disks {
    slots: KVec<Slot>,
}

impl Disks {
    /// No disks.
    pub(crate) fn new() -> Self {
        Self { slots: KVec::new() }
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
    /// Adds a disk over `import` of shape `plan`, for the file `owner`;
    /// returns its index and its generation (see [`Context::blk_undo`]).
    pub(crate) fn blk_map(
        &self,
        owner: usize,
        import: Arc<Import>,
        plan: DiskPlan,
    ) -> Result<(u32, u64)> {
        let index = self.disks.lock().reserve().inspect_err(|e| {
            if *e == ENOSPC {
                warn_user!("BLK_MAP: {} disks already mapped\n", DISKS_MAX);
            }
        })?;
        let mapped = map_disk(index, owner, import, plan);
        let mut disks = self.disks.lock();
        match mapped {
            Ok(m) => {
                let generation = m.generation;
                disks.slots[index as usize] = Slot::Mapped(m);
                Ok((index, generation))
            }
            Err(e) => {
                disks.slots[index as usize] = Slot::Free;
                Err(e)
            }
        }
    }

    /// Removes disk `index`: `EBUSY` if it is open and not `force`d.
    /// Returns once its requests have ended.
    pub(crate) fn blk_unmap(&self, index: u32, force: bool) -> Result {
        let m = self.disks.lock().take(index, |m| {
            if !force && m.disk.openers() > 0 {
                return Err(EBUSY);
            }
            Ok(())
        })?;
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

    /// Removes the disks file `owner` mapped (it is closing).
    pub(crate) fn blk_unmap_owned(&self, owner: usize) {
        loop {
            let found = {
                let mut disks = self.disks.lock();
                let i = disks
                    .slots
                    .iter()
                    .position(|s| matches!(s, Slot::Mapped(m) if m.owner == owner));
                i.and_then(|i| disks.take(i as u32, |_| Ok(())).ok().map(|m| (i, m)))
            };
            match found {
                Some((i, m)) => self.blk_remove(i as u32, m),
                None => break,
            }
        }
    }

    /// Drops disk `m` (no lock held: it waits for its requests), then
    /// frees its index.
    fn blk_remove(&self, index: u32, m: Mapped) {
        drop(m);
        self.disks.lock().slots[index as usize] = Slot::Free;
    }
}

/// Builds disk `index`: its staging region, then the shim's disk.
fn map_disk(index: u32, owner: usize, import: Arc<Import>, plan: DiskPlan) -> Result<Mapped> {
    let staging = Region::new(plan.staging, 0)?;
    let mut pages = staging.page_ptrs(0, staging.npages())?;
    // The vector's buffer does not move with it.
    let pages_ptr = pages.as_mut_ptr();
    let io = Arc::new(
        DiskIo {
            index,
            import,
            plan,
            staging,
            _pages: pages,
        },
        GFP_KERNEL,
    )?;
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
        _io: io,
        owner,
        generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
    })
}

/// The shim's queue call for one request of a disk: 0 once posted,
/// `-EAGAIN` when there is no room now, another negative errno to fail it.
///
/// # Safety
///
/// `owner` is the [`DiskIo`] a disk was added with (alive while the disk
/// is); `rq` is a started request of that disk, and `io` describes it.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_blk_queue(
    owner: *mut c_void,
    rq: *mut ffi::Request,
    io: *const BlkIo,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let (disk, io) = unsafe { (&*owner.cast::<DiskIo>(), &*io) };
    let Some(rq) = core::ptr::NonNull::new(rq) else {
        return EINVAL.to_errno();
    };
    // SAFETY: a started request; kept (and ended by its completion) only
    // when `queue` returns `Ok`, which returns 0.
    let rq = unsafe { BlkRequest::new(rq) };
    match disk.queue(rq, io) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
