// SPDX-License-Identifier: GPL-2.0

//! rrdma-blk: an import as a block device `/dev/rrdmabN`
//! (`RRDMA_IOCTL_BLK_MAP`).
//!
//! The block layer side is the shim's (`shim/blk.c`); here a disk's
//! requests become operations on its import. A request's bytes move
//! straight between its own pages and the peer (zero copy,
//! `OpWork::Request`): its pages are mapped for the queue pair's device
//! and named with the local DMA key, or, as an iWARP READ's sink (which
//! must allow remote write), registered for that READ. A request the
//! queue pair cannot take so (a sink cannot map pages with a gap between
//! them; more work requests than an operation may take) goes through the
//! slot of its tag in the disk's staging region (one copy on this host).
//! Its operation is posted as any other, on the import's
//! connection's first queue pair, or on RoCE a zero-copy one on the lane
//! its tag picks (`OnPath::Disk`): a write completes once sent (the
//! disk's volatile write cache; on RoCE once placed), a FUA write once
//! placed, a flush is a fence (on RoCE it completes at once).
//! The exporter does no work per I/O.
//!
//! A disk is no file's: it has a connection and an import of its own
//! (`own.rs`), which reconnects, and holds the module until BLK_UNMAP
//! removes it (`disks.rs`, the module's table of disks, by index).

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::blkdev::{DiskPlan, IoKind};
use crate::abi::conn::Link;
use crate::abi::errno::{Errno, EAGAIN, EINVAL, EIO, ENOMEM, EROFS, EXDEV};
use crate::abi::{ops, Result};
use crate::conn::{Import, OnPath, OpWork, Posted, ReportTo, Waiter};
use crate::ffi::{self, warn_user, BlkIo, BlkRequest, BlkStatus};
use crate::region::Region;

mod disks;
mod own;

pub(crate) use disks::Disks;
pub(crate) use own::{own_import, OwnImport};

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
    /// Flushes posted as fences (sysfs `fences`: only grows).
    fences: AtomicU64,
    /// Reads and writes posted from or to their own pages, and through
    /// their staging slot (sysfs `zero_copy`, `staged`: only grow).
    zero_copy: AtomicU64,
    staged: AtomicU64,
    /// When a request first found the connection down, in jiffies (0: it
    /// is up): the start of the loss timeout.
    down_since: AtomicU64,
    /// The connection's reconnect count then: a later outage (the
    /// connection came back while the disk was idle) starts a new clock.
    down_epoch: AtomicU64,
}

/// How the queue call went.
pub(crate) enum Queued {
    /// Posted: its completion ends it.
    Posted,
    /// Not posted: to queue again with its bytes in its staging slot.
    Stage,
}

// SAFETY: `_pages` holds pointers to pages `staging` owns, only read (by
// the shim's copies) while the disk exists.
unsafe impl Send for DiskIo {}
// SAFETY: as for `Send`; the rest is `Sync`.
unsafe impl Sync for DiskIo {}

impl DiskIo {
    /// A disk's I/O state: `staging` and its `pages` hold the bytes of
    /// its requests that are staged.
    fn new(
        index: u32,
        import: Arc<Import>,
        plan: DiskPlan,
        staging: Arc<Region>,
        pages: KVVec<*mut c_void>,
    ) -> Self {
        Self {
            index,
            import,
            plan,
            staging,
            _pages: pages,
            fences: AtomicU64::new(0),
            zero_copy: AtomicU64::new(0),
            staged: AtomicU64::new(0),
            down_since: AtomicU64::new(0),
            down_epoch: AtomicU64::new(0),
        }
    }

    /// Posts one request (the shim's queue call): `EAGAIN` when the
    /// connection has no room now, or is down and the loss timeout has not
    /// passed ([`Self::wait_or_fail`]) and the disk is not being removed
    /// (`io.dying`, then `EIO`), another errno when it cannot be done;
    /// [`Queued::Stage`] for a request offered with zero copy that
    /// its queue pair cannot take so.
    ///
    /// An operation goes on the connection's first queue pair, or on RoCE
    /// a zero-copy one on a lane ([`OnPath::Disk`]).
    pub(crate) fn queue(&self, rq: BlkRequest, io: &BlkIo) -> Result<Queued> {
        let kind = match io.op {
            ffi::BLK_READ => IoKind::Read,
            ffi::BLK_WRITE => IoKind::Write,
            ffi::BLK_WRITE_FUA => IoKind::WriteFua,
            ffi::BLK_FLUSH => IoKind::Flush,
            _ => return Err(EINVAL),
        };
        let zero_copy = io.zero_copy != 0;
        let posted = self.post(kind, rq, io, zero_copy);
        match posted {
            Ok(Posted::Yes) => {
                let count = match kind {
                    IoKind::Flush => &self.fences,
                    _ if zero_copy => &self.zero_copy,
                    _ => &self.staged,
                };
                count.fetch_add(1, Ordering::Relaxed);
                if self.down_since.load(Ordering::Relaxed) != 0 {
                    self.down_since.store(0, Ordering::Relaxed);
                }
                Ok(Queued::Posted)
            }
            Err(e) if e == EXDEV && zero_copy => Ok(Queued::Stage),
            Ok(Posted::Full) => Err(EAGAIN),
            // The connection reconnects (or its import waits to be
            // restored): the disk waits for it, unless it is being
            // removed.
            Err(e) if e == EAGAIN && io.dying != 0 => {
                warn_user!(
                    "rrdmab{}: being unmapped and its connection is down: I/O fails\n",
                    self.index
                );
                Err(EIO)
            }
            Err(e) if e == EAGAIN => Err(self.wait_or_fail()),
            // No memory for a registration now: the block layer retries.
            Err(e) if e == ENOMEM => Err(e),
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

    /// A request found the connection down: `EAGAIN` (the block layer
    /// runs it again shortly) until the disk's requests have found it down
    /// for the module parameter `blk_loss_timeout_ms` (counted from the
    /// first that did, since it was last up), then `EIO`, until it is back.
    fn wait_or_fail(&self) -> Errno {
        let now = ffi::jiffies().max(1);
        let epoch = self.import.conn.reconnects();
        let mut since = self.down_since.load(Ordering::Relaxed);
        if since == 0 || self.down_epoch.load(Ordering::Relaxed) != epoch {
            // A new outage (racing requests may both start it: the same
            // clock, give or take a tick).
            self.down_epoch.store(epoch, Ordering::Relaxed);
            self.down_since.store(now, Ordering::Relaxed);
            since = now;
        }
        let waited = ffi::jiffies_to_msecs(now.wrapping_sub(since));
        let limit = ffi::blk_loss_timeout_ms();
        if waited < limit {
            return EAGAIN;
        }
        warn_user!(
            "rrdmab{}: connection down for {} ms (blk_loss_timeout_ms {}): I/O fails\n",
            self.index,
            waited,
            limit
        );
        EIO
    }

    /// Checks and posts request `rq` of kind `kind`, from or to its own
    /// pages if `zero_copy`, else through its staging slot.
    fn post(&self, kind: IoKind, rq: BlkRequest, io: &BlkIo, zero_copy: bool) -> Result<Posted> {
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
            Some(c) if zero_copy => OpWork::Request(&self.staging, c),
            Some(c) => OpWork::Blocks(&self.staging, c),
            None => OpWork::Fence,
        };
        let mut to = ReportTo {
            user_data: 0,
            opcode: op.opcode,
            waiter: Some(Waiter::Blk(rq)),
        };
        let conn = &self.import.conn;
        Ok(conn
            .post_op_on(&self.import, work, &mut to, OnPath::Disk(io.tag))?
            .0)
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

/// The shim's queue call for one request of a disk: 0 once posted,
/// `RRDMA_SHIM_BLK_STAGE` to queue it again staged (not posted),
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
    // when `queue` returns `Ok(Queued::Posted)`, which returns 0.
    let rq = unsafe { BlkRequest::new(rq) };
    match disk.queue(rq, io) {
        Ok(Queued::Posted) => 0,
        Ok(Queued::Stage) => ffi::BLK_STAGE,
        Err(e) => e.to_errno(),
    }
}

/// The shim's sysfs write of a disk's `reset`: its connection ends as a
/// peer's disconnect would end it, and reconnects.
///
/// # Safety
///
/// `owner` is the [`DiskIo`] of a disk that still exists.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_blk_reset(owner: *mut c_void) {
    // SAFETY: by the function's safety requirements.
    let disk = unsafe { &*owner.cast::<DiskIo>() };
    disk.import.conn.reset();
}

/// The shim's sysfs read of a disk's status.
///
/// # Safety
///
/// `owner` is the [`DiskIo`] of a disk that still exists; `out` is valid
/// for writes.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_blk_status(owner: *mut c_void, out: *mut BlkStatus) {
    // SAFETY: by the function's safety requirements.
    let (disk, out) = unsafe { (&*owner.cast::<DiskIo>(), &mut *out) };
    let conn = &disk.import.conn;
    out.peer = conn.peer();
    out.fences = disk.fences.load(Ordering::Relaxed);
    out.zero_copy = disk.zero_copy.load(Ordering::Relaxed);
    out.staged = disk.staged.load(Ordering::Relaxed);
    // The disk's connection is its file's only one (`own.rs`).
    out.on_lanes = conn.lane_ops();
    out.state = match conn.link() {
        Link::Up => ffi::BLK_UP,
        Link::Reconnecting => ffi::BLK_RECONNECTING,
        Link::Down => ffi::BLK_DOWN,
    };
    out.reconnects = disk.import.conn.reconnects();
}
