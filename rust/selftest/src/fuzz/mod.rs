// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `fuzz SEED SECONDS THREADS ADDR...`: random, multi-threaded sequences of
//! every ioctl, mmap/munmap, read/poll, close, dup and fork on `/dev/rrdma`,
//! with valid, stale, foreign (another file's) and garbage arguments.
//!
//! What it asserts: every call returns success or an errno the
//! documentation gives for that call (`errnos.rs`: one table per call),
//! every operation it posts completes exactly once, on its own file, with
//! a documented status (`track.rs`), every forked child exits cleanly,
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
//!
//! Files: this one holds the generator, the pool of values, result
//! accounting, the action table and the watchdog; `files.rs` the calls on
//! files and memory; `remote.rs` the calls on connections and data;
//! `setup.rs` the ordered set-up the random calls build on; `errnos.rs`
//! the errno tables; `track.rs` the account of posted operations.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::{self, Addr};

use crate::Tap;
use errnos::Target;

mod errnos;
mod files;
mod records;
mod remote;
mod report;
mod setup;
mod track;

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

/// What a descriptor of the run names: a number of its own (`slot`,
/// never reused) and the open file (`file`, shared by dups).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct FdInfo {
    slot: u64,
    file: u64,
    rrdma: bool,
}

/// Values a call may name: what the run has seen (kept after it is gone,
/// so that stale values are drawn too).
#[derive(Default)]
struct Pool {
    fds: Vec<i32>,
    /// What each descriptor of `fds` names.
    files: BTreeMap<i32, FdInfo>,
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

struct Fuzz {
    addrs: Vec<[u8; 4]>,
    /// An open file that is not `/dev/rrdma` (`/dev/null`).
    foreign: i32,
    pool: Mutex<Pool>,
    bad: BadMem,
    /// (call, errno or 0) -> count.
    results: Mutex<BTreeMap<(&'static str, i32), u64>>,
    findings: Mutex<Vec<String>>,
    /// Operations posted and their completions.
    track: track::Tracker,
    /// Slot and file numbers (0 is the foreign file).
    ids: AtomicU64,
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

/// A system call's return value and its errno, read at once (a lock
/// taken before the result is noted may overwrite errno).
fn sys(ret: i64) -> (i64, i32) {
    (ret, if ret < 0 { errno() } else { 0 })
}

impl Fuzz {
    /// Records the result `r` (from [`sys`]) of `call` on `target`.
    fn note(&self, call: &'static str, target: Target, r: (i64, i32)) -> bool {
        self.note_errno(call, call, target, r.1)
    }

    /// Records the result of `call` on `target`: failed with `e`, or
    /// succeeded (0); `e` must be in the table of `check`.
    fn note_errno(&self, call: &'static str, check: &str, target: Target, e: i32) -> bool {
        self.ops.fetch_add(1, Ordering::Relaxed);
        *self.results.lock().unwrap().entry((call, e)).or_default() += 1;
        if e != 0 && !errnos::documented(check, target, e) {
            let as_ = if check == call {
                String::new()
            } else {
                format!(" (as {check})")
            };
            self.findings.lock().unwrap().push(format!(
                "{call}{as_}: undocumented errno {e} {}",
                target.what()
            ));
        }
        e == 0
    }

    /// What the descriptor `fd` names now, if the run knows it.
    fn named(&self, fd: i32) -> Option<FdInfo> {
        if fd == self.foreign {
            let file = FdInfo {
                slot: 0,
                file: 0,
                rrdma: false,
            };
            return Some(file);
        }
        self.pool.lock().unwrap().files.get(&fd).copied()
    }

    /// What a call on `fd` just went to, `before` being what `fd` named
    /// before it: unknown if that changed meanwhile.
    fn target(&self, fd: i32, before: Option<FdInfo>) -> Target {
        if fd < 0 {
            return Target::Closed;
        }
        match (before, self.named(fd)) {
            (Some(b), Some(a)) if a == b && b.rrdma => Target::Rrdma(b.file),
            (Some(b), Some(a)) if a == b => Target::Foreign,
            _ => Target::Unknown,
        }
    }

    /// Lists `fd`, a new descriptor of `file` (None: a new file of
    /// `/dev/rrdma`).
    fn add_fd(&self, p: &mut Pool, fd: i32, file: Option<FdInfo>) {
        let slot = self.ids.fetch_add(1, Ordering::Relaxed);
        let info = match file {
            Some(f) => FdInfo { slot, ..f },
            None => FdInfo {
                slot,
                file: slot,
                rrdma: true,
            },
        };
        p.fds.push(fd);
        p.files.insert(fd, info);
    }

    /// Records `handle`, which a call on the file `fd` returned, among the
    /// values seen, and with `add` among the live ones while the run still
    /// lists the file (another thread may have closed it meanwhile).
    fn record(&self, fd: i32, handle: u32, add: impl FnOnce(&mut Pool)) {
        let mut p = self.pool.lock().unwrap();
        p.handles.push(handle);
        if p.fds.contains(&fd) {
            add(&mut p);
        }
    }

    fn ioctl(&self, call: &'static str, fd: i32, cmd: u32, arg: u64) -> bool {
        self.ioctl_ret(call, fd, cmd, arg).1 >= 0
    }

    /// An ioctl: what it went to and what it returned. A `raw` command
    /// number is checked against the table of the command it names.
    fn ioctl_ret(&self, call: &'static str, fd: i32, cmd: u32, arg: u64) -> (Target, i64) {
        let before = self.named(fd);
        // SAFETY: `arg` is a buffer of at least the command's size that the
        // caller lets the kernel write, or an address the kernel must refuse.
        let r = sys(i64::from(unsafe {
            libc::ioctl(fd, cmd as _, arg as libc::c_ulong)
        }));
        let target = self.target(fd, before);
        let check = match call {
            "raw" => errnos::command(cmd).unwrap_or("raw"),
            _ => call,
        };
        self.note_errno(call, check, target, r.1);
        (target, r.0)
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
        self.ioctl_arg_ret(r, call, fd, cmd, bytes).1 >= 0
    }

    /// [`Fuzz::ioctl_arg`], returning what it went to and returned.
    fn ioctl_arg_ret(
        &self,
        r: &mut Rng,
        call: &'static str,
        fd: i32,
        cmd: u32,
        bytes: &mut [u8],
    ) -> (Target, i64) {
        let arg = match r.below(40) {
            0 => 0,
            1 => self.bad.none,
            2 => self.bad.ro,
            3 => 0xffff_ffff_ffff_f000,
            _ => bytes.as_mut_ptr() as u64,
        };
        self.ioctl_ret(call, fd, cmd, arg)
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
}

fn map_page(prot: i32) -> u64 {
    crate::map_anon(4096, prot)
}

/// Runs the fuzzer and reports one check per finding kind.
pub(crate) fn run(t: &mut Tap, seed: u64, secs: u64, threads: u32, addrs: &[String]) {
    let addrs = addrs
        .iter()
        .filter_map(|a| a.parse::<std::net::Ipv4Addr>().ok())
        .map(|a| a.octets())
        .collect::<Vec<_>>();
    println!(
        "# fuzz: seed {seed}, {secs} s, {threads} threads (thread i draws from seed and i: \
         a 1-thread run replays exactly)"
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
        track: track::Tracker::new(),
        ids: AtomicU64::new(1),
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
        s.spawn(move || report::watchdog(f));
    });
    let elapsed = start.elapsed();
    // What is still in flight on open files must complete.
    let drained = f.drain();
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
    report::report(f, t, seed, elapsed, drained);
}
