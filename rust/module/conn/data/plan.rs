// SPDX-License-Identifier: GPL-2.0

//! What an operation needs, found under the locks before anything is
//! allocated ([`Plan`]), and what an operation that is the first to touch a
//! chunk allocates outside them ([`Prep`]).

use super::*;

/// What an operation needs, as seen under the lock before allocating.
pub(super) struct Plan {
    pub(super) lshift: u32,
    /// First local chunk the operation touches.
    pub(super) first: u64,
    /// Local chunks touched.
    pub(super) nchunks: usize,
    /// Bit `i`: chunk `first + i` has no registration yet.
    pub(super) missing: [u64; CHUNKS_MAX.div_ceil(64)],
    pub(super) nmissing: u64,
    pub(super) have_reg: bool,
    /// Work requests the operation needs.
    pub(super) wrs: u32,
    /// READ sinks it needs (iWARP).
    pub(super) sinks: u32,
    /// Whether it ends with a fence (a write on iWARP), which needs a
    /// fence sink.
    pub(super) fence: bool,
    /// A write on iWARP that leaves its fence to its batch's (one that
    /// completes once sent has none, and is not this).
    pub(super) unfenced: bool,
    pub(super) iwarp: bool,
}

impl Plan {
    pub(super) fn is_missing(&self, i: usize) -> bool {
        self.missing[i / 64] & (1 << (i % 64)) != 0
    }
}

impl Plan {
    /// Plans what an operation on `import` needs, on a connection (under
    /// its lock) that is connected and whose import may take it (the
    /// caller checked both), with its path's data state `path` (under the
    /// path's lock). `dma`: its local side is these DMA segments (a disk
    /// request's pages), which need no registration.
    pub(super) fn new(
        g: &crate::conn::ConnInner,
        slots: &Slots,
        reg: Option<&LocalReg>,
        import: &Import,
        c: &Checked,
        batched: bool,
        dma: Option<&ffi::DmaMap<'_>>,
    ) -> Result<Plan, Errno> {
        let res = g.res.as_ref().ok_or(ENOTCONN)?;
        let lshift = res.chunk_shift;
        let first = c.local_off >> lshift;
        let last = (c.local_off + c.len - 1) >> lshift;
        let nchunks = match dma {
            Some(_) => 0,
            None => (last - first + 1) as usize,
        };
        if nchunks > CHUNKS_MAX {
            return Err(E2BIG);
        }
        let mut missing = [0u64; CHUNKS_MAX.div_ceil(64)];
        let mut nmissing = 0;
        for i in 0..nchunks {
            let c = (first + i as u64) as usize;
            if reg.map_or(true, |r| r.chunks.get(c).is_none()) {
                missing[i / 64] |= 1 << (i % 64);
                nmissing += 1;
            }
        }
        let nseg = match dma {
            // On iWARP a READ per remote chunk, each into a sink over its
            // range of the request's pages (`EXDEV`, to stage, if one has a
            // gap or does not fit a sink).
            Some(m) if res.iwarp && c.dir == Dir::Read => {
                let page_shift = ffi::page_size().trailing_zeros();
                let sink_pages = 1u32 << lshift.saturating_sub(page_shift);
                ops::sink_ranges(
                    m.segs,
                    c.remote_off,
                    import.chunk_shift,
                    page_shift,
                    sink_pages,
                )
                .ok_or(EXDEV)?
            }
            // Elsewhere a request per remote chunk and per `max_sge_rd`
            // segments (a READ) or `max_sge` (a WRITE).
            Some(m) => {
                let sge = m.sge(c.dir == Dir::Read);
                ops::dma_gather_count(m.segs, c.remote_off, import.chunk_shift, sge)
            }
            None => ops::segment_count(c, lshift, import.chunk_shift),
        };
        // A write of a batch leaves its fence to the batch's (2 requests);
        // one that completes once sent has none.
        let write = c.dir == Dir::Write && res.iwarp;
        let unfenced = batched && write && !c.sent;
        let unfenced_or_sent = unfenced || (write && c.sent);
        let wrs =
            ops::op_wrs(c.dir, nseg, nmissing, res.iwarp) - if unfenced_or_sent { 2 } else { 0 };
        let sinks = ops::op_sinks(c.dir, nseg, res.iwarp);
        if wrs > u64::from(slots.op_budget()) || sinks > u64::from(slots.sinks) {
            // `check_op` refuses operations above the import's limit.
            return Err(E2BIG);
        }
        Ok(Plan {
            lshift,
            first,
            nchunks,
            missing,
            nmissing,
            have_reg: reg.is_some(),
            wrs: wrs as u32,
            sinks: sinks as u32,
            fence: write && !unfenced_or_sent,
            unfenced,
            iwarp: res.iwarp,
        })
    }

    /// Whether it can be posted with what `prep` allocated.
    pub(super) fn covered_by(&self, prep: &Prep, pd: &Arc<crate::verbs::Pd>) -> bool {
        if self.nmissing == 0 && self.have_reg {
            return true;
        }
        prep.pd.as_ref().is_some_and(|p| Arc::ptr_eq(p, pd))
            && self.have_reg
            && (0..self.nchunks).filter(|&i| self.is_missing(i)).all(|i| {
                let chunk = (self.first + i as u64) as usize;
                prep.mrs.iter().any(|f| f.chunk == chunk && f.mr.is_some())
            })
    }
}

/// What an operation that is the first to touch a chunk needs allocated
/// outside the connection's lock: the missing registrations (with the
/// index of their work request once built) and the region's cache entry.
/// Registrations that end up unused stay here, freed after the lock.
#[derive(Default)]
pub(super) struct Prep {
    pub(super) pd: Option<Arc<crate::verbs::Pd>>,
    pub(super) mrs: KVec<Fresh>,
    pub(super) node: Option<(RBTreeNodeReservation<usize, LocalReg>, Chunks, CacheCount)>,
}

impl Prep {
    pub(super) fn new(
        plan: &Plan,
        pd: Arc<crate::verbs::Pd>,
        region: &Arc<Region>,
    ) -> Result<Self, Errno> {
        let mut mrs = KVec::new();
        for i in (0..plan.nchunks).filter(|&i| plan.is_missing(i)) {
            let chunk = plan.first + i as u64;
            let mr = Mr::new(&pd, region, chunk, plan.lshift).map_err(|_| ENOMEM)?;
            let fresh = Fresh {
                chunk: chunk as usize,
                mr: Some(mr),
                installed: false,
                at: NOT_BUILT,
            };
            mrs.push(fresh, GFP_KERNEL).map_err(|_| ENOMEM)?;
        }
        let node = if plan.have_reg {
            None
        } else {
            Some((
                RBTreeNodeReservation::new(GFP_KERNEL).map_err(|_| ENOMEM)?,
                Chunks::new(region.geometry().bytes(), plan.lshift).map_err(|_| ENOMEM)?,
                CacheCount::new(region),
            ))
        };
        Ok(Self {
            pd: Some(pd),
            mrs,
            node,
        })
    }
}

/// A registration allocated for a chunk that an operation is the first
/// to touch.
pub(super) struct Fresh {
    pub(super) chunk: usize,
    /// The registration, while not in the cache.
    pub(super) mr: Option<Mr>,
    /// Installed in the cache by the current attempt.
    pub(super) installed: bool,
    /// The index of its registration work request, once built
    /// ([`NOT_BUILT`] before).
    pub(super) at: u32,
}

/// [`Fresh::at`] of a registration whose work request is not built.
pub(super) const NOT_BUILT: u32 = u32::MAX;

/// How one attempt to post went.
pub(super) enum Attempt {
    Done(Posted),
    /// It needs registrations allocated outside the lock first.
    Prepare(Plan, Arc<crate::verbs::Pd>),
    /// It needs the queue pair's sinks allocated outside the lock first
    /// ([`Conn::ready_sinks`]).
    Sinks,
    /// The connection's cache changed under it: try again.
    Again,
    /// The queue pair refused the work requests: the connection fails
    /// (outside the lock), and the operation, never posted whole, is
    /// dropped after it.
    Failed(Errno, Option<OpCtx>),
    /// As `Failed`, for an operation on a request's own pages of which
    /// some work requests were posted: it stays in its slot, which the
    /// connection's teardown completes once the queue pair is destroyed
    /// (the request must not end while a device may still reach its
    /// pages).
    FailedKept(Errno),
}
