// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The record the fault suite's workload keeps and its driver reads: a file
//! in the guest's tmpfs that both processes map shared.
//!
//! It holds, per worker thread, counts and times of successes and errors;
//! the errors by errno; and the journal: per block, the last acknowledged
//! write's generation and the generation of a write posted but not (yet)
//! acknowledged. A workload killed with operations in flight leaves it
//! intact (the page cache outlives the process), so the next one and the
//! driver's verification go on from it.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::AtomicU64;

/// Worker threads the record has room for.
pub(crate) const MAX_THREADS: usize = 16;
/// Blocks of the exporter's region the journal covers.
pub(crate) const NBLOCKS: usize = 256;
/// Errnos counted one by one (larger ones count as the last).
pub(crate) const ERRNOS: usize = 160;

/// One worker thread's counts; times are CLOCK_MONOTONIC nanoseconds.
#[repr(C)]
pub(crate) struct Thread {
    /// Operations that succeeded.
    pub ok: AtomicU64,
    /// When the last one ended.
    pub last_ok_ns: AtomicU64,
    /// Operations (and connects or imports) that failed.
    pub errors: AtomicU64,
    /// Reads whose block held neither its acknowledged write nor the one
    /// in flight.
    pub mismatches: AtomicU64,
    /// The export token the thread's blocks were written through (a new
    /// one means a new exporter, whose region starts afresh).
    pub token: AtomicU64,
}

/// One block's journal entry.
#[repr(C)]
pub(crate) struct Block {
    /// The generation of the last write that completed successfully.
    pub acked: AtomicU64,
    /// The generation of the last write posted.
    pub pending: AtomicU64,
}

/// The whole record, as mapped.
#[repr(C)]
pub(crate) struct Shared {
    /// Set by the driver: the workload ends after its current operations.
    pub stop: AtomicU64,
    /// Connections made (first ones and after a connection ended).
    pub connects: AtomicU64,
    /// Connects, imports and token requests that failed, and the last
    /// one's errno (not counted in `errnos`, which are operations').
    pub setup_failures: AtomicU64,
    pub setup_errno: AtomicU64,
    /// Failures by errno.
    pub errnos: [AtomicU64; ERRNOS],
    pub threads: [Thread; MAX_THREADS],
    pub blocks: [Block; NBLOCKS],
}

/// A mapping of the record.
pub(crate) struct State {
    map: *mut Shared,
}

// SAFETY: `Shared` is all atomics; the mapping lives as long as `State`.
unsafe impl Send for State {}
// SAFETY: as above.
unsafe impl Sync for State {}

impl State {
    /// Maps the record at `path`, creating it zeroed if `fresh`.
    pub(crate) fn open(path: &Path, fresh: bool) -> io::Result<State> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(fresh)
            .truncate(fresh)
            .open(path)?;
        let len = std::mem::size_of::<Shared>();
        f.set_len(len as u64)?;
        // SAFETY: a shared mapping of a file we opened read-write, of the
        // file's length; nothing else in this process aliases it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // INVARIANT: `map` points to `len` mapped bytes, page-aligned; a
        // zeroed (or previously written) `Shared` is valid: all atomics.
        Ok(State { map: p.cast() })
    }
}

impl std::ops::Deref for State {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        // SAFETY: by the type invariant, `map` is a valid, aligned `Shared`
        // for as long as `self` lives; only shared references are made.
        unsafe { &*self.map }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, of that length; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.map.cast(), std::mem::size_of::<Shared>()) };
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process.
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
