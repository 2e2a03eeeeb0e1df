// SPDX-License-Identifier: GPL-2.0

//! Exports: what a file offers its peers, named by random 64-bit tokens.
//!
//! Only this table maps a token to (region, access, connection restriction,
//! generation); peers see the token and nothing else. Registration for the
//! NIC is done per importing connection (`conn/grants.rs`), so that revoking
//! an export deregisters exactly the keys it handed out.

use kernel::prelude::*;
use kernel::rbtree::RBTree;
use kernel::sync::Arc;

use crate::abi::caps::Kind;
use crate::abi::errno::{Errno, ENOENT, ENOMEM};
use crate::abi::Result;
use crate::caps::Charges;
use crate::ffi;
use crate::region::Region;

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

/// The exports of one file, by token: every lookup (a grant, UNEXPORT) is
/// O(log n) in the number the file holds, and whether a region is
/// exported O(1) (its count, `Region::is_exported`, kept here). Each entry
/// holds one export charge of the file's (`max_file_exports`,
/// `max_user_exports`) and one count of its region's.
pub(crate) struct Exports {
    tree: RBTree<u64, Export>,
    /// Entries of `tree` (its length is not kept), each charged.
    count: usize,
    next_generation: u32,
    charges: Arc<Charges>,
}

impl Exports {
    /// No exports, charged to `charges` once there are.
    pub(crate) fn new(charges: Arc<Charges>) -> Self {
        Self {
            tree: RBTree::new(),
            count: 0,
            next_generation: 1,
            charges,
        }
    }

    /// Adds an export; returns its token.
    pub(crate) fn insert(
        &mut self,
        region: Arc<Region>,
        writable: bool,
        conn: Option<u64>,
    ) -> Result<u64> {
        self.charges.take(Kind::Export, Some("EXPORT"))?;
        let token = loop {
            let t = ffi::random_u64();
            if t != 0 && self.find(t).is_none() {
                break t;
            }
        };
        let generation = self.next_generation;
        let export = Export {
            token,
            region: region.clone(),
            writable,
            conn,
            generation,
        };
        if self
            .tree
            .try_create_and_insert(token, export, GFP_KERNEL)
            .is_err()
        {
            self.charges.give(Kind::Export);
            return Err(ENOMEM);
        }
        self.count += 1;
        region.count_export(true);
        self.next_generation = generation.wrapping_add(1).max(1);
        Ok(token)
    }

    /// The export behind `token`.
    pub(crate) fn find(&self, token: u64) -> Option<&Export> {
        self.tree.get(&token)
    }

    /// Removes the export behind `token` (`ENOENT`: none).
    pub(crate) fn remove(&mut self, token: u64) -> Result<Export, Errno> {
        let e = self.tree.remove(&token).ok_or(ENOENT)?;
        self.count -= 1;
        e.region.count_export(false);
        self.charges.give(Kind::Export);
        Ok(e)
    }

    /// Whether `region` is exported (a region's destruction asks). The
    /// caller holds the exports' lock, under which the count changes.
    pub(crate) fn exports_region(&self, region: &Region) -> bool {
        region.is_exported()
    }

    /// A copy of the exports (`RRDMA_IOCTL_STATUS`), to read after the
    /// table's lock is let go.
    pub(crate) fn snapshot(&self) -> Result<KVVec<Export>> {
        let mut out = KVVec::with_capacity(self.len(), GFP_KERNEL)?;
        for e in self.tree.values() {
            out.push(e.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Number of exports.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Takes every export out (the file's release).
    pub(crate) fn take_all(&mut self) -> RBTree<u64, Export> {
        self.discharge_all();
        core::mem::take(&mut self.tree)
    }

    fn discharge_all(&mut self) {
        for e in self.tree.values() {
            e.region.count_export(false);
            self.charges.give(Kind::Export);
        }
        self.count = 0;
    }
}

impl Drop for Exports {
    fn drop(&mut self) {
        self.discharge_all();
    }
}
