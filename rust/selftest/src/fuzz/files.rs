// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fuzzer's calls on files and memory: open, close, dup, fork,
//! GET_INFO, regions, mmap/munmap and touching mappings, read/poll, and
//! command numbers the driver may not know.

use rrdma::abi::ioctl::{ioc, IOC_READ, IOC_WRITE};
use rrdma::abi::uapi::{self, Info, RegionCreate, RegionDestroy, IOCTL_MAGIC};

use super::{Fuzz, Pool, Rng, MAX_FDS, MAX_MAPS, MAX_REGIONS};

impl Fuzz {
    pub(super) fn open(&self, _r: &mut Rng) {
        if self.pool.lock().unwrap().fds.len() >= MAX_FDS {
            return;
        }
        // Never blocking: a read must not wait for a completion that no
        // other thread will cause.
        let flags = libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/rrdma".as_ptr(), flags) };
        if self.note("open", i64::from(fd)) {
            self.pool.lock().unwrap().fds.push(fd);
        }
    }

    pub(super) fn forget_fd(p: &mut Pool, fd: i32) {
        p.fds.retain(|&f| f != fd);
        p.regions.retain(|x| x.0 != fd);
        p.listeners.retain(|x| x.0 != fd);
        p.conns.retain(|x| x.0 != fd);
        p.imports.retain(|x| x.0 != fd);
        p.ports.retain(|x| x.1 != fd);
        p.peers.retain(|k, v| k.0 != fd && *v != fd);
    }

    pub(super) fn close(&self, r: &mut Rng) {
        // Seldom while there is room: a file's connections, exports and
        // imports are what the deeper calls need.
        if self.pool.lock().unwrap().fds.len() < MAX_FDS && r.chance(70) {
            return;
        }
        let fd = {
            let mut p = self.pool.lock().unwrap();
            let Some(fd) = r.pick(&p.fds) else { return };
            if p.pinned.contains(&fd) {
                return;
            }
            Self::forget_fd(&mut p, fd);
            fd
        };
        // SAFETY: closes a descriptor this run opened and no longer lists.
        let ret = unsafe { libc::close(fd) };
        self.note("close", i64::from(ret));
    }

    pub(super) fn dup(&self, r: &mut Rng) {
        let fd = self.fd(r);
        if self.pool.lock().unwrap().fds.len() >= MAX_FDS {
            return;
        }
        // SAFETY: dup has no memory preconditions.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if self.note("dup", i64::from(new)) {
            self.pool.lock().unwrap().fds.push(new);
        }
    }

    pub(super) fn get_info(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let size = match r.below(4) {
            0 => r.below(256) as usize,
            _ => Info::SIZE,
        };
        let mut b = vec![0u8; 256];
        if r.chance(10) {
            b.iter_mut().for_each(|x| *x = r.next() as u8);
        }
        self.ioctl_arg(
            r,
            "GET_INFO",
            fd,
            ioc(IOC_READ | IOC_WRITE, IOCTL_MAGIC, 0, size),
            &mut b,
        );
    }

    pub(super) fn region_create(&self, r: &mut Rng) {
        if self.pool.lock().unwrap().regions.len() >= MAX_REGIONS {
            return self.region_destroy(r);
        }
        let fd = self.fd(r);
        let mut a = RegionCreate::zeroed();
        a.block_size = match r.below(8) {
            0 => r.next() as u32,
            1 => 1 << r.below(32),
            2..=4 => 4096,
            5 => 512,
            _ => 65536,
        };
        a.nblocks = if r.chance(5) {
            r.next()
        } else {
            1 + r.below(16)
        };
        a.flags = Self::flags(r);
        a.reserved = Self::flags(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, "REGION_CREATE", fd, uapi::IOCTL_REGION_CREATE, &mut b) {
            let o = RegionCreate::decode(&b);
            self.record(fd, o.handle, |p| {
                p.regions
                    .push((fd, o.handle, o.mmap_offset, o.size, a.block_size))
            });
        }
    }

    pub(super) fn region_destroy(&self, r: &mut Rng) {
        let (fd, live) = {
            let p = self.pool.lock().unwrap();
            match r.pick(&p.regions) {
                Some(x) if r.chance(80) => (x.0, Some(x.1)),
                _ => (r.pick(&p.fds).unwrap_or(-1), None),
            }
        };
        let mut a = RegionDestroy::zeroed();
        a.handle = self.handle(r, live);
        a.flags = Self::flags(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, "REGION_DESTROY", fd, uapi::IOCTL_REGION_DESTROY, &mut b) {
            let mut p = self.pool.lock().unwrap();
            p.regions.retain(|x| !(x.0 == fd && x.1 == a.handle));
        }
    }

    pub(super) fn mmap(&self, r: &mut Rng) {
        if self.pool.lock().unwrap().maps.len() >= MAX_MAPS {
            return self.munmap_or_touch(r);
        }
        let (fd, off, size) = {
            let p = self.pool.lock().unwrap();
            match r.pick(&p.regions) {
                Some(x) if r.chance(85) => (x.0, x.2, x.3),
                _ => (r.pick(&p.fds).unwrap_or(-1), r.next() & !0xfff, 4096),
            }
        };
        let page = 4096u64;
        let len = match r.below(6) {
            0 => size + page,
            1 => page,
            2 => r.below(1 << 20) + 1,
            _ => size,
        }
        .max(1) as usize;
        let off = match r.below(8) {
            0 => off + page,
            1 => off + 1,
            _ => off,
        };
        let prot = *[
            libc::PROT_READ | libc::PROT_WRITE,
            libc::PROT_READ,
            libc::PROT_WRITE,
            libc::PROT_NONE,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
        ]
        .get(r.below(8).min(4) as usize)
        .unwrap_or(&libc::PROT_READ);
        let flags = if r.chance(85) {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
        // SAFETY: a new mapping chosen by the kernel; nothing of ours is
        // replaced.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, off as i64) };
        let ret = if p == libc::MAP_FAILED { -1 } else { 0 };
        if self.note("mmap", ret) {
            let mut pool = self.pool.lock().unwrap();
            pool.maps.push((p as usize, len, prot));
            drop(pool);
            if r.chance(30) {
                // SAFETY: advice on a mapping of ours.
                let ret = unsafe { libc::madvise(p, len, libc::MADV_DOFORK) };
                self.note("madvise", i64::from(ret));
            }
        }
    }

    pub(super) fn munmap_or_touch(&self, r: &mut Rng) {
        let mut p = self.pool.lock().unwrap();
        let Some(i) = (!p.maps.is_empty()).then(|| r.below(p.maps.len() as u64) as usize) else {
            return;
        };
        let (addr, len, prot) = p.maps[i];
        if r.chance(50) {
            p.maps.swap_remove(i);
            // SAFETY: a mapping of ours, removed from the pool under its lock.
            let ret = unsafe { libc::munmap(addr as *mut libc::c_void, len) };
            drop(p);
            self.note("munmap", i64::from(ret));
            return;
        }
        // Touch within the region's pages (a mapping longer than its region
        // would fault beyond them: mmap refuses those). Under the pool's
        // lock, so that no other thread unmaps it meanwhile.
        let at = addr + (r.below(len as u64) as usize & !0xfff);
        if prot & libc::PROT_WRITE != 0 && prot & libc::PROT_READ != 0 {
            // SAFETY: a live read-write mapping of ours (the pool's lock is
            // held), so `at` is valid for one byte.
            unsafe {
                let v = std::ptr::read_volatile(at as *const u8);
                std::ptr::write_volatile(at as *mut u8, v.wrapping_add(1));
            }
        } else if prot & libc::PROT_READ != 0 {
            // SAFETY: as above, readable.
            unsafe { std::ptr::read_volatile(at as *const u8) };
        }
        drop(p);
        self.note("touch", 0);
    }

    /// Creates a region of `nblocks` blocks of `block_size` in the file
    /// `fd`: (handle, blocks).
    pub(super) fn region_for(&self, fd: i32, block_size: u32, nblocks: u64) -> Option<(u32, u64)> {
        let mut a = RegionCreate::zeroed();
        a.block_size = block_size;
        a.nblocks = nblocks;
        let mut b = a.encode();
        if !self.ioctl(
            "REGION_CREATE",
            fd,
            uapi::IOCTL_REGION_CREATE,
            b.as_mut_ptr() as u64,
        ) {
            return None;
        }
        let o = RegionCreate::decode(&b);
        self.record(fd, o.handle, |p| {
            p.regions
                .push((fd, o.handle, o.mmap_offset, o.size, block_size))
        });
        Some((o.handle, nblocks))
    }

    pub(super) fn read_poll(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; no waiting.
        let ret = unsafe { libc::poll(&mut pfd, 1, 0) };
        self.note("poll", i64::from(ret));
        let mut buf = vec![0u8; 24 * 64];
        let len = match r.below(6) {
            0 => r.below(buf.len() as u64) as usize,
            1 => 0,
            _ => 24 * (1 + r.below(64) as usize),
        };
        let p = match r.below(20) {
            0 => self.bad.ro as *mut libc::c_void,
            1 => self.bad.none as *mut libc::c_void,
            _ => buf.as_mut_ptr().cast(),
        };
        // SAFETY: `p` is `buf` (at least `len` bytes) or memory the kernel
        // must refuse to write.
        let ret = unsafe { libc::read(fd, p, len) };
        self.note("read", ret as i64);
    }

    /// A command number the driver may not know, with a random argument.
    pub(super) fn raw(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let dir = r.below(4) as u32;
        let ty = if r.chance(90) {
            IOCTL_MAGIC
        } else {
            r.next() as u8
        };
        let nr = r.below(0x20) as u8;
        let size = r.below(256) as usize;
        let mut b = vec![0u8; 256];
        b.iter_mut().for_each(|x| *x = r.next() as u8);
        self.ioctl_arg(r, "raw", fd, ioc(dir, ty, nr, size), &mut b);
    }

    /// A child that uses the inherited files and exits without cleanup: its
    /// copies of the files are released by the exit.
    pub(super) fn fork(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let mut info = Info::zeroed().encode();
        let mut rc = RegionCreate::zeroed();
        rc.block_size = 4096;
        rc.nblocks = 1 + r.below(4);
        let mut rcb = rc.encode();
        // SAFETY: the child only makes system calls on memory prepared
        // before the fork (no allocation, no lock) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                libc::ioctl(fd, uapi::IOCTL_GET_INFO as _, info.as_mut_ptr());
                libc::ioctl(fd, uapi::IOCTL_REGION_CREATE as _, rcb.as_mut_ptr());
                libc::_exit(0);
            }
        }
        if !self.note("fork", i64::from(pid)) {
            return;
        }
        let mut status = 0;
        // SAFETY: waits for our child.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        self.note("waitpid", i64::from(ret));
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            self.findings
                .lock()
                .unwrap()
                .push(format!("forked child ended with status {status:#x}"));
        }
    }
}
