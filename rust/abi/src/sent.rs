// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The ledger of an import's writes that complete once sent
//! (`RRDMA_OP_F_SENT`, on iWARP): which of them a fence proved placed,
//! which a connection's end may have lost, and which such loss a fence
//! already reported, so that the first fence after a loss fails once
//! (`ECONNRESET`) and a fence never reports writes placed that died with
//! an old connection.
//!
//! Writes are counted from 1 as they are posted; a fence covers the writes
//! counted when it was posted. Atomic: writes are counted and fences end
//! under a path's lock, losses are found under the connection's.

use core::sync::atomic::{AtomicU64, Ordering};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct SentLedger {
    sent: AtomicU64,
    placed: AtomicU64,
    lost: AtomicU64,
    reported: AtomicU64,
}

impl SentLedger {
    /// An import with no write yet.
    pub const fn new() -> Self {
        Self {
            sent: AtomicU64::new(0),
            placed: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        }
    }

    /// A write that completes once sent was posted.
    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes sent so far: what a fence posted now covers.
    pub fn count(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// A fence that covered the first `covers` writes ended: they are
    /// placed (`ok`), or its failure reported any loss among them.
    pub fn fence_ended(&self, covers: u64, ok: bool) {
        if ok {
            self.placed.fetch_max(covers, Ordering::Relaxed);
        } else {
            self.reported.fetch_max(covers, Ordering::Relaxed);
        }
    }

    /// The connection ended, and with it the queue pairs: writes sent and
    /// not proved placed may be lost.
    pub fn connection_ended(&self) {
        let sent = self.sent.load(Ordering::Relaxed);
        if sent > self.placed.load(Ordering::Relaxed) {
            self.lost.fetch_max(sent, Ordering::Relaxed);
        }
    }

    /// A fence is submitted: whether it is the first since writes were
    /// lost that no failed fence reported (it fails, and the loss is
    /// reported).
    pub fn take_loss(&self) -> bool {
        let lost = self.lost.load(Ordering::Relaxed);
        lost > self.reported.fetch_max(lost, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::SentLedger;

    #[test]
    fn a_loss_is_reported_once() {
        let l = SentLedger::new();
        l.sent();
        l.sent();
        l.connection_ended();
        assert!(l.take_loss());
        assert!(!l.take_loss());
    }

    #[test]
    fn fenced_writes_are_not_lost() {
        let l = SentLedger::new();
        l.sent();
        l.fence_ended(l.count(), true);
        l.connection_ended();
        assert!(!l.take_loss());
        // A write after the fence is.
        l.sent();
        l.connection_ended();
        assert!(l.take_loss());
    }

    #[test]
    fn a_failed_fence_is_the_report() {
        let l = SentLedger::new();
        l.sent();
        let covers = l.count();
        l.connection_ended();
        l.fence_ended(covers, false);
        assert!(!l.take_loss());
        // Writes after the failed fence's post are still to report.
        let l = SentLedger::new();
        l.sent();
        let covers = l.count();
        l.sent();
        l.fence_ended(covers, false);
        l.connection_ended();
        assert!(l.take_loss());
    }

    #[test]
    fn no_writes_no_loss() {
        let l = SentLedger::new();
        l.connection_ended();
        assert!(!l.take_loss());
        l.fence_ended(0, true);
        assert!(!l.take_loss());
    }
}
