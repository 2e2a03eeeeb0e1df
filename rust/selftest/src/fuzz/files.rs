// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fuzzer's calls on files and memory: open, close, dup, fork,
//! GET_INFO, regions, mmap/munmap and touching mappings, read/poll, and
//! command numbers the driver may not know.

use rrdma::abi::ioctl::{ioc, IOC_READ, IOC_WRITE};
use rrdma::abi::uapi::{self, Info, RegionCreate, RegionDestroy, IOCTL_MAGIC};

use super::{sys, Fuzz, Pool, Rng, Target, MAX_FDS, MAX_MAPS, MAX_REGIONS};

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
        if self.note("open", Target::NoFd, sys(i64::from(fd))) {
            self.add_fd(&mut self.pool.lock().unwrap(), fd, None);
        }
    }

    /// Takes `fd` out of the pool before it is closed; the last
    /// descriptor of a file takes its operations in flight with it.
    pub(super) fn forget_fd(&self, p: &mut Pool, fd: i32) {
        if let Some(gone) = p.files.remove(&fd) {
            if gone.rrdma && !p.files.values().any(|i| i.file == gone.file) {
                self.track.closed(gone.file);
            }
        }
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
            self.forget_fd(&mut p, fd);
            fd
        };
        // SAFETY: closes a descriptor this run opened and no longer lists.
        let ret = unsafe { libc::close(fd) };
        self.note("close", Target::NoFd, sys(i64::from(ret)));
    }

    pub(super) fn dup(&self, r: &mut Rng) {
        let fd = self.fd(r);
        if self.pool.lock().unwrap().fds.len() >= MAX_FDS {
            return;
        }
        let before = self.named(fd);
        // SAFETY: dup has no memory preconditions.
        let res = sys(i64::from(unsafe {
            libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3)
        }));
        let target = self.target(fd, before);
        if !self.note("dup", target, res) {
            return;
        }
        let new = res.0 as i32;
        match (target, before) {
            (Target::Rrdma(_) | Target::Foreign, Some(of)) => {
                self.add_fd(&mut self.pool.lock().unwrap(), new, Some(of));
            }
            // A copy of a file the run cannot name (closed and replaced
            // during the call): not kept.
            // SAFETY: the descriptor dup just made, listed nowhere.
            _ => unsafe {
                libc::close(new);
            },
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
        let before = self.named(fd);
        // SAFETY: a new mapping chosen by the kernel; nothing of ours is
        // replaced.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, off as i64) };
        let res = sys(if p == libc::MAP_FAILED { -1 } else { 0 });
        if self.note("mmap", self.target(fd, before), res) {
            if r.chance(30) {
                // Before the pool lists it: no other thread unmaps it
                // meanwhile (madvise(2): ENOMEM for unmapped pages).
                // SAFETY: advice on a mapping of ours.
                let ret = unsafe { libc::madvise(p, len, libc::MADV_DOFORK) };
                self.note("madvise", Target::NoFd, sys(i64::from(ret)));
            }
            self.pool.lock().unwrap().maps.push((p as usize, len, prot));
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
            let r = sys(i64::from(unsafe {
                libc::munmap(addr as *mut libc::c_void, len)
            }));
            drop(p);
            self.note("munmap", Target::NoFd, r);
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
        self.note("touch", Target::NoFd, (0, 0));
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
        let before = self.named(fd);
        // SAFETY: one valid pollfd; no waiting.
        let res = sys(i64::from(unsafe { libc::poll(&mut pfd, 1, 0) }));
        self.note("poll", self.target(fd, before), res);
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
        let before = self.named(fd);
        // SAFETY: `p` is `buf` (at least `len` bytes) or memory the kernel
        // must refuse to write.
        let res = sys(unsafe { libc::read(fd, p, len) } as i64);
        let target = self.target(fd, before);
        self.note("read", target, res);
        if res.0 > 0 && p == buf.as_mut_ptr().cast() {
            let n = (res.0 as usize).min(len);
            self.track.records(target, &buf[..n]);
        }
    }

    /// A command number the driver may not know, with a random argument.
    pub(super) fn raw(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let dir = r.below(4) as u32;
        // Not the type bytes of the VFS's own commands (fs/ioctl.c: 0x00
        // FIBMAP, FIGETBSZ; 0x15, 'X', 'f', 0x94; 'T' FIONBIO...), which
        // would answer instead of the driver.
        let ty = match r.next() as u8 {
            _ if r.chance(90) => IOCTL_MAGIC,
            0x00 | 0x15 | b'T' | b'X' | b'f' | 0x94 => IOCTL_MAGIC ^ 1,
            t => t,
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
        if !self.note("fork", Target::NoFd, sys(i64::from(pid))) {
            return;
        }
        let mut status = 0;
        // SAFETY: waits for our child.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        self.note("waitpid", Target::NoFd, sys(i64::from(ret)));
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            self.findings
                .lock()
                .unwrap()
                .push(format!("forked child ended with status {status:#x}"));
        }
    }
}
