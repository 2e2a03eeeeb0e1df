// SPDX-License-Identifier: GPL-2.0

//! The count of an import's operations in flight and its revoked flag,
//! shared without the connection's lock by the import's entry
//! (`imports.rs`), its handle and its operations (`data/`).

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::sent::SentLedger;

/// What an import's entry shares with its operations and its handle,
/// without the connection's lock: the operations in flight, counted where
/// they are posted (under the connection's lock) and where they end (under
/// their path's lock only), with a flag ([`Uses::WAITED`]) that asks the
/// operation that ends the last one to say so ([`Uses::done`]); and
/// whether the import is revoked, set under the connection's lock and read
/// by a submitter's check of its operation without it (`Import::view`;
/// posting checks again under the lock).
///
/// And the ledger of its writes that complete once sent
/// ([`SentLedger`]).
pub(super) struct Uses {
    n: AtomicU32,
    revoked: AtomicBool,
    pub(super) sent: SentLedger,
}

impl Uses {
    /// Set while something waits for the count to reach zero.
    const WAITED: u32 = 1 << 31;

    pub(super) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                n: AtomicU32::new(0),
                revoked: AtomicBool::new(false),
                sent: SentLedger::new(),
            },
            GFP_KERNEL,
        )?)
    }

    /// An operation was posted.
    pub(super) fn started(&self) {
        self.n.fetch_add(1, Ordering::Relaxed);
    }

    /// An operation ended: whether it was the last and something waits
    /// for that (the caller then asks the follow-up work to look).
    pub(super) fn done(&self) -> bool {
        self.n.fetch_sub(1, Ordering::AcqRel) == Self::WAITED | 1
    }

    /// Operations in flight; asks the operation that ends the last one to
    /// say so (see [`Self::done`]): only a caller that waits for zero
    /// looks.
    pub(super) fn waited_count(&self) -> u32 {
        self.n.fetch_or(Self::WAITED, Ordering::AcqRel) & !Self::WAITED
    }

    /// Nothing waits any more (the follow-up work looks again).
    pub(super) fn unwait(&self) {
        self.n.fetch_and(!Self::WAITED, Ordering::AcqRel);
    }

    /// The import is revoked: no operation starts on it any more.
    pub(super) fn revoke(&self) {
        self.revoked.store(true, Ordering::Release);
    }

    pub(super) fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }

    /// Operations on the import in flight.
    pub(super) fn in_flight(&self) -> u32 {
        self.n.load(Ordering::Relaxed) & !Self::WAITED
    }
}
