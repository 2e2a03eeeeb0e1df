// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The importer's own memory as the local side of operations
//! (REGION_REGISTER): blocks written from an anonymous buffer land in the
//! peer's memory, blocks read land in a memfd buffer the process reads
//! directly, a fork(2) child's writes to the buffer do not reach the
//! region (the parent keeps the pinned pages), and a region destroyed with
//! operations in flight unpins its pages once they complete.

use rrdma::abi::uapi::OP_READ;
use rrdma::{PageBuf, RemoteRegion, Rrdma};

use super::common::{fnv, pattern, reap};
use super::peer::control;
use crate::{ensure, Tap};

/// Remote blocks these checks write (the integrity checks' end).
const FIRST: u64 = 200;
const BLOCKS: u32 = 32;
const BYTES: usize = BLOCKS as usize * 4096;

pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    t.check(
        "registered anonymous memory: written blocks are the peer's, read back into memfd memory",
        round_trip(dev, peer, rw),
    );
    t.check(
        "registered memory after fork: the child's writes do not reach the region",
        after_fork(dev, peer, rw),
    );
    t.check(
        "a registered region destroyed with READs in flight: each completes once, every page unpinned",
        destroy_in_flight(dev, rw),
    );
}

/// 16 READs of one block each into a registered region, submitted, then
/// the region destroyed at once: every READ completes exactly once, and
/// once they have, every page the region pinned is unpinned (by the
/// prune that the last one's completion leaves to process context).
fn destroy_in_flight(dev: &Rrdma, rw: &RemoteRegion<'_>) -> Result<(), String> {
    let (a0, r0) = crate::regions::pins()?;
    let buf = PageBuf::new(BYTES).map_err(|e| e.to_string())?;
    let region = dev
        .register_region(buf, 4096)
        .map_err(|e| format!("register: {e}"))?;
    let ops: Vec<_> = (0..16u32)
        .map(|i| {
            rw.op(
                OP_READ,
                &region,
                u64::from(i),
                FIRST + u64::from(i),
                1,
                100 + u64::from(i),
            )
        })
        .collect();
    let posted = dev.submit(&ops).map_err(|e| format!("submit: {e}"))?;
    // Destroyed (and unmapped) with the READs in flight.
    drop(region);
    let done = reap(dev, posted).map_err(|e| format!("reap: {e}"))?;
    let mut seen: Vec<u64> = done.iter().map(|c| c.user_data).collect();
    seen.sort_unstable();
    seen.dedup();
    ensure(
        done.len() == posted && seen.len() == posted,
        format!(
            "{posted} posted, {} completions of {} operations",
            done.len(),
            seen.len()
        ),
    )?;
    // The prune runs after the last completion, in the connection's work.
    let want = (BYTES as u64) / rrdma::page_size();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (a1, r1) = crate::regions::pins()?;
        if a1 - a0 >= want && a1 - a0 == r1 - r0 {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "{} pages pinned and {} unpinned 5 s after the completions",
                a1 - a0,
                r1 - r0
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The peer's checksum of the blocks these checks write, against `ours`.
fn peer_has(peer: &str, ours: &[u8]) -> Result<(), String> {
    let theirs = control(peer, &format!("checksum {FIRST} {BLOCKS}")).map_err(|e| e.to_string())?;
    let ours = format!("{:#x}", fnv(ours));
    ensure(
        theirs == ours,
        format!("peer's memory checksum {theirs}, ours {ours}"),
    )
}

fn round_trip(dev: &Rrdma, peer: &str, rw: &RemoteRegion<'_>) -> Result<(), String> {
    let anon = PageBuf::new(BYTES).map_err(|e| e.to_string())?;
    let memfd = PageBuf::memfd(BYTES).map_err(|e| e.to_string())?;
    let mut out = dev
        .register_region(anon, 4096)
        .map_err(|e| format!("register anonymous memory: {e}"))?;
    let back = dev
        .register_region(memfd, 4096)
        .map_err(|e| format!("register memfd memory: {e}"))?;
    pattern(out.as_mut_slice(), 0xfeed);
    rw.write(&out, 0, FIRST, BLOCKS)
        .map_err(|e| format!("write: {e}"))?;
    peer_has(peer, out.as_slice())?;
    rw.read(&back, 0, FIRST, BLOCKS)
        .map_err(|e| format!("read: {e}"))?;
    ensure(
        back.as_slice() == out.as_slice(),
        "the memfd buffer does not hold what was read",
    )
}

/// The child writes its copy of the buffer; then the parent writes its
/// own: both after fork, when a pinned page the parent shared with the
/// child (copy on write) would be replaced under the parent's write and
/// leave the region behind. The peer must get the parent's new bytes.
fn after_fork(dev: &Rrdma, peer: &str, rw: &RemoteRegion<'_>) -> Result<(), String> {
    let buf = PageBuf::new(BYTES).map_err(|e| e.to_string())?;
    let mut region = dev
        .register_region(buf, 4096)
        .map_err(|e| format!("register: {e}"))?;
    pattern(region.as_mut_slice(), 0xf0f0);
    let before = region.as_slice().to_vec();
    let p = region.as_mut_slice().as_mut_ptr();
    // SAFETY: the child only writes its copy of the buffer and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the child's own copy of the mapping, `BYTES` long.
        unsafe { std::ptr::write_bytes(p, 0x5a, BYTES) };
        // SAFETY: exit the child.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waiting for our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    ensure(
        region.as_slice() == before.as_slice(),
        "the child's write reached the parent's buffer",
    )?;
    pattern(region.as_mut_slice(), 0x0f0f);
    let want = region.as_slice().to_vec();
    rw.write(&region, 0, FIRST, BLOCKS)
        .map_err(|e| format!("write: {e}"))?;
    peer_has(peer, &want)
}
