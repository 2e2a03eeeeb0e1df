// SPDX-License-Identifier: GPL-2.0

//! What a file gives besides ioctls: completion records by read(2), their
//! readiness for poll, and object counts for fdinfo (so tests see leaks).

use super::FileState;
use crate::abi::errno::{EAGAIN, EINVAL};
use crate::abi::uapi::Completion;
use crate::abi::Result;
use crate::compat::user_slice;
use crate::ring::READ_BATCH;

impl FileState {
    /// read(2): copies whole completion records to `buf` (`len` bytes) and
    /// returns the bytes copied; `EAGAIN` when there are none. Records are
    /// lent out of the ring under its lock and copied to user memory
    /// without it (`abi::ring`): a copy stalled on a fault holds up nothing
    /// else, and records it could not deliver go back to the front of the
    /// ring.
    pub(crate) fn read(&self, buf: u64, len: usize) -> Result<usize> {
        let max = len / Completion::SIZE;
        if max == 0 {
            return Err(EINVAL);
        }
        let mut writer = user_slice(buf, max * Completion::SIZE).writer();
        let mut done = 0;
        let mut batch = [Completion::zeroed(); READ_BATCH];
        while done < max {
            let want = (max - done).min(READ_BATCH);
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
            done += delivered;
            if let Some(e) = fault {
                if done == 0 {
                    return Err(e.into());
                }
                break;
            }
        }
        if done == 0 {
            return Err(EAGAIN);
        }
        Ok(done * Completion::SIZE)
    }

    /// Whether completions are waiting (poll and blocking read).
    pub(crate) fn readable(&self) -> bool {
        self.shared.ring.lock().len() > 0
    }

    /// The fdinfo lines: each key NUL-terminated, with its count (objects,
    /// then the work, control, keepalive and reconnect counts).
    pub(crate) fn fdinfo(&self) -> [(&'static [u8], u64); 31] {
        let counts = self.objects.lock().counts();
        let exports = self.shared.exports.lock().len() as u64;
        let (in_flight, pending) = {
            let r = self.shared.ring.lock();
            (r.in_flight() as u64, r.len() as u64)
        };
        let live = self.shared.conns.lock().len() as u64;
        let [w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12] = self.shared.work.fdinfo();
        let [c0] = self.shared.ctrl.fdinfo();
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
            c0,
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
