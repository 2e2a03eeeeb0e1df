// SPDX-License-Identifier: GPL-2.0

//! `rrdma-selftest blk PEER`: rrdma-blk at the ioctl and through the
//! disk's own file, against `rrdma serve` on PEER:
//! - refusals of BLK_MAP and BLK_UNMAP: flags, reserved, unknown import
//!   and disk, no CAP_SYS_ADMIN (a child that dropped root);
//! - a stale argument: the caller's import given back (UNIMPORT) after
//!   BLK_MAP: the disk (which has its own) keeps working, and what it
//!   writes is what a separate import reads;
//! - the caller's connection ended (DISCONNECT) under the disk: the disk
//!   has its own, and keeps working;
//! - BLK_UNMAP (forced) racing a thread reading the disk: the unmap
//!   returns, the reader ends with errors or end of disk, no hang;
//! - a read right after a write finds its bytes, the two submitted on
//!   different CPUs (whose lanes, were a disk's requests posted there,
//!   would not order them);
//! - direct I/O from buffers with a gap between their pages (two iovecs
//!   that start inside pages): round trips exact; on iWARP the
//!   reads are staged (one READ sink cannot map a gap: sysfs `staged`
//!   grows), elsewhere nothing is.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rrdma::abi::blkdev::{BlkMap, BlkUnmap, BLK_MAP_RO, BLK_UNMAP_FORCE};
use rrdma::{Connection, PageBuf, RemoteRegion, Rrdma};

use crate::remote::{addr, fnv, iwarp, pattern, token, T};
use crate::{ensure, expect_errno, expect_ok, Tap};

const EPERM: i32 = 1;
const ENOENT: i32 = 2;
const EINVAL: i32 = 22;
const BLOCK: usize = 4096;

/// The disk's file, for direct I/O.
fn open_disk(index: u32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/dev/rrdmab{index}"))
}

fn refusals(dev: &Rrdma, import: &RemoteRegion<'_>) -> Result<(), String> {
    let map = |flags, reserved, import| {
        dev.blk_map_raw(&BlkMap {
            import,
            flags,
            reserved,
            ..BlkMap::zeroed()
        })
    };
    let h = import.handle();
    expect_errno(map(1 << 5, 0, h), EINVAL).map_err(|e| format!("unknown flag: {e}"))?;
    expect_errno(map(0, 1, h), EINVAL).map_err(|e| format!("reserved: {e}"))?;
    expect_errno(map(0, 0, h ^ 0x5a5a), ENOENT).map_err(|e| format!("unknown import: {e}"))?;
    expect_errno(map(BLK_MAP_RO, 0, 0), ENOENT).map_err(|e| format!("handle 0: {e}"))?;
    let unmap = |index, flags| dev.blk_unmap_raw(&BlkUnmap { index, flags });
    expect_errno(unmap(200, 0), ENOENT).map_err(|e| format!("unmap of no disk: {e}"))?;
    expect_errno(unmap(u32::MAX, BLK_UNMAP_FORCE), ENOENT)
        .map_err(|e| format!("unmap of index u32::MAX: {e}"))?;
    expect_errno(unmap(0, 2), EINVAL).map_err(|e| format!("unmap flag: {e}"))
}

/// A child that gave up root (uid and gid 65534) asks for a disk and an
/// unmap on the inherited file: EPERM both, before anything else.
fn without_cap(dev: &Rrdma, import: &RemoteRegion<'_>) -> Result<(), String> {
    // SAFETY: the child only makes system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: plain system calls in the child.
        let dropped = unsafe {
            libc::setgroups(0, core::ptr::null()) == 0
                && libc::setgid(65534) == 0
                && libc::setuid(65534) == 0
        };
        let map = dev.blk_map(import, false);
        let unmap = dev.blk_unmap(0, true);
        let code = match (dropped, map, unmap) {
            (false, _, _) => 3,
            (true, Err(a), Err(b))
                if a.raw_os_error() == Some(EPERM) && b.raw_os_error() == Some(EPERM) =>
            {
                0
            }
            _ => 4,
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        3 => Err("the child could not drop root".into()),
        c => Err(format!(
            "child exit {c}: BLK_MAP or BLK_UNMAP was not EPERM"
        )),
    }
}

/// Writes block `b` of the disk with pattern `seed` and reads it back
/// through the disk; returns the pattern's hash.
fn disk_round_trip(f: &File, b: u64, seed: u64) -> io::Result<u64> {
    let mut w = PageBuf::new(BLOCK)?;
    pattern(w.as_mut_slice(), seed);
    f.write_all_at(w.as_mut_slice(), b * BLOCK as u64)?;
    let mut r = PageBuf::new(BLOCK)?;
    f.read_exact_at(r.as_mut_slice(), b * BLOCK as u64)?;
    if r.as_mut_slice() != w.as_mut_slice() {
        return Err(io::Error::other("read back differs"));
    }
    Ok(fnv(w.as_mut_slice()))
}

/// Connects to `peer`, imports its rw export (`tok`) and maps it; runs
/// `f` with the connection, the import, `tok` and the disk's index, then
/// unmaps the disk: `f`'s outcome, unless the unmap failed.
fn with_disk<'a>(
    dev: &'a Rrdma,
    peer: &str,
    f: impl FnOnce(Connection<'a>, RemoteRegion<'a>, u64, u32) -> Result<(), String>,
) -> Result<(), String> {
    let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
    let conn = expect_ok(dev.connect(addr(peer, 7471), T))?;
    let import = expect_ok(conn.import(tok, T))?;
    let index = expect_ok(dev.blk_map(&import, false))?;
    let res = f(conn, import, tok, index);
    expect_ok(dev.blk_unmap(index, false))?;
    res
}

/// UNIMPORT of the import the disk was mapped from: the disk has its own;
/// a write through the disk is what a second import reads.
fn stale_import(dev: &Rrdma, peer: &str) -> Result<(), String> {
    with_disk(dev, peer, |conn, import, tok, index| {
        drop(import);
        let f = open_disk(index).map_err(|e| format!("open the disk: {e}"))?;
        let sum = disk_round_trip(&f, 5, 0xb1b1).map_err(|e| format!("disk I/O: {e}"))?;
        let other = expect_ok(conn.import(tok, T))?;
        let local = expect_ok(dev.create_region(BLOCK as u32, 1))?;
        expect_ok(other.read(&local, 0, 5, 1))?;
        ensure(fnv(local.as_slice()) == sum, "the exporter's block differs")
    })
}

/// DISCONNECT of the caller's connection under the disk: the disk's
/// connection is its own, and its I/O goes on.
fn caller_gone(dev: &Rrdma, peer: &str) -> Result<(), String> {
    with_disk(dev, peer, |conn, import, _, index| {
        let f = open_disk(index).map_err(|e| format!("open the disk: {e}"))?;
        disk_round_trip(&f, 7, 7).map_err(|e| format!("I/O before: {e}"))?;
        drop(import);
        expect_ok(conn.disconnect())?;
        disk_round_trip(&f, 8, 8).map_err(|e| format!("I/O after DISCONNECT: {e}"))?;
        Ok(())
    })
}

/// A forced unmap while a thread reads the disk.
fn unmap_races_io(dev: &Rrdma, peer: &str) -> Result<(), String> {
    let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
    let conn = expect_ok(dev.connect(addr(peer, 7471), T))?;
    let import = expect_ok(conn.import(tok, T))?;
    let index = expect_ok(dev.blk_map(&import, false))?;
    let f = open_disk(index).map_err(|e| format!("open the disk: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let reads = Arc::new(AtomicU64::new(0));
    let r = reads.clone();
    // Reads until one fails or finds the disk gone (end of disk); the
    // flag only bounds a reader that never sees the unmap.
    let reader = std::thread::spawn(move || {
        let (mut ok, mut ended) = (0u64, false);
        let mut buf = PageBuf::new(BLOCK * 8).expect("buffer");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            match f.read_at(buf.as_mut_slice(), (ok % 64) * BLOCK as u64) {
                Ok(n) if n > 0 => {
                    ok += 1;
                    r.store(ok, SeqCst);
                }
                _ => {
                    ended = true;
                    break;
                }
            }
            if s.load(SeqCst) && t0.elapsed() > Duration::from_secs(30) {
                break;
            }
        }
        (ok, ended)
    });
    // The unmap comes once reads are under way: 300 ms, or longer until
    // the first read is back (a debug kernel's thread and first read can
    // take that long), at most 30 s.
    std::thread::sleep(Duration::from_millis(300));
    crate::keepalive::wait_for(Duration::from_secs(30), || {
        reads.load(SeqCst) > 0 || reader.is_finished()
    });
    let t0 = Instant::now();
    let unmapped = dev.blk_unmap(index, true);
    let took = t0.elapsed();
    stop.store(true, SeqCst);
    let (ok, failed) = reader
        .join()
        .map_err(|_| "the reader panicked".to_string())?;
    println!("# unmap under reads: {ok} reads before, {failed} ended, unmap took {took:?}");
    expect_ok(unmapped)?;
    ensure(ok > 0, "no read succeeded before the unmap")?;
    ensure(
        took < Duration::from_secs(30),
        format!("the unmap took {took:?}"),
    )
}

/// Bytes a write of [`read_after_write`] moves: on siw it completes once
/// handed to TCP, long before its last bytes are placed.
const RAW_WRITE: usize = 128 << 10;
/// Write-then-read rounds of [`read_after_write`]; a tenth with `quick`
/// (debug kernels, where the 300 rounds' 37.5 MiB took 170 s on siw).
const RAW_ROUNDS: u64 = 300;

/// A read right after a write through the disk finds the write's bytes,
/// whichever CPUs they are submitted on: [`RAW_WRITE`] bytes written from
/// the first of `cpus` (this thread's, at least two, which it gets back),
/// then their last block read at once from the last, and every other
/// round the other way round; `rounds` rounds. A disk's requests all go
/// on its connection's first queue pair; posted on their CPU's lane, siw's
/// reads found older bytes at once.
fn read_after_write(dev: &Rrdma, peer: &str, cpus: &[usize], rounds: u64) -> Result<(), String> {
    let (first, last_cpu) = (cpus[0], cpus[cpus.len() - 1]);
    let res = with_disk(dev, peer, |_, _, _, index| {
        let f = open_disk(index).map_err(|e| format!("open the disk: {e}"))?;
        let mut r = PageBuf::new(BLOCK).map_err(|e| e.to_string())?;
        let mut w = PageBuf::new(RAW_WRITE).map_err(|e| e.to_string())?;
        let last = RAW_WRITE - BLOCK;
        for i in 0..rounds {
            let at = (i % 8) * RAW_WRITE as u64;
            pattern(w.as_mut_slice(), 0x5a5a_0000 + i);
            let (wcpu, rcpu) = if i % 2 == 0 {
                (first, last_cpu)
            } else {
                (last_cpu, first)
            };
            crate::affinity::pin(wcpu)?;
            f.write_all_at(w.as_mut_slice(), at)
                .map_err(|e| format!("write {i}: {e}"))?;
            crate::affinity::pin(rcpu)?;
            f.read_exact_at(r.as_mut_slice(), at + last as u64)
                .map_err(|e| format!("read {i}: {e}"))?;
            ensure(
                r.as_mut_slice() == &w.as_mut_slice()[last..],
                format!("round {i}: the read found older bytes than the write's"),
            )?;
        }
        Ok(())
    });
    res.and(crate::affinity::pin_to(cpus))
}

/// Rounds of [`gapped_io`].
const GAP_ROUNDS: u64 = 16;

/// A disk's sysfs counter `name` (`zero_copy`, `staged`).
fn disk_count(index: u32, name: &str) -> Result<u64, String> {
    let p = format!("/sys/block/rrdmab{index}/rrdma/{name}");
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    s.trim().parse().map_err(|e| format!("{p}: {e}"))
}

/// Where [`gapped`]'s iovecs start in their buffers.
const GAP_OFF: usize = 1024;

/// Two blocks moved from or to two buffers of two pages each, each block
/// starting [`GAP_OFF`] into its buffer (6.12 wants each iovec a multiple
/// of the block size): the first ends inside a page, the second starts
/// inside one, a gap between them in the request.
fn gapped(f: &File, bufs: &mut [PageBuf; 2], at: u64, write: bool) -> Result<(), String> {
    let iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_slice()[GAP_OFF..].as_mut_ptr().cast(),
            iov_len: BLOCK,
        })
        .collect();
    let fd = std::os::fd::AsRawFd::as_raw_fd(f);
    // SAFETY: the iovecs name `half` bytes inside buffers that live
    // across the call.
    let n = unsafe {
        match write {
            true => libc::pwritev(fd, iov.as_ptr(), 2, at as libc::off_t),
            false => libc::preadv(fd, iov.as_ptr(), 2, at as libc::off_t),
        }
    };
    match n {
        n if n == 2 * BLOCK as isize => Ok(()),
        n if n < 0 => Err(format!("{}", io::Error::last_os_error())),
        n => Err(format!("{n} bytes of {}", 2 * BLOCK)),
    }
}

/// Direct I/O whose requests have a gap between their pages: every round
/// trip exact; on iWARP the reads went through the staging slot (a READ
/// sink is one registration, which cannot map a gap), elsewhere (and
/// every write) with zero copy.
fn gapped_io(dev: &Rrdma, peer: &str) -> Result<(), String> {
    with_disk(dev, peer, |_, _, _, index| {
        let f = open_disk(index).map_err(|e| format!("open the disk: {e}"))?;
        let buf = || PageBuf::new(2 * BLOCK).map_err(|e| e.to_string());
        let (mut w, mut r) = ([buf()?, buf()?], [buf()?, buf()?]);
        let staged = disk_count(index, "staged")?;
        let span = GAP_OFF..GAP_OFF + BLOCK;
        for i in 0..GAP_ROUNDS {
            let at = i * 3 * BLOCK as u64;
            for (k, b) in w.iter_mut().enumerate() {
                pattern(b.as_mut_slice(), 0x6a70_0000 + 2 * i + k as u64);
            }
            gapped(&f, &mut w, at, true).map_err(|e| format!("write {i}: {e}"))?;
            gapped(&f, &mut r, at, false).map_err(|e| format!("read {i}: {e}"))?;
            for k in 0..2 {
                ensure(
                    r[k].as_mut_slice()[span.clone()] == w[k].as_mut_slice()[span.clone()],
                    format!("round {i}: block {k} read back differs"),
                )?;
            }
        }
        let staged = disk_count(index, "staged")? - staged;
        match iwarp() {
            true => ensure(
                staged >= GAP_ROUNDS,
                format!("iWARP: {staged} requests staged, not every read ({GAP_ROUNDS})"),
            ),
            false => ensure(staged == 0, format!("{staged} requests staged")),
        }
    })
}

/// `touch-pages MIB`: writes every page of MIB MiB of anonymous memory
/// with its own pattern (its index and a seed), then checks every page.
/// Under a memory cap smaller than MIB the pages go to swap and come back.
pub(crate) fn touch_pages(mib: usize) -> io::Result<()> {
    const PAGE: usize = 4096;
    let pages = mib << 20 >> 12;
    let mut mem = vec![0u64; pages * PAGE / 8];
    let seed = 0x5eed_0000_0000_0000u64 ^ u64::from(std::process::id());
    let t0 = Instant::now();
    for (i, page) in mem.chunks_mut(PAGE / 8).enumerate() {
        for (j, w) in page.iter_mut().enumerate() {
            *w = seed ^ ((i as u64) << 20) ^ j as u64;
        }
    }
    let written = t0.elapsed();
    let swapped = swap_used_mib();
    let mut bad = 0usize;
    for (i, page) in mem.chunks(PAGE / 8).enumerate() {
        if page
            .iter()
            .enumerate()
            .any(|(j, &w)| w != seed ^ ((i as u64) << 20) ^ j as u64)
        {
            bad += 1;
        }
    }
    println!(
        "{pages} pages written in {written:?} ({} MiB of swap in use then), checked in {:?}: \
         {bad} differ",
        swapped.map_or("?".into(), |m| m.to_string()),
        t0.elapsed() - written
    );
    if bad > 0 {
        return Err(io::Error::other(format!("{bad} of {pages} pages differ")));
    }
    Ok(())
}

/// Swap in use (SwapTotal - SwapFree of /proc/meminfo), MiB.
fn swap_used_mib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| -> Option<u64> {
        let line = info.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some(kib("SwapTotal:")?.saturating_sub(kib("SwapFree:")?) >> 10)
}

/// `pin-memory MIB`: locks MIB MiB of anonymous memory in RAM (never
/// swapped), says `pinned` on stdout, and waits to be killed: what is
/// left of the guest's memory is all that reclaim can work with.
pub(crate) fn pin_memory(mib: usize) -> io::Result<()> {
    let len = mib << 20;
    // SAFETY: a new anonymous mapping; nothing else refers to it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `p` is our mapping of `len` bytes.
    if unsafe { libc::mlock(p, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    println!("pinned {mib} MiB");
    loop {
        // SAFETY: no arguments; returns only when a signal is caught.
        unsafe { libc::pause() };
    }
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, quick: bool) {
    let conn = match token(peer, "rw")
        .map_err(|e| e.to_string())
        .and_then(|tok| {
            let c = dev
                .connect(addr(peer, 7471), T)
                .map_err(|e| e.to_string())?;
            let i = c.import(tok, T).map_err(|e| e.to_string())?;
            Ok((c, i))
        }) {
        Ok(c) => c,
        Err(e) => {
            t.check("blk: connect and import", Err(e));
            return;
        }
    };
    t.check(
        "blk: BLK_MAP and BLK_UNMAP refuse bad arguments",
        refusals(dev, &conn.1),
    );
    t.check(
        "blk: without CAP_SYS_ADMIN, EPERM",
        without_cap(dev, &conn.1),
    );
    drop(conn);
    t.check(
        "blk: the caller's import given back, the disk goes on",
        stale_import(dev, peer),
    );
    t.check(
        "blk: DISCONNECT of the caller's connection: the disk's own goes on",
        caller_gone(dev, peer),
    );
    t.check(
        "blk: forced unmap under a reading thread",
        unmap_races_io(dev, peer),
    );
    t.check(
        "blk: direct I/O with gaps between its pages: exact; on iWARP its reads staged",
        gapped_io(dev, peer),
    );
    let cpus = crate::affinity::cpus();
    let name = "blk: a read right after a write on another CPU finds its bytes";
    if cpus.len() > 1 {
        let rounds = crate::quick::fewer(quick, RAW_ROUNDS, 10);
        t.check(name, read_after_write(dev, peer, &cpus, rounds));
    } else {
        t.skip(name, "one CPU");
    }
}
