// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fuzzer's calls on connections and data: LISTEN, ACCEPT, CONNECT,
//! EXPORT, UNEXPORT, IMPORT, the handle releases, SUBMIT, RW_SYNC and
//! io_uring commands.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rrdma::abi::ioctl::{ioc, IOC_READ, IOC_WRITE};
use rrdma::abi::uapi::{
    self, Accept, Connect, Export, HandleArg, Import, Listen, Op, Submit, Unexport, IOCTL_MAGIC,
};

use super::track::{check_record, NO_RECORD};
use super::{Fuzz, Pool, Rng, Target, MAX_REGIONS};

impl Fuzz {
    pub(super) fn listen(&self, r: &mut Rng) {
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
            self.record(fd, o.handle, |p| {
                p.listeners.push((fd, o.handle));
                p.ports.retain(|x| x.0 != a.addr.port);
                p.ports.push((a.addr.port, fd));
            });
        }
    }

    pub(super) fn accept(&self, r: &mut Rng) {
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

    pub(super) fn connect(&self, r: &mut Rng) {
        if self.pool.lock().unwrap().conns.len() >= MAX_REGIONS {
            return self.release_handle(r);
        }
        let fd = self.fd(r);
        let mut a = Connect::zeroed();
        a.addr = self.addr(r);
        a.timeout_ms = 1 + Self::timeout(r) * 3;
        // Reconnect on a third of them: their peers come and go under the
        // fuzz, so attempts, backoffs and closes while reconnecting happen.
        a.flags = Self::flags(r)
            | if r.chance(33) {
                uapi::CONNECT_RECONNECT
            } else {
                0
            };
        // Keepalive: valid settings (short ones included, so that peers
        // declared gone happen under the fuzz), 0 and values out of range.
        const KA_MS: [u16; 6] = [0, 0, 100, 250, 99, u16::MAX];
        const KA_MISSES: [u16; 6] = [0, 0, 2, 3, 1, 256];
        a.keepalive_ms = KA_MS[r.below(6) as usize];
        a.keepalive_misses = KA_MISSES[r.below(6) as usize];
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

    pub(super) fn new_conn(&self, fd: i32, handle: u32) {
        self.record(fd, handle, |p| p.conns.push((fd, handle)));
    }

    /// A live (fd, handle) from the list `which` selects, most of the time;
    /// otherwise any file and no live handle.
    pub(super) fn live(
        &self,
        r: &mut Rng,
        which: impl Fn(&Pool) -> &Vec<(i32, u32)>,
    ) -> (i32, Option<u32>) {
        let p = self.pool.lock().unwrap();
        match r.pick(which(&p)) {
            Some((fd, h)) if r.chance(80) => (fd, Some(h)),
            _ => (r.pick(&p.fds).unwrap_or(-1), None),
        }
    }

    pub(super) fn export(&self, r: &mut Rng) {
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
    pub(super) fn token(&self, r: &mut Rng, owner: Option<i32>) -> u64 {
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

    pub(super) fn unexport(&self, r: &mut Rng) {
        let fd = self.fd(r);
        let mut a = Unexport::zeroed();
        a.token = self.token(r, Some(fd));
        a.flags = Self::flags(r);
        a.reserved = Self::flags(r);
        let mut b = a.encode();
        self.ioctl_arg(r, "UNEXPORT", fd, uapi::IOCTL_UNEXPORT, &mut b);
    }

    pub(super) fn import(&self, r: &mut Rng) {
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
            self.record(fd, o.handle, |p| {
                p.imports.push((fd, o.handle, o.nblocks, o.block_size))
            });
        }
    }

    /// DISCONNECT, UNIMPORT or UNLISTEN (seldom: they end what the deeper
    /// calls need).
    pub(super) fn release_handle(&self, r: &mut Rng) {
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

    /// One block operation on the file `fd`: `clean`, one that should
    /// succeed (an import and a region of the file with the same block
    /// size, in range); otherwise any field may be wrong. Its user_data is
    /// its own; with it, the bytes it moves if it succeeds, when known
    /// (its remote is the import drawn, whose block size the run knows).
    pub(super) fn op(&self, r: &mut Rng, fd: i32, clean: bool) -> (Op, Option<u64>) {
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
            region = import.and_then(|i| self.region_for(fd, i.2, 16));
        }
        let mut o = Op::zeroed();
        o.user_data = self.track.user_data();
        let bytes = |o: &Op| {
            import
                .filter(|i| i.0 == o.remote)
                .map(|i| u64::from(o.count) * u64::from(i.2))
        };
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
            return (o, bytes(&o));
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
        (o, bytes(&o))
    }

    /// Up to 8 operations (clean or garbage, now and then another
    /// `cmd_op`) as io_uring commands on `fd`; the ring is closed at once
    /// (operations in flight) or after their CQEs: one per command the
    /// ring took, with its user_data, each the bytes moved or an errno
    /// documented for io_uring.
    fn uring(&self, r: &mut Rng, fd: i32) {
        use io_uring::{cqueue, opcode, squeue, types, IoUring};
        let Ok(mut ring) = IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(8) else {
            return;
        };
        let n = 1 + r.below(8) as usize;
        let clean = r.chance(50);
        // user_data of each SQE -> the bytes its operation moves, if known.
        let mut issued = BTreeMap::new();
        for _ in 0..n {
            let (mut op, bytes) = self.op(r, fd, clean);
            op.user_data |= NO_RECORD;
            let mut cmd = [0u8; 80];
            cmd[..Op::SIZE].copy_from_slice(&op.encode());
            if r.chance(5) {
                cmd[Op::SIZE..].fill(r.next() as u8);
            }
            let cmd_op = if r.chance(5) {
                r.next() as u32
            } else {
                uapi::URING_CMD_OP
            };
            let user_data = self.track.user_data() | NO_RECORD;
            let sqe = opcode::UringCmd80::new(types::Fd(fd), cmd_op)
                .cmd(cmd)
                .build()
                .user_data(user_data);
            // SAFETY: the SQE refers to no user memory.
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                break;
            }
            issued.insert(user_data, bytes.filter(|_| cmd_op == uapi::URING_CMD_OP));
        }
        let wait = !r.chance(30);
        let before = self.named(fd);
        let mut taken = ring.submit().unwrap_or(0);
        let start = Instant::now();
        let mut cqes = Vec::new();
        let mut once = Vec::new();
        let ts = types::Timespec::from(Duration::from_millis(200));
        let args = types::SubmitArgs::new().timespec(&ts);
        // Well within the watchdog's 30 s: a command that takes longer
        // never completes.
        while wait && cqes.len() < taken && start.elapsed() < Duration::from_secs(20) {
            taken += ring.submitter().submit_with_args(1, &args).unwrap_or(0);
            for c in ring.completion() {
                match issued.remove(&c.user_data()) {
                    Some(bytes) => cqes.push((c.result(), bytes)),
                    None => once.push(format!(
                        "io_uring: a CQE for user_data {:#x}, unknown or seen",
                        c.user_data()
                    )),
                }
            }
        }
        let target = self.target(fd, before);
        if wait && cqes.len() < taken {
            once.push(format!(
                "io_uring: {} of {taken} commands on {target:?} without a CQE after 20 s",
                taken - cqes.len()
            ));
        }
        for &(res, bytes) in &cqes {
            self.note_errno(
                "io_uring",
                "io_uring",
                target,
                if res < 0 { -res } else { 0 },
            );
            let bytes = bytes.filter(|_| matches!(target, Target::Rrdma(_)));
            if res >= 0 {
                if let Err(e) = check_record(0, res as u64, bytes) {
                    self.track.bad_record(format!("io_uring CQE: {e}"));
                }
            }
        }
        let unwaited = if wait { 0 } else { taken };
        self.track
            .uring(taken as u64, cqes.len() as u64, unwaited as u64, once);
        // Dropped here: closed with whatever is still in flight.
    }

    pub(super) fn submit(&self, r: &mut Rng) {
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
            let mut op = self.op(r, fd, clean).0;
            op.user_data |= NO_RECORD;
            let mut b = op.encode();
            self.ioctl_arg(r, "RW_SYNC", fd, uapi::IOCTL_RW_SYNC, &mut b);
            return;
        }
        if r.chance(20) {
            self.uring(r, fd);
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
        // (user_data, opcode, bytes) of each operation in the array.
        let mut built = Vec::new();
        for i in 0..n.min(64) as usize {
            let (op, bytes) = self.op(r, fd, clean);
            built.push((op.user_data, op.opcode, bytes));
            let e = op.encode();
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
        // Its completions may be read (by another thread) before it returns.
        self.track.announce(&built);
        let (target, posted) = self.ioctl_arg_ret(r, "SUBMIT", fd, uapi::IOCTL_SUBMIT, &mut b);
        self.posted(target, posted, &built);
    }

    /// SUBMIT of `built` (announced) on `target` returned `posted`: the
    /// first `posted` operations are in flight (rrdma.h SUBMIT: "a prefix
    /// is posted"), the others were never posted.
    pub(super) fn posted(&self, target: Target, posted: i64, built: &[(u64, u32, Option<u64>)]) {
        if posted > 0 && posted as usize > built.len() {
            self.findings.lock().unwrap().push(format!(
                "SUBMIT: posted {posted} of {} operations",
                built.len()
            ));
        }
        self.track.settle(target, built, posted.max(0) as usize);
    }
}
