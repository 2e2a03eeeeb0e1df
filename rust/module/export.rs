// SPDX-License-Identifier: GPL-2.0

//! Exports: what a file offers its peers, named by random 64-bit tokens.
//!
//! Only this table maps a token to (region, access, connection restriction,
//! generation); peers see the token and nothing else. Registration for the
//! NIC is done per importing connection (`conn/grants.rs`), so that revoking
//! an export deregisters exactly the keys it handed out.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::errno::{Errno, ENOENT, ENOSPC};
use crate::abi::Result;
use crate::ffi;
use crate::region::Region;

/// Exports one file may hold.
pub(crate) const EXPORTS_MAX: usize = 4096;

/// One export.
#[derive(Clone)]
pub(crate) struct Export {
    /// The token peers use.
    pub(crate) token: u64,
    /// The exported region.
    pub(crate) region: Arc<Region>,
    /// Whether peers may write.
    pub(crate) writable: bool,
    /// Serial number of the only connection allowed to import it, if
    /// restricted (serials are never reused, unlike addresses).
    pub(crate) conn: Option<u64>,
    /// Generation, unique per file, never reused.
    pub(crate) generation: u32,
}

/// The exports of one file.
pub(crate) struct Exports {
    list: KVec<Export>,
    next_generation: u32,
}

impl Exports {
    /// No exports.
    pub(crate) fn new() -> Self {
        Self {
            list: KVec::new(),
            next_generation: 1,
        }
    }

    /// Adds an export; returns its token.
    pub(crate) fn insert(
        &mut self,
        region: Arc<Region>,
        writable: bool,
        conn: Option<u64>,
    ) -> Result<u64> {
        if self.list.len() >= EXPORTS_MAX {
            return Err(ENOSPC);
        }
        let token = loop {
            let t = ffi::random_u64();
            if t != 0 && self.find(t).is_none() {
                break t;
            }
        };
        let generation = self.next_generation;
        self.next_generation = generation.wrapping_add(1).max(1);
        self.list.push(
            Export {
                token,
                region,
                writable,
                conn,
                generation,
            },
            GFP_KERNEL,
        )?;
        Ok(token)
    }

    /// The export named by `token`.
    pub(crate) fn find(&self, token: u64) -> Option<&Export> {
        self.list.iter().find(|e| e.token == token)
    }

    /// Removes and returns the export named by `token`.
    pub(crate) fn remove(&mut self, token: u64) -> Result<Export, Errno> {
        let i = self
            .list
            .iter()
            .position(|e| e.token == token)
            .ok_or(ENOENT)?;
        crate::compat::vec_swap_remove(&mut self.list, i).ok_or(ENOENT)
    }

    /// Whether `region` is exported.
    pub(crate) fn exports_region(&self, region: &Arc<Region>) -> bool {
        self.list.iter().any(|e| Arc::ptr_eq(&e.region, region))
    }

    /// A copy of the exports (`RRDMA_IOCTL_STATUS`), to read after the
    /// table's lock is let go.
    pub(crate) fn snapshot(&self) -> Result<KVVec<Export>> {
        let mut out = KVVec::with_capacity(self.list.len(), GFP_KERNEL)?;
        for e in self.list.iter() {
            out.push(e.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Number of exports.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Takes every export (file release).
    pub(crate) fn take_all(&mut self) -> KVec<Export> {
        core::mem::take(&mut self.list)
    }
}
