// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The importer's own memory as the local side of operations
//! (REGION_REGISTER): blocks written from an anonymous buffer land in the
//! peer's memory, blocks read land in a memfd buffer the process reads
//! directly, and a fork(2) child's writes to the buffer do not reach the
//! region (the parent keeps the pinned pages).

use rrdma::{PageBuf, RemoteRegion, Rrdma};

use super::common::{fnv, pattern};
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
    let mut out_buf = PageBuf::new(BYTES).map_err(|e| e.to_string())?;
    let mut memfd = Memfd::new(BYTES)?;
    let mut out = dev
        .register_region(out_buf.as_mut_slice(), 4096)
        .map_err(|e| format!("register anonymous memory: {e}"))?;
    let back = dev
        .register_region(memfd.as_mut_slice(), 4096)
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

fn after_fork(dev: &Rrdma, peer: &str, rw: &RemoteRegion<'_>) -> Result<(), String> {
    let mut buf = PageBuf::new(BYTES).map_err(|e| e.to_string())?;
    let mut region = dev
        .register_region(buf.as_mut_slice(), 4096)
        .map_err(|e| format!("register: {e}"))?;
    pattern(region.as_mut_slice(), 0xf0f0);
    let want = region.as_slice().to_vec();
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
        region.as_slice() == want.as_slice(),
        "the parent's buffer changed",
    )?;
    rw.write(&region, 0, FIRST, BLOCKS)
        .map_err(|e| format!("write: {e}"))?;
    peer_has(peer, &want)
}

/// A memfd of `len` bytes, mapped shared (shmem memory).
struct Memfd {
    fd: i32,
    map: *mut u8,
    len: usize,
}

impl Memfd {
    fn new(len: usize) -> Result<Self, String> {
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"rrdma-registered".as_ptr(), 0) };
        if fd < 0 {
            return Err(err("memfd_create"));
        }
        // SAFETY: our own descriptor; a fresh shared mapping of it.
        let map = unsafe {
            if libc::ftruncate(fd, len as libc::off_t) != 0 {
                libc::close(fd);
                return Err(err("ftruncate"));
            }
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(err("mmap"));
        }
        Ok(Self {
            fd,
            map: map.cast(),
            len,
        })
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes mapped while `self` lives; `&mut self`
        // excludes other slices.
        unsafe { std::slice::from_raw_parts_mut(self.map, self.len) }
    }
}

impl Drop for Memfd {
    fn drop(&mut self) {
        // SAFETY: our own mapping and descriptor.
        unsafe {
            libc::munmap(self.map.cast(), self.len);
            libc::close(self.fd);
        }
    }
}
