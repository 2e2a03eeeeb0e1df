// SPDX-License-Identifier: GPL-2.0

//! The local registration cache of a path: a region's chunks registered on
//! the path's queue pair, kept while operations use them and pruned in
//! process context once their region is destroyed and idle.

use super::*;

/// A local region's registrations on this connection.
/// Field order is drop order: the registrations go before the region
/// reference, which may be the last one keeping the pages.
pub(super) struct LocalReg {
    pub(super) chunks: Chunks,
    pub(super) region: Arc<Region>,
    /// Operations in flight that use it.
    pub(super) inflight: u32,
}

/// The local registrations of a connection, by region address (stable and
/// unique while the entry holds the region).
pub(in crate::conn) struct LocalRegs {
    pub(super) tree: RBTree<usize, LocalReg>,
}

impl LocalRegs {
    pub(in crate::conn) fn new() -> Self {
        Self {
            tree: RBTree::new(),
        }
    }
}

pub(super) fn key(region: &Arc<Region>) -> usize {
    foreign::addr_of(region) as usize
}

/// An operation on the region of key `k` ended: whether that was the last
/// use of a destroyed region's registrations (to prune in process
/// context, outside the path's lock).
pub(super) fn local_done(local: &mut LocalRegs, k: usize) -> bool {
    match local.tree.get_mut(&k) {
        Some(r) => {
            r.inflight = r.inflight.saturating_sub(1);
            r.inflight == 0 && r.region.is_destroyed()
        }
        None => false,
    }
}

impl Conn {
    /// Drops the cached registrations of destroyed regions that no
    /// operation uses any more, one at a time, each outside the path's
    /// lock.
    pub(super) fn prune_destroyed(&self) {
        for lock in self.path_data.iter() {
            loop {
                let gone = {
                    let mut pg = lock.lock();
                    let Some(d) = pg.as_deref_mut() else {
                        break;
                    };
                    let found = d
                        .local
                        .tree
                        .iter()
                        .find(|(_, r)| r.inflight == 0 && r.region.is_destroyed())
                        .map(|(k, _)| *k);
                    match found {
                        Some(k) => d.local.tree.remove(&k),
                        None => break,
                    }
                };
                drop(gone);
            }
        }
    }

    /// Drops cached registrations of `region` that no operation uses
    /// (region destroyed); those in use go when their last operation does.
    pub(crate) fn forget_region(&self, region: &Arc<Region>) {
        let k = key(region);
        // One path at a time, each entry dropped outside its lock.
        for lock in self.path_data.iter() {
            let gone = {
                let mut pg = lock.lock();
                match pg.as_deref_mut() {
                    Some(d) if d.local.tree.get(&k).is_some_and(|r| r.inflight == 0) => {
                        d.local.tree.remove(&k)
                    }
                    _ => None,
                }
            };
            drop(gone);
        }
    }
}
