// SPDX-License-Identifier: GPL-2.0

//! The local registration cache of a path: a region's chunks registered on
//! the path's queue pair, kept while operations use them and pruned in
//! process context once their region is destroyed and idle.

use super::*;
use crate::mr::Lent;

/// A local region's registrations on this connection.
/// Field order is drop order: the registrations go before the region
/// reference, which may be the last one keeping the pages.
///
/// # Invariants
///
/// A registration leaves `chunks` only while `inflight` is 0, or unposted
/// ([`Chunks::take_unposted`]); the entry leaves its cache only while
/// `inflight` is 0, or with the path's data after its queue pair is
/// destroyed.
pub(super) struct LocalReg {
    pub(super) chunks: Chunks,
    pub(super) region: Arc<Region>,
    /// Operations that hold a [`Lease`] on it.
    inflight: u32,
    _count: CacheCount,
}

/// One count of a region's registration-cache entries
/// (`Region::count_cached`), taken outside the locks before the entry is
/// made ([`Prep::new`]) and held by the entry. Its maker counts, then
/// reads the region's destroyed mark under the path's lock
/// (`Conn::try_post`); REGION_DESTROY marks, then reads the count (both
/// SeqCst): either the maker sees the mark and makes no entry, or the
/// destroy sees the count and prunes under the path's lock.
pub(super) struct CacheCount(Arc<Region>);

impl CacheCount {
    pub(super) fn new(region: &Arc<Region>) -> Self {
        region.count_cached(true);
        Self(region.clone())
    }
}

impl Drop for CacheCount {
    fn drop(&mut self) {
        self.0.count_cached(false);
    }
}

/// One operation's use of a region's cached registrations: counted in its
/// entry's `inflight` from [`LocalReg::lend`] until [`LocalRegs::settle`],
/// which only the operation's completion calls (it is in the operation's
/// slot). One never settled keeps the entry until the connection ends.
pub(super) struct Lease {
    key: usize,
}

impl LocalReg {
    pub(super) fn new(chunks: Chunks, region: Arc<Region>, count: CacheCount) -> Self {
        Self {
            chunks,
            region,
            inflight: 0,
            _count: count,
        }
    }

    /// A lease on it, for one operation.
    pub(super) fn lend(&mut self) -> Lease {
        self.inflight += 1;
        Lease {
            key: key(&self.region),
        }
    }

    /// Gives back `lease`, none of whose work requests was posted.
    pub(super) fn unlend(&mut self, lease: Lease) {
        if lease.key == key(&self.region) {
            self.inflight = self.inflight.saturating_sub(1);
        }
    }

    /// Installs `f`'s registration for the current attempt (or leaves it
    /// in `f` if the chunk has one).
    pub(super) fn install(&mut self, f: &mut Fresh) {
        f.at = NOT_BUILT;
        f.installed = false;
        if let Some(mr) = f.mr.take() {
            match self.chunks.set(f.chunk, mr) {
                Ok(()) => f.installed = true,
                Err(mr) => f.mr = Some(mr),
            }
        }
    }

    /// Takes `f`'s registration back out if the attempt that installed it
    /// posted fewer than its work request's index (`posted`): no posted
    /// request names it.
    pub(super) fn uninstall_unposted(&mut self, f: &mut Fresh, posted: u32) {
        if f.installed && (f.at == NOT_BUILT || f.at >= posted) {
            f.mr = self.chunks.take_unposted(f.chunk);
        }
        f.installed = false;
    }

    /// Chunk `i`'s registration, lent to work requests of the operation
    /// holding `lease` (none if the lease is another entry's).
    pub(super) fn lent(&self, lease: &Lease, i: usize) -> Option<Lent<'_>> {
        if lease.key != key(&self.region) {
            return None;
        }
        let mr = self.chunks.get(i)?;
        // SAFETY: `lease` is counted in `inflight` until the operation's
        // completion settles it, and until then neither the entry nor its
        // posted registrations leave (type invariant).
        Some(unsafe { Lent::new(mr) })
    }

    /// Whether nothing uses it and its region is destroyed: to drop.
    fn prunable(&self) -> bool {
        self.inflight == 0 && self.region.is_destroyed()
    }
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

    /// The operation holding `lease` ended: whether that was the last use
    /// of a destroyed region's registrations (to prune in process
    /// context, outside the path's lock).
    pub(super) fn settle(&mut self, lease: Lease) -> bool {
        match self.tree.get_mut(&lease.key) {
            Some(r) => {
                r.inflight = r.inflight.saturating_sub(1);
                r.prunable()
            }
            None => false,
        }
    }
}

pub(super) fn key(region: &Arc<Region>) -> usize {
    foreign::addr_of(region) as usize
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
                        .find(|(_, r)| r.prunable())
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
