// SPDX-License-Identifier: GPL-2.0

//! Block operations on a connection: posting, operation slots, completions.
//!
//! An operation is cut into work requests that never cross a registration
//! chunk on either side (`abi::ops::segments`), preceded by registrations
//! of the local chunks it is the first to touch. On iWARP, each READ gets
//! a sink of its own, registered with remote write access (the rule RNICs
//! enforce) for exactly its bytes and invalidated by the READ itself, and
//! a write ends with a one-byte READ fence into such a sink
//! (`abi::ops::op_wrs`), or, within one `SUBMIT` batch, one fence after
//! the batch's last write (`FenceGroup`); outside a batch, a write posted
//! while a fence is in flight joins the queue pair's open group, whose
//! one fence the next fence completion posts (`Slots::open`, group commit:
//! at depth, about one fence per round trip), and so do the writes of an
//! io_uring submission of several commands, whose plug's end posts the
//! fence when none is in flight (`Conn::plugged`, `Conn::unplugged`: one
//! fence per submission), and of a `SUBMIT` on several connections, whose
//! end posts each connection's (`RunFence::Group`). Only the last work request is
//! signaled, and it carries the operation's slot; a write of a batch is
//! not signaled at all (its fence's completion completes it, one
//! completion for the batch) but carries its slot for an error's. The
//! context of an operation lives in its slot and its work requests are
//! built in a scratch array, both of its queue pair's path (`PathData`:
//! the connection's own queue pair or a data lane, each with its own
//! slots, sinks and registrations, under a lock of its own), allocated
//! with the path. An operation goes on the submitting CPU's path
//! (`ConnInner::pick_path`) and is planned and posted under one acquisition
//! of the connection's lock and one of its path's, and so is each run of a
//! `SUBMIT`'s operations on one connection (one path), its fence's
//! reservation and post included (`Conn::post_ops`); only one that is the
//! first to touch a chunk has its registration allocated outside the
//! locks first (`Prep`), which are released around it.
//! Posting is all or nothing: everything an operation needs (its slot,
//! its work requests, its send-queue room, new registrations) is found or
//! allocated first, and a registration that enters its path's cache for
//! it leaves it again, under the same lock, unless its work request was
//! posted, so a refused operation (`EAGAIN`, `E2BIG`, `ENOMEM`) leaves
//! nothing behind. A work request names a local registration only as
//! lent ([`crate::mr::Lent`]) by the operation's lease on its cache entry
//! (`Lease`), which its slot holds until it completes: posting is safe by
//! type.
//!
//! Completions come in batches, one per poll of a queue pair's send CQ
//! (`Conn::slots_done`): the operations of a batch end under one
//! acquisition of their path's lock (a softirq-safe spinlock), not the
//! connection's, so a completion needs nothing that sleeps and no lock a
//! submitter holds long. What does need the connection's lock (a failed
//! write fence's failure, pruning a destroyed region's registrations,
//! acknowledging a revoke once its import is idle, waking a task that
//! waits for send-queue room) is left to the connection's follow-up work
//! (`Followups`). A failed operation ends the connection before it is
//! reported, outside the path's lock: failed completions come only in
//! process context. The file's readers are woken once per batch.
//!
//! Exactly once: a completion takes its slot's operation; a second
//! completion of the same slot (siw's flush path can complete a READ
//! twice) finds nothing. What the provider never completes, the teardown
//! completes, once, after the queue pair is destroyed.
//!
//! Files, one concern each:
//! - `path.rs`: paths and their data state, and the path an operation
//!   takes;
//! - `slots.rs`: operation slots, the sinks' free lists, where an
//!   operation reports;
//! - `local.rs`: the local registration cache;
//! - `plan.rs`: an operation's plan, and what it allocates;
//! - `post.rs`: posting, with the locks and the retries;
//! - `attempt.rs`: one attempt: plan, install, build, post;
//! - `fence.rs`: iWARP write fences;
//! - `barrier.rs`: fences a caller asks for (`RRDMA_OP_FENCE`);
//! - `complete.rs`: completions;
//! - `followups.rs`: what completions leave for process context;
//! - `wait.rs`: synchronous operations and waits for room.
//!
//! The concern files share this file's imports and each other's items
//! (`use super::*`).

mod attempt;
mod barrier;
mod complete;
mod fence;
mod followups;
mod local;
mod path;
mod plan;
mod post;
mod slots;
mod wait;

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, WorkItem};

use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, E2BIG, EAGAIN, ECONNRESET, EINVAL, EIO, ENOENT, ENOMEM, ENOTCONN, EXDEV},
    limits,
    ops::{self, Checked, Dir},
    uapi::Completion,
    wc, wire,
};
use crate::calling::{Caller, Task};
use crate::cm_id::CmId;
use crate::compat::{new_bh_lock, BhGuard, BhLock};
use crate::conn::imports::{Usable, Uses};
use crate::conn::{ctrl, wait_until, Conn, Import};
use crate::ffi::{self, ShimWr};
use crate::foreign;
use crate::mr::{Chunks, Mr};
use crate::region::Region;
use crate::verbs::QpRef;
use crate::work::FabricWork;

// The concern files' items, for each other.
use barrier::*;
use fence::*;
use followups::*;
use local::*;
use path::*;
use plan::*;
use slots::*;
use wait::*;

pub(crate) use fence::RunFence;
pub(in crate::conn) use followups::Followups;
pub(in crate::conn) use path::{path_locks, stop_each, Path, PathLock};
pub(crate) use post::{OnPath, OpWork, Posted};
pub(in crate::conn) use slots::Slots;
pub(crate) use slots::{ReportTo, Waiter};

/// Most operation slots of a connection (its queue pair may have fewer:
/// `abi::limits::queue_sizes`).
pub(super) const SLOTS_MAX: u32 = limits::OPS_MAX;

/// Most work requests one operation takes: its plan fits in the send
/// queue's operation entries (`Slots::op_budget`).
pub(in crate::conn) const WRS_MAX: usize = SLOTS_MAX as usize;

/// Most READ sinks of a queue pair (iWARP): each is an MR of a chunk's
/// pages (~7 KiB on siw), and a peer's ORD bounds the READs in flight
/// anyway (siw's is at most 128).
pub(in crate::conn) const SINKS_MAX: u32 = 32;

/// Most local chunks one operation can touch (each needs a work request).
pub(super) const CHUNKS_MAX: usize = SLOTS_MAX as usize;

/// The connection's lock, held across the operations of a batch; `None`
/// while released (around an allocation, or for good).
pub(super) type InnerGuard<'a> = Option<crate::noio::NoIoGuard<'a, crate::conn::ConnInner>>;

/// A path's lock, held.
pub(super) type PathGuard<'a> = BhGuard<'a, Option<KBox<PathData>>>;
