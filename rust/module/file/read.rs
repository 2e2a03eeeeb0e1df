// SPDX-License-Identifier: GPL-2.0

//! What a file gives besides ioctls: completion records by read(2) (which
//! may gather a few more before it returns), their readiness for poll, and
//! object counts for fdinfo (so tests see leaks).

use kernel::error::Error;
use kernel::uaccess::UserSliceWriter;

use super::FileState;
use crate::abi::errno::{EAGAIN, EINVAL};
use crate::abi::gather;
use crate::abi::uapi::Completion;
use crate::abi::Result;
use crate::compat::user_slice;
use crate::ffi;
use crate::ring::READ_BATCH;

impl FileState {
    /// read(2): copies whole completion records to `buf` (`len` bytes) and
    /// returns the bytes copied; `EAGAIN` when there are none. Records are
    /// lent out of the ring under its lock and copied to user memory
    /// without it (`abi::ring`): a copy stalled on a fault holds up nothing
    /// else, and records it could not deliver go back to the front of the
    /// ring. A read that found records while more operations are in
    /// flight may wait a little for more first ([`Self::gather`]).
    pub(crate) fn read(&self, buf: u64, len: usize) -> Result<usize> {
        let max = len / Completion::SIZE;
        if max == 0 {
            return Err(EINVAL);
        }
        let mut writer = user_slice(buf, max * Completion::SIZE).writer();
        let mut done = 0;
        let mut fault = self.drain(&mut writer, max, &mut done);
        if fault.is_none() && done > 0 && done < max {
            fault = self.gather(&mut writer, max, &mut done);
        }
        match fault {
            Some(e) if done == 0 => Err(e.into()),
            _ if done == 0 => Err(EAGAIN),
            _ => Ok(done * Completion::SIZE),
        }
    }

    /// Moves records from the ring to the reader until `done` is `max` or
    /// the ring is empty; returns the fault that stopped it, if any.
    fn drain(&self, writer: &mut UserSliceWriter, max: usize, done: &mut usize) -> Option<Error> {
        let mut batch = [Completion::zeroed(); READ_BATCH];
        while *done < max {
            let want = (max - *done).min(READ_BATCH);
            let n = self.shared.ring.lock().lend(&mut batch[..want]);
            if n == 0 {
                break;
            }
            let mut delivered = 0;
            let mut fault = None;
            for c in &batch[..n] {
                if let Err(e) = writer.write_slice(&c.encode()) {
                    fault = Some(e);
                    break;
                }
                delivered += 1;
            }
            self.shared.ring.lock().settle(&batch[..n], delivered);
            *done += delivered;
            if fault.is_some() {
                return fault;
            }
        }
        None
    }

    /// Waits for more records while operations are in flight
    /// (`abi::gather`): looks again and again, the CPU going to whatever
    /// else can run here between looks, until it has half of what was in
    /// flight or buffered (`abi::gather::target`), no record came for the
    /// window, or the gathering's bound passed. No lock is held while it
    /// waits.
    fn gather(&self, writer: &mut UserSliceWriter, max: usize, done: &mut usize) -> Option<Error> {
        let mode = ffi::read_gather();
        // Off (the default): not even a look at the ring.
        if mode == crate::abi::poll::SyncPoll::Off {
            return None;
        }
        let (mean, in_flight) = {
            let r = self.shared.ring.lock();
            (r.mean_gap_ns(), r.in_flight())
        };
        let window = gather::window_ns(mode, mean);
        if window == 0 || gather::target(*done, in_flight, max) <= *done {
            return None;
        }
        let first = *done;
        let target = gather::target(first, in_flight, max);
        let start = ffi::now_ns();
        let mut last = start;
        let fault = loop {
            ffi::yield_cpu();
            let before = *done;
            let fault = self.drain(writer, max, done);
            let now = ffi::now_ns();
            if *done > before {
                last = now;
            }
            if fault.is_some()
                || *done >= target
                || self.shared.ring.lock().in_flight() == 0
                || now.saturating_sub(last) >= window
                || now.saturating_sub(start) >= gather::GATHER_MAX_NS
            {
                break fault;
            }
        };
        self.shared.work.read_gathered(*done - first);
        fault
    }

    /// Whether completions are waiting (poll and blocking read).
    pub(crate) fn readable(&self) -> bool {
        self.shared.ring.lock().len() > 0
    }

    /// The fdinfo lines: each key NUL-terminated, with its count (objects,
    /// then the work, control, keepalive and reconnect counts).
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 33] {
        let counts = self.objects.lock().counts();
        let exports = self.shared.exports.lock().len() as u64;
        let (in_flight, pending) = {
            let r = self.shared.ring.lock();
            (r.in_flight() as u64, r.len() as u64)
        };
        let live = self.shared.conns.lock().len() as u64;
        let [w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13] =
            self.shared.work.fdinfo();
        let [c0, c1] = self.shared.ctrl.fdinfo();
        let [k0, k1] = self.shared.keepalive.fdinfo();
        let [r0, r1, r2, r3, r4, r5] = self.shared.reconnect.fdinfo();
        [
            (b"rrdma-regions\0", counts.regions),
            (b"rrdma-region-bytes\0", counts.region_bytes),
            (b"rrdma-listeners\0", counts.listeners),
            (b"rrdma-connections\0", counts.conns),
            (b"rrdma-connections-live\0", live),
            (b"rrdma-exports\0", exports),
            (b"rrdma-imports\0", counts.imports),
            (b"rrdma-ops-in-flight\0", in_flight),
            (b"rrdma-completions\0", pending),
            w0,
            w1,
            w2,
            w3,
            w4,
            w5,
            w6,
            w7,
            w8,
            w9,
            w10,
            w11,
            w12,
            w13,
            c0,
            c1,
            k0,
            k1,
            r0,
            r1,
            r2,
            r3,
            r4,
            r5,
        ]
    }
}
