// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `fuzz SEED SECONDS THREADS ADDR...`: random, multi-threaded sequences of
//! every ioctl, mmap/munmap, read/poll, close, dup and fork on `/dev/rrdma`,
//! with valid, stale, foreign (another file's) and garbage arguments.
//!
//! What it asserts: every call returns success or an errno the ABI
//! documents (Documentation/rrdma.rst), every forked child exits cleanly,
//! and the run ends. What the guest harness asserts around it: no kernel
//! report (BUG, WARNING, KASAN, lockdep, kmemleak, hung task) and
//! `rmmod rrdma` succeeds once every file is closed (nothing leaked a
//! reference).
//!
//! Reproducible from the printed seed: thread `i` draws from its own
//! generator seeded with `SEED` and `i`, so a run with one thread replays
//! exactly; with several, each thread's sequence replays and only the
//! interleaving differs. Connections go to `ADDR`s of this machine (a
//! listener of the run, or a closed port), so one guest exercises both
//! ends of every connection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrdma::abi::ioctl::{ioc, IOC_READ, IOC_WRITE};
use rrdma::abi::uapi::{
    self, Accept, Addr, Connect, Export, HandleArg, Import, Info, Listen, Op, RegionCreate,
    RegionDestroy, Submit, Unexport, IOCTL_MAGIC,
};

use crate::Tap;

/// Files open at once (more are closed first).
const MAX_FDS: usize = 12;
/// Live regions and mappings at once (more are destroyed or unmapped).
const MAX_REGIONS: usize = 24;
const MAX_MAPS: usize = 32;
/// Ports the run listens on (and connects to); one more is never listened
/// on.
const PORT_BASE: u16 = 20_100;
const PORTS: u16 = 4;
/// Longest any blocking call may wait, so that the run ends on time.
const MAX_WAIT_MS: u32 = 300;

/// xorshift64*: small, fast and reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng((seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        for _ in 0..4 {
            r.next();
        }
        r
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// True with `pct` percent probability.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.below(v.len() as u64) as usize])
    }
}

/// Values a call may name: what the run has seen (kept after it is gone,
/// so that stale values are drawn too).
#[derive(Default)]
struct Pool {
    fds: Vec<i32>,
    /// Files of the set-up, never closed by the run: their connection,
    /// export and import are what the deeper calls build on.
    pinned: Vec<i32>,
    /// (fd, handle, mmap offset, bytes, block size), live.
    regions: Vec<(i32, u32, u64, u64, u32)>,
    /// Every handle any call returned, live or not.
    handles: Vec<u32>,
    /// (fd, handle) of listeners, connections and imports, live.
    listeners: Vec<(i32, u32)>,
    conns: Vec<(i32, u32)>,
    /// (fd, handle, blocks, block size) of imports, live.
    imports: Vec<(i32, u32, u64, u32)>,
    /// Every token an export returned, with the exporting file.
    tokens: Vec<(i32, u64)>,
    /// The file of the listener on each port the run listens on.
    ports: Vec<(u16, i32)>,
    /// The file at the other end of a connection (fd, handle), when known
    /// (CONNECT to a port of the run's listeners).
    peers: BTreeMap<(i32, u32), i32>,
    /// (address, bytes, prot) of live mappings.
    maps: Vec<(usize, usize, i32)>,
}

/// Addresses the kernel must refuse to read or write.
struct BadMem {
    /// A page mapped without access.
    none: u64,
    /// A page mapped read-only.
    ro: u64,
}

/// Documented errnos; anything else is a finding.
const ALLOWED: &[i32] = &[
    libc::EINVAL,
    libc::EFAULT,
    libc::ENOENT,
    libc::EBADF,
    libc::ENOTTY,
    libc::E2BIG,
    libc::EOVERFLOW,
    libc::ENOMEM,
    libc::EAGAIN,
    libc::EBUSY,
    libc::ETIMEDOUT,
    libc::ECONNREFUSED,
    libc::ECONNRESET,
    libc::ECONNABORTED,
    libc::ENOTCONN,
    libc::EKEYREVOKED,
    libc::EPERM,
    libc::EACCES,
    libc::EINTR,
    libc::ENODEV,
    libc::ENXIO,
    libc::EADDRINUSE,
    libc::EADDRNOTAVAIL,
    libc::EHOSTUNREACH,
    libc::ENETUNREACH,
    libc::ERANGE,
    libc::EPROTO,
    libc::ECANCELED,
    libc::EAFNOSUPPORT,
    libc::EPROTONOSUPPORT,
    libc::EMFILE,
    libc::ENFILE,
    libc::EIO,
];

struct Fuzz {
    addrs: Vec<[u8; 4]>,
    /// An open file that is not `/dev/rrdma` (`/dev/null`).
    foreign: i32,
    pool: Mutex<Pool>,
    bad: BadMem,
    /// (call, errno or 0) -> count.
    results: Mutex<BTreeMap<(&'static str, i32), u64>>,
    findings: Mutex<Vec<String>>,
    ops: AtomicU64,
    stop: AtomicBool,
    /// Worker threads still running.
    running: AtomicU64,
    /// What each thread is doing, and since when (for the watchdog).
    doing: Vec<Mutex<(&'static str, Instant)>>,
    /// Only these actions (`RRDMA_FUZZ_ONLY`, names separated by `+`), to
    /// narrow a finding down.
    only: Option<Vec<String>>,
}

/// A call that takes longer than this is a hang (every call the fuzzer
/// makes is bounded by about a second).
const HANG: Duration = Duration::from_secs(30);

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Fuzz {
    /// Records the result of `call`: `ret` < 0 means failed with `errno()`.
    fn note(&self, call: &'static str, ret: i64) -> bool {
        let e = if ret < 0 { errno() } else { 0 };
        self.ops.fetch_add(1, Ordering::Relaxed);
        *self.results.lock().unwrap().entry((call, e)).or_default() += 1;
        if e != 0 && !ALLOWED.contains(&e) {
            self.findings
                .lock()
                .unwrap()
                .push(format!("{call}: undocumented errno {e}"));
        }
        e == 0
    }

    fn ioctl(&self, call: &'static str, fd: i32, cmd: u32, arg: u64) -> bool {
        // SAFETY: `arg` is a buffer of at least the command's size that the
        // caller lets the kernel write, or an address the kernel must refuse.
        let ret = unsafe { libc::ioctl(fd, cmd as _, arg as libc::c_ulong) };
        self.note(call, i64::from(ret))
    }

    /// An ioctl whose argument is `bytes` (written back into it), or, now and
    /// then, an address the kernel must refuse.
    fn ioctl_arg(
        &self,
        r: &mut Rng,
        call: &'static str,
        fd: i32,
        cmd: u32,
        bytes: &mut [u8],
    ) -> bool {
        let arg = match r.below(40) {
            0 => 0,
            1 => self.bad.none,
            2 => self.bad.ro,
            3 => 0xffff_ffff_ffff_f000,
            _ => bytes.as_mut_ptr() as u64,
        };
        self.ioctl(call, fd, cmd, arg)
    }

    fn fd(&self, r: &mut Rng) -> i32 {
        let p = self.pool.lock().unwrap();
        match r.below(20) {
            0 => -1,
            // Open, but not /dev/rrdma (and never blocks a read).
            1 => self.foreign,
            _ => r.pick(&p.fds).unwrap_or(-1),
        }
    }

    /// A handle: live of the right kind, any seen (stale or of another
    /// kind or file), or garbage.
    fn handle(&self, r: &mut Rng, live: Option<u32>) -> u32 {
        let p = self.pool.lock().unwrap();
        match (r.below(10), live) {
            (0..=5, Some(h)) => h,
            (0..=7, _) => r.pick(&p.handles).unwrap_or(1),
            (8, _) => 0,
            _ => r.next() as u32,
        }
    }

    fn addr(&self, r: &mut Rng) -> Addr {
        let mut a = Addr::zeroed();
        a.family = if r.chance(95) {
            uapi::AF_INET
        } else {
            r.next() as u16
        };
        a.port = PORT_BASE + r.below(u64::from(PORTS) + 1) as u16;
        if let Some(ip) = r.pick(&self.addrs) {
            a.addr[..4].copy_from_slice(&ip);
        }
        if r.chance(3) {
            a.scope_id = r.next() as u32;
        }
        a
    }

    /// A reserved field or flags: zero, or now and then not.
    fn flags(r: &mut Rng) -> u32 {
        if r.chance(8) {
            1 << r.below(32)
        } else {
            0
        }
    }

    fn timeout(r: &mut Rng) -> u32 {
        r.below(u64::from(MAX_WAIT_MS)) as u32
    }

    fn step(&self, r: &mut Rng, me: usize) {
        const NAMES: [&str; 24] = [
            "open",
            "open",
            "close",
            "dup",
            "GET_INFO",
            "REGION_CREATE",
            "REGION_CREATE",
            "REGION_CREATE",
            "REGION_DESTROY",
            "mmap",
            "mmap",
            "munmap-touch",
            "LISTEN",
            "ACCEPT",
            "CONNECT",
            "EXPORT",
            "UNEXPORT",
            "IMPORT",
            "release-handle",
            "SUBMIT",
            "SUBMIT",
            "read-poll",
            "raw-ioctl",
            "fork",
        ];
        let what = r.below(24);
        if let Some(only) = &self.only {
            if !only.iter().any(|n| n == NAMES[what as usize]) {
                return;
            }
        }
        *self.doing[me].lock().unwrap() = (NAMES[what as usize], Instant::now());
        match what {
            0 | 1 => self.open(r),
            2 => self.close(r),
            3 => self.dup(r),
            4 => self.get_info(r),
            5..=7 => self.region_create(r),
            8 => self.region_destroy(r),
            9 | 10 => self.mmap(r),
            11 => self.munmap_or_touch(r),
            12 => self.listen(r),
            13 => self.accept(r),
            14 => self.connect(r),
            15 => self.export(r),
            16 => self.unexport(r),
            17 => self.import(r),
            18 => self.release_handle(r),
            19 | 20 => self.submit(r),
            21 => self.read_poll(r),
            22 => self.raw(r),
            _ => self.fork(r),
        }
    }

    fn open(&self, _r: &mut Rng) {
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

    fn forget_fd(p: &mut Pool, fd: i32) {
        p.fds.retain(|&f| f != fd);
        p.regions.retain(|x| x.0 != fd);
        p.listeners.retain(|x| x.0 != fd);
        p.conns.retain(|x| x.0 != fd);
        p.imports.retain(|x| x.0 != fd);
        p.ports.retain(|x| x.1 != fd);
        p.peers.retain(|k, v| k.0 != fd && *v != fd);
    }

    fn close(&self, r: &mut Rng) {
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

    fn dup(&self, r: &mut Rng) {
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

    fn get_info(&self, r: &mut Rng) {
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

    fn region_create(&self, r: &mut Rng) {
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
            let mut p = self.pool.lock().unwrap();
            p.handles.push(o.handle);
            if p.fds.contains(&fd) {
                p.regions
                    .push((fd, o.handle, o.mmap_offset, o.size, a.block_size));
            }
        }
    }

    fn region_destroy(&self, r: &mut Rng) {
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

    fn mmap(&self, r: &mut Rng) {
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

    fn munmap_or_touch(&self, r: &mut Rng) {
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

    fn listen(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let mut a = Listen::zeroed();
        a.addr = self.addr(r);
        if r.chance(30) {
            a.addr.addr = [0; 16]; // any address
        }
        // Now and then any port, or one outside the run's range.
        match r.below(20) {
            0 => a.addr.port = 0,
            1 => a.addr.port = r.next() as u16,
            _ => {}
        }
        a.backlog = match r.below(5) {
            0 => r.next() as u32,
            _ => r.below(8) as u32,
        };
        a.flags = Self::flags(r);
        a.reserved = Self::flags(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, "LISTEN", fd, uapi::IOCTL_LISTEN, &mut b) {
            let o = Listen::decode(&b);
            let mut p = self.pool.lock().unwrap();
            p.handles.push(o.handle);
            if p.fds.contains(&fd) {
                p.listeners.push((fd, o.handle));
                p.ports.retain(|x| x.0 != a.addr.port);
                p.ports.push((a.addr.port, fd));
            }
        }
    }

    fn accept(&self, r: &mut Rng) {
        let (fd, live) = self.live(r, |p| &p.listeners);
        let mut a = Accept::zeroed();
        a.listener = self.handle(r, live);
        a.flags = Self::flags(r);
        a.timeout_ms = Self::timeout(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, "ACCEPT", fd, uapi::IOCTL_ACCEPT, &mut b) {
            self.new_conn(fd, Accept::decode(&b).handle);
        }
    }

    fn connect(&self, r: &mut Rng) {
        if self.pool.lock().unwrap().conns.len() >= MAX_REGIONS {
            return self.release_handle(r);
        }
        let fd = self.fd(r);
        let mut a = Connect::zeroed();
        a.addr = self.addr(r);
        a.timeout_ms = 1 + Self::timeout(r) * 3;
        a.flags = Self::flags(r);
        a.reserved = Self::flags(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, "CONNECT", fd, uapi::IOCTL_CONNECT, &mut b) {
            let h = Connect::decode(&b).handle;
            self.new_conn(fd, h);
            let mut p = self.pool.lock().unwrap();
            if let Some(&(_, peer)) = p.ports.iter().find(|x| x.0 == a.addr.port) {
                p.peers.insert((fd, h), peer);
            }
        }
    }

    fn new_conn(&self, fd: i32, handle: u32) {
        let mut p = self.pool.lock().unwrap();
        p.handles.push(handle);
        if p.fds.contains(&fd) {
            p.conns.push((fd, handle));
        }
    }

    /// A live (fd, handle) from the list `which` selects, most of the time;
    /// otherwise any file and no live handle.
    fn live(&self, r: &mut Rng, which: impl Fn(&Pool) -> &Vec<(i32, u32)>) -> (i32, Option<u32>) {
        let p = self.pool.lock().unwrap();
        match r.pick(which(&p)) {
            Some((fd, h)) if r.chance(80) => (fd, Some(h)),
            _ => (r.pick(&p.fds).unwrap_or(-1), None),
        }
    }

    fn export(&self, r: &mut Rng) {
        let (fd, region) = {
            let p = self.pool.lock().unwrap();
            // Mostly a region of a listening file: its peers import.
            let listening: Vec<_> = p
                .regions
                .iter()
                .filter(|x| p.ports.iter().any(|l| l.1 == x.0))
                .copied()
                .collect();
            let from = if !listening.is_empty() && r.chance(60) {
                &listening
            } else {
                &p.regions
            };
            match r.pick(from) {
                Some(x) if r.chance(85) => (x.0, Some(x.1)),
                _ => (r.pick(&p.fds).unwrap_or(-1), None),
            }
        };
        let mut a = Export::zeroed();
        a.region = self.handle(r, region);
        a.access = match r.below(6) {
            0 => r.next() as u32,
            1 => uapi::ACCESS_WRITE,
            2 | 3 => uapi::ACCESS_READ,
            _ => uapi::ACCESS_READ | uapi::ACCESS_WRITE,
        };
        a.conn = if r.chance(20) {
            let live = self.live(r, |p| &p.conns).1;
            self.handle(r, live)
        } else {
            0
        };
        a.flags = Self::flags(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, "EXPORT", fd, uapi::IOCTL_EXPORT, &mut b) {
            self.pool
                .lock()
                .unwrap()
                .tokens
                .push((fd, Export::decode(&b).token));
        }
    }

    /// A token: mostly one the file `owner` exported (when given), else
    /// any seen (stale, or of a file the peer is not), or garbage.
    fn token(&self, r: &mut Rng, owner: Option<i32>) -> u64 {
        let p = self.pool.lock().unwrap();
        let owned: Vec<u64> = owner.map_or_else(Vec::new, |o| {
            p.tokens.iter().filter(|t| t.0 == o).map(|t| t.1).collect()
        });
        match r.below(10) {
            0 => r.next(),
            1 => 0,
            2..=6 if !owned.is_empty() => r.pick(&owned).unwrap_or(1),
            _ => r.pick(&p.tokens).map_or(1, |t| t.1),
        }
    }

    fn unexport(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let mut a = Unexport::zeroed();
        a.token = self.token(r, Some(fd));
        a.flags = Self::flags(r);
        a.reserved = Self::flags(r);
        let mut b = a.encode();
        self.ioctl_arg(r, "UNEXPORT", fd, uapi::IOCTL_UNEXPORT, &mut b);
    }

    fn import(&self, r: &mut Rng) {
        let (fd, live) = self.live(r, |p| &p.conns);
        let mut a = Import::zeroed();
        a.conn = self.handle(r, live);
        let peer = self.pool.lock().unwrap().peers.get(&(fd, a.conn)).copied();
        a.token = self.token(r, peer);
        a.timeout_ms = 1 + Self::timeout(r) * 3;
        a.flags = Self::flags(r);
        a.reserved = Self::flags(r);
        let mut b = a.encode();
        let size = match r.below(10) {
            0 => uapi::IMPORT_SIZE_VER0,
            1 => r.below(64) as usize,
            _ => Import::SIZE,
        };
        let mut buf = vec![0u8; 64];
        buf[..Import::SIZE].copy_from_slice(&b);
        let cmd = ioc(IOC_READ | IOC_WRITE, IOCTL_MAGIC, 0x09, size);
        if self.ioctl_arg(r, "IMPORT", fd, cmd, &mut buf) && size >= uapi::IMPORT_SIZE_VER0 {
            b.copy_from_slice(&buf[..Import::SIZE]);
            let o = Import::decode(&b);
            let mut p = self.pool.lock().unwrap();
            p.handles.push(o.handle);
            if p.fds.contains(&fd) {
                p.imports.push((fd, o.handle, o.nblocks, o.block_size));
            }
        }
    }

    /// DISCONNECT, UNIMPORT or UNLISTEN (seldom: they end what the deeper
    /// calls need).
    fn release_handle(&self, r: &mut Rng) {
        if r.chance(60) {
            return;
        }
        let (call, cmd, fd, live) = match r.below(3) {
            0 => {
                let (fd, h) = self.live(r, |p| &p.conns);
                ("DISCONNECT", uapi::IOCTL_DISCONNECT, fd, h)
            }
            1 => {
                let (fd, h) = {
                    let p = self.pool.lock().unwrap();
                    match r.pick(&p.imports) {
                        Some(x) if r.chance(80) => (x.0, Some(x.1)),
                        _ => (r.pick(&p.fds).unwrap_or(-1), None),
                    }
                };
                ("UNIMPORT", uapi::IOCTL_UNIMPORT, fd, h)
            }
            _ => {
                let (fd, h) = self.live(r, |p| &p.listeners);
                ("UNLISTEN", uapi::IOCTL_UNLISTEN, fd, h)
            }
        };
        let mut a = HandleArg::zeroed();
        a.handle = self.handle(r, live);
        a.flags = Self::flags(r);
        let mut b = a.encode();
        if self.ioctl_arg(r, call, fd, cmd, &mut b) {
            let mut p = self.pool.lock().unwrap();
            let h = a.handle;
            p.conns.retain(|x| !(x.0 == fd && x.1 == h));
            p.imports.retain(|x| !(x.0 == fd && x.1 == h));
            p.listeners.retain(|x| !(x.0 == fd && x.1 == h));
        }
    }

    /// One block operation: an import and a region of the file, mostly.
    /// One block operation on the file `fd`: `clean`, one that should
    /// succeed (an import and a region of the file with the same block
    /// size, in range); otherwise any field may be wrong.
    fn op(&self, r: &mut Rng, fd: i32, clean: bool) -> Op {
        let pair = {
            let p = self.pool.lock().unwrap();
            let imp = p
                .imports
                .iter()
                .filter(|x| x.0 == fd)
                .copied()
                .collect::<Vec<_>>();
            r.pick(&imp).map(|i| {
                let reg = p
                    .regions
                    .iter()
                    .filter(|x| x.0 == fd && (!clean || x.4 == i.3))
                    .map(|x| (x.1, x.3 / u64::from(x.4.max(1))))
                    .collect::<Vec<_>>();
                ((i.1, i.2.max(1), i.3), r.pick(&reg))
            })
        };
        let (import, mut region) = match pair {
            Some((i, reg)) => (Some(i), reg),
            None => (None, None),
        };
        if clean && region.is_none() {
            // A region of the import's block size, for this operation.
            region = import.and_then(|i| self.region_for(fd, i.2));
        }
        let mut o = Op::zeroed();
        o.user_data = r.next();
        let rn = import.map_or(1, |x| x.1);
        let ln = region.map_or(1, |x| x.1.max(1));
        if clean {
            o.opcode = if r.chance(50) {
                uapi::OP_READ
            } else {
                uapi::OP_WRITE
            };
            o.remote = import.map_or(0, |x| x.0);
            o.local = region.map_or(0, |x| x.0);
            o.remote_block = r.below(rn);
            o.local_block = r.below(ln);
            let room = (rn - o.remote_block).min(ln - o.local_block).min(16);
            o.count = 1 + r.below(room) as u32;
            return o;
        }
        o.opcode = match r.below(10) {
            0 => r.next() as u32,
            1..=4 => uapi::OP_WRITE,
            _ => uapi::OP_READ,
        };
        o.remote = self.handle(r, import.map(|x| x.0));
        o.local = self.handle(r, region.map(|x| x.0));
        o.remote_block = if r.chance(5) { r.next() } else { r.below(rn) };
        o.local_block = if r.chance(5) { r.next() } else { r.below(ln) };
        o.count = match r.below(10) {
            0 => r.next() as u32,
            1 => 0,
            _ => 1 + r.below(rn.min(ln)) as u32,
        };
        o.flags = Self::flags(r);
        o.reserved = Self::flags(r);
        o
    }

    /// Creates a region of 16 blocks of `block_size` in the file `fd`:
    /// (handle, blocks).
    fn region_for(&self, fd: i32, block_size: u32) -> Option<(u32, u64)> {
        let mut a = RegionCreate::zeroed();
        a.block_size = block_size;
        a.nblocks = 16;
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
        let mut p = self.pool.lock().unwrap();
        p.handles.push(o.handle);
        if p.fds.contains(&fd) {
            p.regions
                .push((fd, o.handle, o.mmap_offset, o.size, block_size));
        }
        Some((o.handle, 16))
    }

    fn submit(&self, r: &mut Rng) {
        // Mostly a file with an import, so that operations get posted.
        let with_import = {
            let p = self.pool.lock().unwrap();
            r.pick(&p.imports).map(|x| x.0)
        };
        let fd = match with_import {
            Some(fd) if r.chance(70) => fd,
            _ => self.fd(r),
        };
        if r.chance(25) {
            let clean = r.chance(50);
            let mut b = self.op(r, fd, clean).encode();
            self.ioctl_arg(r, "RW_SYNC", fd, uapi::IOCTL_RW_SYNC, &mut b);
            return;
        }
        let n = match r.below(10) {
            0 => r.below(u64::from(uapi::SUBMIT_MAX) + 2) as u32,
            _ => r.below(8) as u32,
        };
        let op_size = match r.below(10) {
            0 => r.next() as u32 % 256,
            _ => Op::SIZE as u32,
        };
        let stride = (op_size as usize).max(1);
        let mut ops = vec![0u8; stride * (n.min(64) as usize) + Op::SIZE];
        let clean = r.chance(50);
        for i in 0..n.min(64) as usize {
            let e = self.op(r, fd, clean).encode();
            let k = e.len().min(stride);
            ops[i * stride..i * stride + k].copy_from_slice(&e[..k]);
        }
        let mut a = Submit::zeroed();
        a.ops = match r.below(20) {
            0 => self.bad.none,
            1 => 0,
            _ => ops.as_ptr() as u64,
        };
        // More ops than the buffer holds reads past it: only with a bad
        // pointer or a count the kernel refuses first.
        a.count = if n > 64 && a.ops == ops.as_ptr() as u64 {
            uapi::SUBMIT_MAX + 1
        } else {
            n
        };
        a.op_size = op_size;
        a.flags = Self::flags(r);
        let mut b = a.encode();
        self.ioctl_arg(r, "SUBMIT", fd, uapi::IOCTL_SUBMIT, &mut b);
    }

    fn read_poll(&self, r: &mut Rng) {
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
    fn raw(&self, r: &mut Rng) {
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
    fn fork(&self, r: &mut Rng) {
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

/// Reports a thread stuck in one call for [`HANG`]: what it was doing and
/// its kernel stack, on the console (the process may never exit if the
/// thread sleeps uninterruptibly), then ends the process.
fn watchdog(f: &Fuzz) {
    while f.running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_secs(1));
        if f.doing.iter().all(|d| d.lock().unwrap().1.elapsed() < HANG) {
            continue;
        }
        let mut report = String::new();
        for (i, d) in f.doing.iter().enumerate() {
            let (what, since) = *d.lock().unwrap();
            report.push_str(&format!(
                "rrdma-fuzz: thread {i}: {what} for {} s\n",
                since.elapsed().as_secs()
            ));
        }
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for t in tasks.flatten() {
                let path = t.path();
                let stack = std::fs::read_to_string(path.join("stack")).unwrap_or_default();
                let wchan = std::fs::read_to_string(path.join("wchan")).unwrap_or_default();
                report.push_str(&format!(
                    "rrdma-fuzz: task {}: wchan {wchan}\n{stack}",
                    t.file_name().to_string_lossy()
                ));
            }
        }
        if let Ok(mut c) = std::fs::OpenOptions::new().write(true).open("/dev/console") {
            use std::io::Write;
            let _ = c.write_all(report.as_bytes());
        }
        println!(
            "not ok 1 - fuzz: a call hung # {}",
            report.lines().next().unwrap_or("")
        );
        print!("{report}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(1);
    }
}

fn map_page(prot: i32) -> u64 {
    crate::map_anon(4096, prot)
}

impl Fuzz {
    /// The set-up the random calls build on, made in order before they
    /// start: a listening file with an exported region, and a client file
    /// connected to it that imports the export, has a region of the same
    /// block size and completes one READ and one WRITE. Both files are
    /// pinned. Returns what failed.
    fn setup(&self) -> Result<(), String> {
        let open = || {
            // SAFETY: a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    c"/dev/rrdma".as_ptr(),
                    libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
                )
            };
            if self.note("open", i64::from(fd)) {
                Ok(fd)
            } else {
                Err(format!("open: errno {}", errno()))
            }
        };
        let call = |name: &'static str, fd: i32, cmd: u32, b: &mut [u8]| {
            if self.ioctl(name, fd, cmd, b.as_mut_ptr() as u64) {
                Ok(())
            } else {
                Err(format!("{name}: errno {}", errno()))
            }
        };
        let ip = *self.addrs.first().ok_or("no address")?;
        let (l, c) = (open()?, open()?);
        {
            let mut p = self.pool.lock().unwrap();
            p.fds.extend([l, c]);
            p.pinned.extend([l, c]);
        }
        let mut regions = Vec::new();
        for fd in [l, c] {
            let mut a = RegionCreate::zeroed();
            a.block_size = 4096;
            a.nblocks = 64;
            let mut b = a.encode();
            call("REGION_CREATE", fd, uapi::IOCTL_REGION_CREATE, &mut b)?;
            let o = RegionCreate::decode(&b);
            regions.push(o.handle);
            let mut p = self.pool.lock().unwrap();
            p.handles.push(o.handle);
            p.regions.push((fd, o.handle, o.mmap_offset, o.size, 4096));
        }
        let mut e = Export::zeroed();
        e.region = regions[0];
        e.access = uapi::ACCESS_READ | uapi::ACCESS_WRITE;
        let mut b = e.encode();
        call("EXPORT", l, uapi::IOCTL_EXPORT, &mut b)?;
        let token = Export::decode(&b).token;
        self.pool.lock().unwrap().tokens.push((l, token));
        let mut a = Listen::zeroed();
        a.addr.family = uapi::AF_INET;
        a.addr.port = PORT_BASE;
        a.addr.addr[..4].copy_from_slice(&ip);
        let mut b = a.encode();
        call("LISTEN", l, uapi::IOCTL_LISTEN, &mut b)?;
        let lh = Listen::decode(&b).handle;
        {
            let mut p = self.pool.lock().unwrap();
            p.handles.push(lh);
            p.listeners.push((l, lh));
            p.ports.push((PORT_BASE, l));
        }
        let mut a = Connect::zeroed();
        a.addr.family = uapi::AF_INET;
        a.addr.port = PORT_BASE;
        a.addr.addr[..4].copy_from_slice(&ip);
        a.timeout_ms = 10_000;
        let mut b = a.encode();
        call("CONNECT", c, uapi::IOCTL_CONNECT, &mut b)?;
        let ch = Connect::decode(&b).handle;
        self.new_conn(c, ch);
        self.pool.lock().unwrap().peers.insert((c, ch), l);
        let mut a = Import::zeroed();
        a.conn = ch;
        a.token = token;
        a.timeout_ms = 10_000;
        let mut b = a.encode();
        call("IMPORT", c, uapi::IOCTL_IMPORT, &mut b)?;
        let o = Import::decode(&b);
        {
            let mut p = self.pool.lock().unwrap();
            p.handles.push(o.handle);
            p.imports.push((c, o.handle, o.nblocks, o.block_size));
        }
        for opcode in [uapi::OP_WRITE, uapi::OP_READ] {
            let mut op = Op::zeroed();
            op.opcode = opcode;
            op.remote = o.handle;
            op.local = regions[1];
            op.count = 4;
            let mut b = op.encode();
            call("RW_SYNC", c, uapi::IOCTL_RW_SYNC, &mut b)?;
        }
        Ok(())
    }
}

/// Runs the fuzzer and reports one check per finding kind.
pub(crate) fn run(t: &mut Tap, seed: u64, secs: u64, threads: u32, addrs: &[String]) {
    let addrs = addrs
        .iter()
        .filter_map(|a| a.parse::<std::net::Ipv4Addr>().ok())
        .map(|a| a.octets())
        .collect::<Vec<_>>();
    println!(
        "# fuzz: seed {seed}, {secs} s, {threads} threads (replay exactly: rrdma-selftest fuzz {seed} {secs} 1 ...)"
    );
    // SAFETY: a NUL-terminated path.
    let foreign = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    let f = Fuzz {
        addrs,
        foreign,
        pool: Mutex::new(Pool::default()),
        bad: BadMem {
            none: map_page(libc::PROT_NONE),
            ro: map_page(libc::PROT_READ),
        },
        results: Mutex::new(BTreeMap::new()),
        findings: Mutex::new(Vec::new()),
        ops: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        running: AtomicU64::new(u64::from(threads)),
        only: std::env::var("RRDMA_FUZZ_ONLY")
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| v.split('+').map(String::from).collect()),
        doing: (0..threads)
            .map(|_| Mutex::new(("start", Instant::now())))
            .collect(),
    };
    t.check(
        &format!("fuzz seed {seed}: set-up (listen, connect, export, import, READ and WRITE)"),
        f.setup(),
    );
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for i in 0..threads {
            let f = &f;
            s.spawn(move || {
                let mut r = Rng::new(seed, u64::from(i));
                while Instant::now() < end && !f.stop.load(Ordering::Relaxed) {
                    f.step(&mut r, i as usize);
                }
                f.running.fetch_sub(1, Ordering::Release);
            });
        }
        let f = &f;
        s.spawn(move || watchdog(f));
    });
    let elapsed = start.elapsed();
    // Everything goes: mappings, then files (their objects die with them).
    let p = std::mem::take(&mut *f.pool.lock().unwrap());
    for (addr, len, _) in p.maps {
        // SAFETY: a mapping of ours; no thread runs any more.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }
    for fd in p.fds {
        // SAFETY: a descriptor of ours; no thread runs any more.
        unsafe { libc::close(fd) };
    }
    let ops = f.ops.load(Ordering::Relaxed);
    println!(
        "# fuzz: {ops} calls in {:.1} s ({:.0}/s)",
        elapsed.as_secs_f64(),
        ops as f64 / elapsed.as_secs_f64().max(0.001)
    );
    let results = f.results.into_inner().unwrap();
    let mut line = String::new();
    let mut last = "";
    for ((call, e), n) in &results {
        if *call != last {
            if !line.is_empty() {
                println!("# {line}");
            }
            line = format!("{call}:");
            last = call;
        }
        let what = if *e == 0 {
            "ok".to_string()
        } else {
            format!("e{e}")
        };
        line.push_str(&format!(" {what}={n}"));
    }
    if !line.is_empty() {
        println!("# {line}");
    }
    let findings = f.findings.into_inner().unwrap();
    t.check(
        &format!("fuzz seed {seed}: every call returns success or a documented errno"),
        match findings.first() {
            None => Ok(()),
            Some(first) => Err(format!("{} findings, first: {first}", findings.len())),
        },
    );
    // How deep the random calls got (the set-up's calls included).
    let deep = [
        "CONNECT", "ACCEPT", "EXPORT", "IMPORT", "SUBMIT", "RW_SYNC", "mmap",
    ]
    .iter()
    .map(|c| {
        let n: u64 = results
            .iter()
            .filter(|((call, e), _)| call == c && *e == 0)
            .map(|(_, n)| n)
            .sum();
        format!("{c} {n}")
    })
    .collect::<Vec<_>>();
    println!("# fuzz: successful deep calls: {}", deep.join(", "));
}
