// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `remote PEER_IP`: checks of connections, export/import and block
//! operations against a peer running
//! `rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 256 --access rw --access ro`.
//!
//! The serving side's memory is checked through its control channel
//! (`checksum FIRST COUNT`), so integrity is end to end: what this side
//! wrote is what the peer's region holds, and what it reads back. The
//! revocation check runs last: it unexports the read-write token.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rrdma::abi::errno::{
    EAFNOSUPPORT, EAGAIN, EBUSY, ECONNREFUSED, EFAULT, EINVAL, EKEYREVOKED, ENOENT, ENOMEM,
    EOVERFLOW, EPERM, ERANGE,
};
use rrdma::abi::uapi::{
    Addr, Completion, Connect, Export as ExportArg, Import, Listen, Op, Submit, ACCESS_READ,
    ACCESS_WRITE, AF_INET, CONNECT_NO_KEEPALIVE, OP_READ, OP_WRITE,
};
use rrdma::{errno, to_addr, Access, Connection, Region, RemoteRegion, Rrdma};

use crate::param::ModParam;
use crate::{ensure, expect_errno, expect_ok, map_anon, Tap};

pub(crate) const T: Duration = Duration::from_secs(10);

pub(crate) fn control(peer: &str, line: &str) -> io::Result<String> {
    let addr: SocketAddr = format!("{peer}:7470").parse().map_err(io::Error::other)?;
    let s = TcpStream::connect_timeout(&addr, T)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    writeln!(&s, "{line}")?;
    let mut out = String::new();
    BufReader::new(s).read_line(&mut out)?;
    Ok(out.trim().to_string())
}

/// One count of the exporter's fdinfo (`rrdma serve`'s `fdinfo` control
/// line: `key=value` words).
pub(crate) fn peer_count(peer: &str, key: &str) -> Result<u64, String> {
    let line = control(peer, "fdinfo").map_err(|e| e.to_string())?;
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no {key} in '{line}'"))
}

pub(crate) fn token(peer: &str, which: &str) -> io::Result<u64> {
    let line = control(peer, "tokens")?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let t = w
        .chunks(2)
        .find(|p| p.len() == 2 && p[0] == which)
        .map(|p| p[1].trim_start_matches("0x"))
        .ok_or_else(|| io::Error::other(format!("no {which} token in '{line}'")))?;
    u64::from_str_radix(t, 16).map_err(io::Error::other)
}

pub(crate) fn fnv(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub(crate) fn pattern(buf: &mut [u8], seed: u64) {
    // Mixed first: xorshift needs a non-zero state, and `seed | 1` alone
    // gave seeds 2k and 2k + 1 the same bytes.
    let mut x = (seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

pub(crate) fn expect_errno_any<T>(res: io::Result<T>, want: impl Into<i32>) -> Result<(), String> {
    let want = want.into();
    match res {
        Ok(_) => Err(format!("succeeded, expected errno {want}")),
        Err(e) if errno(&e) == Some(want) => Ok(()),
        Err(e) => Err(format!("got {e}, expected errno {want}")),
    }
}

fn op(r: &RemoteRegion<'_>, l: &Region<'_>, opcode: u32, lb: u64, rb: u64, n: u32, ud: u64) -> Op {
    r.op(opcode, l, lb, rb, n, ud)
}

/// Waits up to 10 s for `n` completions.
pub(crate) fn reap(dev: &Rrdma, n: usize) -> io::Result<Vec<Completion>> {
    let mut out = Vec::new();
    let start = Instant::now();
    while out.len() < n && start.elapsed() < T {
        let mut buf = vec![Completion::zeroed(); n - out.len()];
        let k = dev.completions(&mut buf, Some(Duration::from_millis(500)))?;
        out.extend_from_slice(&buf[..k]);
    }
    Ok(out)
}

/// No completion arrives within `ms`.
pub(crate) fn quiet(dev: &Rrdma, ms: u64) -> Result<(), String> {
    let mut buf = [Completion::zeroed(); 4];
    match dev.completions(&mut buf, Some(Duration::from_millis(ms))) {
        Ok(0) => Ok(()),
        Ok(n) => Err(format!("{n} unexpected completions")),
        Err(e) => Err(e.to_string()),
    }
}

/// The iWARP write fences `dev`'s connections posted (fdinfo).
pub(crate) fn write_fences(dev: &Rrdma) -> u64 {
    dev.fdinfo_value("rrdma-write-fences").unwrap_or(0)
}

/// Whether the guests run an iWARP provider (siw): writes then end with
/// fences; elsewhere a WRITE's completion means placement.
pub(crate) fn iwarp() -> bool {
    std::env::var("RRDMA_PROV").is_ok_and(|p| p == "siw")
}

pub(crate) fn addr(peer: &str, port: u16) -> SocketAddr {
    format!("{peer}:{port}").parse().expect("address")
}

fn connect_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    t.check(
        "connect to a port nobody listens on: ECONNREFUSED",
        expect_errno(dev.connect(addr(peer, 7999), T), ECONNREFUSED),
    );
    let good = Connect {
        addr: to_addr(addr(peer, 7471)),
        timeout_ms: 5000,
        ..Connect::zeroed()
    };
    t.check(
        "connect with an unknown address family: EAFNOSUPPORT",
        expect_errno(
            dev.connect_raw(&Connect {
                addr: Addr {
                    family: 1,
                    ..good.addr
                },
                ..good
            }),
            EAFNOSUPPORT,
        ),
    );
    t.check(
        "connect to port 0: EINVAL",
        expect_errno(
            dev.connect_raw(&Connect {
                addr: Addr {
                    port: 0,
                    ..good.addr
                },
                ..good
            }),
            EINVAL,
        ),
    );
    let mut tail = good.addr;
    tail.addr[15] = 1;
    t.check(
        "connect with bytes past an IPv4 address: EINVAL",
        expect_errno(dev.connect_raw(&Connect { addr: tail, ..good }), EINVAL),
    );
    t.check(
        "connect with an unknown flag: EINVAL",
        expect_errno(dev.connect_raw(&Connect { flags: 4, ..good }), EINVAL),
    );
    for (what, ms, misses, flags) in [
        ("a keepalive interval below 100 ms", 99, 0, 0),
        ("1 keepalive miss", 0, 1, 0),
        ("256 keepalive misses", 300, 256, 0),
        ("NO_KEEPALIVE and an interval", 300, 0, CONNECT_NO_KEEPALIVE),
        ("NO_KEEPALIVE and misses", 0, 3, CONNECT_NO_KEEPALIVE),
    ] {
        t.check(
            &format!("connect with {what}: EINVAL"),
            expect_errno(
                dev.connect_raw(&Connect {
                    keepalive_ms: ms,
                    keepalive_misses: misses,
                    flags,
                    ..good
                }),
                EINVAL,
            ),
        );
    }
}

fn listen_checks(dev: &Rrdma, t: &mut Tap) {
    let any = |port| Listen {
        addr: Addr {
            family: AF_INET,
            port,
            ..Addr::zeroed()
        },
        ..Listen::zeroed()
    };
    t.check(
        "listen on port 0: EINVAL",
        expect_errno(dev.listen_raw(&any(0)), EINVAL),
    );
    t.check(
        "listen with a backlog above 256: EINVAL",
        expect_errno(
            dev.listen_raw(&Listen {
                backlog: 257,
                ..any(7600)
            }),
            EINVAL,
        ),
    );
    let l = dev.listen(addr("0.0.0.0", 7601), 0);
    t.check(
        "listen on a free port",
        l.as_ref().map(|_| ()).map_err(|e| e.to_string()),
    );
    t.check(
        "listen twice on one port: EADDRNOTAVAIL (rdma_cm's answer)",
        expect_errno(dev.listen(addr("0.0.0.0", 7601), 0), libc::EADDRNOTAVAIL),
    );
    if let Ok(l) = l {
        t.check(
            "accept without waiting when nothing came: EAGAIN",
            match l.accept(Some(Duration::ZERO)) {
                // A zero Duration becomes 1 ms: nothing arrives.
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("a connection appeared".into()),
                Err(e) => Err(e.to_string()),
            },
        );
    }
}

fn import_checks<'a>(
    dev: &'a Rrdma,
    t: &mut Tap,
    conn: &Connection<'a>,
    rw: u64,
    region: &Region<'_>,
) {
    let req = Import {
        conn: conn.handle(),
        token: rw,
        timeout_ms: 5000,
        ..Import::zeroed()
    };
    t.check(
        "import of an unknown token: ENOENT",
        expect_errno(
            dev.import_raw(&Import {
                token: rw ^ 0x5a5a,
                ..req
            }),
            ENOENT,
        ),
    );
    t.check(
        "import through a region handle: EINVAL",
        expect_errno(
            dev.import_raw(&Import {
                conn: region.handle(),
                ..req
            }),
            EINVAL,
        ),
    );
    t.check(
        "import through handle 0: ENOENT",
        expect_errno(dev.import_raw(&Import { conn: 0, ..req }), ENOENT),
    );
    t.check(
        "import with a flag set: EINVAL",
        expect_errno(dev.import_raw(&Import { flags: 1, ..req }), EINVAL),
    );
}

fn integrity_checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    let mut out = expect_ok(dev.create_region(4096, 128)).expect("region");
    let back = expect_ok(dev.create_region(4096, 128)).expect("region");
    let mut seed = 0x1234_5678_u64;
    for (i, &(rb, n)) in [
        (0u64, 1u32),
        (1, 2),
        (5, 3),
        (17, 7),
        (40, 16),
        (100, 31),
        (130, 64),
        (0, 100),
        (192, 64),
    ]
    .iter()
    .enumerate()
    {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let bytes = n as usize * 4096;
        pattern(&mut out.as_mut_slice()[..bytes], seed);
        let res = (|| -> Result<(), String> {
            rw.write(&out, 0, rb, n)
                .map_err(|e| format!("write: {e}"))?;
            rw.read(&back, 0, rb, n).map_err(|e| format!("read: {e}"))?;
            if out.as_slice()[..bytes] != back.as_slice()[..bytes] {
                return Err("read back differs".into());
            }
            let theirs = control(peer, &format!("checksum {rb} {n}")).map_err(|e| e.to_string())?;
            let ours = format!("{:#x}", fnv(&out.as_slice()[..bytes]));
            if theirs != ours {
                return Err(format!("peer's memory checksum {theirs}, ours {ours}"));
            }
            Ok(())
        })();
        t.check(
            &format!("integrity {i}: {n} blocks at {rb}, peer memory and read-back match"),
            res,
        );
    }
}

/// Send CQs are polled in softirq (module parameter `cq_softirq`, on by
/// default): 64 READs posted at once complete there (fdinfo
/// `rrdma-work-softirq` counts the batches), in no more calls into the
/// module than operations (`rrdma-work-completions`; a control message
/// completed meanwhile adds one). A poll hands all it found over in one
/// call: siw's come several per poll, rxe's one at a time, since each
/// event runs the poll at once. With it off they complete on the work
/// queue, as before, none in softirq, and the work item's later start
/// batches them on both providers: fewer calls than operations.
fn softirq_check(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>, local: &Region<'_>) {
    let batches = || dev.fdinfo_value("rrdma-work-softirq").unwrap_or(0);
    let calls = || dev.fdinfo_value("rrdma-work-completions").unwrap_or(0);
    for (on, value) in [(true, "Y"), (false, "N"), (true, "Y")] {
        let res = (|| {
            let param = ModParam::set("cq_softirq", value)?;
            let ops: Vec<Op> = (0..64)
                .map(|i| op(rw, local, OP_READ, i, i, 1, 2000 + i))
                .collect();
            let (batches0, calls0) = (batches(), calls());
            let comps = crate::lossy::submit_all(dev, &ops)?;
            let (n, c) = (batches() - batches0, calls() - calls0);
            println!("# cq_softirq={value}: 64 READs in {c} completion calls, {n} in softirq");
            ensure(
                comps.len() == 64 && comps.iter().all(|c| c.status == 0),
                format!("{} completions, or one failed", comps.len()),
            )?;
            ensure(
                (n > 0) == on,
                format!("{n} calls in softirq with cq_softirq={value}"),
            )?;
            let most = if on { 65 } else { 63 };
            ensure(c <= most, format!("{c} completion calls for 64 READs"))?;
            param.restore()
        })();
        t.check(
            &format!(
                "cq_softirq={value}: 64 READs complete, in softirq only when on, in {} calls than operations",
                if on { "no more" } else { "fewer" }
            ),
            res,
        );
    }
}

fn batch_checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let local = expect_ok(dev.create_region(4096, 64)).expect("region");
    let ops: Vec<Op> = (0..64)
        .map(|i| op(rw, &local, OP_WRITE, i, i, 1, 1000 + i))
        .collect();
    // A small NIC's queue (the guests' limit_* parameters) takes part of
    // the batch: SUBMIT says how much, and the rest goes in as operations
    // complete.
    let small_nic = std::env::var("RRDMA_MAX_OP_BLOCKS").is_ok();
    let fences0 = write_fences(dev);
    let mut comps = Vec::new();
    let first = dev.submit(&ops);
    let mut posted = *first.as_ref().unwrap_or(&0);
    let mut submits = 1;
    for _ in 0..1000 {
        if posted >= ops.len() {
            break;
        }
        comps.extend(reap(dev, 1).unwrap_or_default());
        posted += dev.submit(&ops[posted..]).unwrap_or(0);
        submits += 1;
    }
    t.check(
        if small_nic {
            "a batch of 64 writes on a small queue: posted in parts, all of it"
        } else {
            "a batch of 64 writes is posted whole"
        },
        match first {
            Ok(64) if !small_nic => Ok(()),
            Ok(n) if small_nic && n > 0 && n < 64 && posted == 64 => Ok(()),
            Ok(n) => Err(format!("{n} posted at first, {posted} in all")),
            Err(e) => Err(e.to_string()),
        },
    );
    let left = 64 - comps.len();
    comps.extend(reap(dev, left).unwrap_or_default());
    let mut uds: Vec<u64> = comps.iter().map(|c| c.user_data).collect();
    uds.sort_unstable();
    t.check(
        "64 completions, each user_data once, all successful",
        if comps.len() == 64
            && uds == (1000..1064).collect::<Vec<_>>()
            && comps
                .iter()
                .all(|c| c.status == 0 && c.bytes == 4096 && c.opcode == OP_WRITE)
        {
            Ok(())
        } else {
            Err(format!(
                "{} completions: {:?}",
                comps.len(),
                comps.iter().take(3).collect::<Vec<_>>()
            ))
        },
    );
    t.check("no completion beyond the batch", quiet(dev, 200));
    softirq_check(dev, t, rw, &local);
    // iWARP (siw): the writes of one SUBMIT share one fence; elsewhere
    // no fence is sent.
    let iwarp = iwarp();
    let sent = write_fences(dev) - fences0;
    t.check(
        &format!("the batch's writes take at most one write fence per SUBMIT ({submits})"),
        ensure(
            // (A SUBMIT that found the queue full posted nothing.)
            if iwarp {
                sent >= 1 && sent <= submits
            } else {
                sent == 0
            },
            format!("{sent} fences for {submits} SUBMITs (iWARP: {iwarp})"),
        ),
    );
    // iWARP: a queue pair's READ and fence sinks come with its first
    // operation (these writes'); elsewhere there are none.
    let allocs = dev.fdinfo_value("rrdma-sink-allocs").unwrap_or(0);
    t.check(
        &format!("queue pairs allocate their sinks at their first operation ({allocs} did)"),
        ensure(
            if iwarp { allocs >= 1 } else { allocs == 0 },
            format!("{allocs} (iWARP: {iwarp})"),
        ),
    );
    // poll(2) readiness, then a read of exactly one record.
    let _ = dev.submit(&[op(rw, &local, OP_READ, 0, 0, 1, 7)]);
    let mut pfd = libc::pollfd {
        fd: dev.raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    t.check(
        "poll reports POLLIN once a completion is pending",
        if r == 1 && pfd.revents & libc::POLLIN != 0 {
            Ok(())
        } else {
            Err(format!("poll {r} revents {:#x}", pfd.revents))
        },
    );
    let mut small = [0u8; 23];
    // SAFETY: `small` is valid for its length.
    let n = unsafe { libc::read(dev.raw_fd(), small.as_mut_ptr().cast(), small.len()) };
    t.check(
        "read with a buffer shorter than a record: EINVAL",
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(EINVAL.get()) {
            Ok(())
        } else {
            Err(format!("read {n}"))
        },
    );
    let got = reap(dev, 1).unwrap_or_default();
    t.check(
        "the pending completion is the read's",
        if got.len() == 1 && got[0].user_data == 7 && got[0].status == 0 {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        },
    );
    // SAFETY: F_GETFL/F_SETFL on our own descriptor.
    unsafe {
        let fl = libc::fcntl(dev.raw_fd(), libc::F_GETFL);
        libc::fcntl(dev.raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    let mut rec = [0u8; 24];
    // SAFETY: `rec` is valid for its length.
    let n = unsafe { libc::read(dev.raw_fd(), rec.as_mut_ptr().cast(), rec.len()) };
    t.check(
        "non-blocking read with nothing pending: EAGAIN",
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(EAGAIN.get()) {
            Ok(())
        } else {
            Err(format!("read {n}"))
        },
    );
    // SAFETY: as above.
    unsafe {
        let fl = libc::fcntl(dev.raw_fd(), libc::F_GETFL);
        libc::fcntl(dev.raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    // More than the queues hold: a prefix is posted, every posted op completes.
    let many: Vec<Op> = (0..1024)
        .map(|i| op(rw, &local, OP_READ, i % 64, i % 256, 1, i))
        .collect();
    let res = dev.submit(&many);
    let posted = *res.as_ref().unwrap_or(&0);
    t.check(
        "a 1024-op batch posts a prefix",
        match res {
            Ok(n) if n > 0 && n <= 1024 => Ok(()),
            Ok(n) => Err(format!("{n} posted")),
            Err(e) => Err(e.to_string()),
        },
    );
    let comps = reap(dev, posted).unwrap_or_default();
    t.check(
        "every posted operation of the big batch completes once",
        if comps.len() == posted && comps.iter().all(|c| c.status == 0) {
            Ok(())
        } else {
            Err(format!("{} of {posted}", comps.len()))
        },
    );
}

fn bad_op_checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>, ro: &RemoteRegion<'_>) {
    let local = expect_ok(dev.create_region(4096, 8)).expect("region");
    let small = expect_ok(dev.create_region(512, 8)).expect("region");
    let good = op(rw, &local, OP_READ, 0, 0, 1, 0);
    let cases: Vec<(&str, Op, i32)> = vec![
        (
            "remote block == nblocks: ERANGE",
            Op {
                remote_block: 256,
                ..good
            },
            ERANGE.get(),
        ),
        (
            "remote range crossing the end: ERANGE",
            Op {
                remote_block: 250,
                count: 7,
                ..good
            },
            ERANGE.get(),
        ),
        (
            "local range crossing the end: ERANGE",
            Op {
                local_block: 7,
                count: 2,
                ..good
            },
            ERANGE.get(),
        ),
        ("count 0: EINVAL", Op { count: 0, ..good }, EINVAL.get()),
        (
            "remote block u64::MAX: EOVERFLOW",
            Op {
                remote_block: u64::MAX,
                ..good
            },
            EOVERFLOW.get(),
        ),
        (
            "unknown opcode: EINVAL",
            Op { opcode: 3, ..good },
            EINVAL.get(),
        ),
        ("a flag set: EINVAL", Op { flags: 1, ..good }, EINVAL.get()),
        (
            "the reserved field set: EINVAL",
            Op {
                reserved: 1,
                ..good
            },
            EINVAL.get(),
        ),
        (
            "a region handle as the remote: EINVAL",
            Op {
                remote: local.handle(),
                ..good
            },
            EINVAL.get(),
        ),
        (
            "an import handle as the local: EINVAL",
            Op {
                local: rw.handle(),
                ..good
            },
            EINVAL.get(),
        ),
        (
            "remote handle 0: ENOENT",
            Op { remote: 0, ..good },
            ENOENT.get(),
        ),
        (
            "local region of another block size: EINVAL",
            Op {
                local: small.handle(),
                ..good
            },
            EINVAL.get(),
        ),
        (
            "write to a read-only export: EPERM",
            op(ro, &local, OP_WRITE, 0, 0, 1, 0),
            EPERM.get(),
        ),
    ];
    // The same operations as io_uring commands: the same errno, in the CQE.
    let mut eng = rrdma::UringEngine::new(dev, 8).ok();
    for (name, o, e) in cases {
        t.check(&format!("RW_SYNC {name}"), expect_errno(dev.rw_sync(&o), e));
        if let Some(eng) = eng.as_mut() {
            t.check(
                &format!("io_uring {name}"),
                crate::uring::one(eng, &o)
                    .and_then(|r| ensure(r == -e, format!("res {r}, want {}", -e))),
            );
        }
    }
    t.check(
        "read of a read-only export works",
        expect_ok(dev.rw_sync(&op(ro, &local, OP_READ, 0, 0, 8, 0))).map(|_| ()),
    );
    // SUBMIT framing.
    let bytes: Vec<u8> = [good, Op { count: 0, ..good }]
        .iter()
        .flat_map(|o| o.encode())
        .collect();
    let base = Submit {
        ops: bytes.as_ptr() as u64,
        count: 1,
        op_size: Op::SIZE as u32,
        ..Submit::zeroed()
    };
    t.check(
        "SUBMIT of 0 ops: EINVAL",
        expect_errno_any(dev.submit_raw(&Submit { count: 0, ..base }), EINVAL),
    );
    t.check(
        "SUBMIT of 1025 ops: EINVAL",
        expect_errno_any(
            dev.submit_raw(&Submit {
                count: 1025,
                ..base
            }),
            EINVAL,
        ),
    );
    t.check(
        "SUBMIT with op_size 40: EINVAL",
        expect_errno_any(
            dev.submit_raw(&Submit {
                op_size: 40,
                ..base
            }),
            EINVAL,
        ),
    );
    t.check(
        "SUBMIT with a flag set: EINVAL",
        expect_errno_any(dev.submit_raw(&Submit { flags: 1, ..base }), EINVAL),
    );
    t.check(
        "SUBMIT of a NULL op array: EFAULT",
        expect_errno_any(dev.submit_raw(&Submit { ops: 0, ..base }), EFAULT),
    );
    let res = dev.submit_raw(&Submit { count: 2, ..base });
    t.check(
        "SUBMIT whose 2nd op is bad fails with its errno and index 1",
        match &res {
            Err(e) => match e
                .get_ref()
                .and_then(|x| x.downcast_ref::<rrdma::SubmitError>())
            {
                Some(s) if s.index == 1 && s.err.raw_os_error() == Some(EINVAL.get()) => Ok(()),
                other => Err(format!("{other:?}")),
            },
            Ok(s) => Err(format!("succeeded with {}", s.submitted)),
        },
    );
    t.check("... and posts nothing", quiet(dev, 300));
    // An op array running into an unmapped page half way.
    let page = rrdma::page_size() as usize;
    let map = map_anon(2 * page, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: unmapping the second page of our own mapping.
    unsafe { libc::munmap((map as usize + page) as *mut libc::c_void, page) };
    let first = map + page as u64 - Op::SIZE as u64;
    // SAFETY: `first` is inside the mapped first page.
    unsafe { std::ptr::copy_nonoverlapping(good.encode().as_ptr(), first as *mut u8, Op::SIZE) };
    t.check(
        "SUBMIT of ops running into an unmapped page: EFAULT",
        expect_errno_any(
            dev.submit_raw(&Submit {
                ops: first,
                count: 2,
                ..base
            }),
            EFAULT,
        ),
    );
    t.check("... and posts nothing", quiet(dev, 300));
}

fn export_checks(dev: &Rrdma, t: &mut Tap, conn: &Connection<'_>) {
    let region = expect_ok(dev.create_region(4096, 4)).expect("region");
    let base = ExportArg {
        region: region.handle(),
        access: ACCESS_READ,
        ..ExportArg::zeroed()
    };
    t.check(
        "export with access 0: EINVAL",
        expect_errno(dev.export_raw(&ExportArg { access: 0, ..base }), EINVAL),
    );
    t.check(
        "export write-only: EINVAL",
        expect_errno(
            dev.export_raw(&ExportArg {
                access: ACCESS_WRITE,
                ..base
            }),
            EINVAL,
        ),
    );
    t.check(
        "export of handle 0: ENOENT",
        expect_errno(dev.export_raw(&ExportArg { region: 0, ..base }), ENOENT),
    );
    t.check(
        "export restricted to a region handle: EINVAL",
        expect_errno(
            dev.export_raw(&ExportArg {
                conn: region.handle(),
                ..base
            }),
            EINVAL,
        ),
    );
    t.check(
        "unexport of an unknown token: ENOENT",
        expect_errno(dev.unexport_raw(0x1234, 0), ENOENT),
    );
    let e = dev.export(&region, Access::ReadWrite, Some(conn));
    t.check(
        "export restricted to a connection",
        e.as_ref().map(|_| ()).map_err(|e| e.to_string()),
    );
    t.check(
        "destroy of an exported region: EBUSY",
        expect_errno(dev.region_destroy_raw(region.handle(), 0), EBUSY),
    );
    if let Ok(e) = e {
        let tok = e.token();
        t.check("unexport", expect_ok(e.revoke()));
        t.check(
            "unexport twice: ENOENT",
            expect_errno(dev.unexport_raw(tok, 0), ENOENT),
        );
    }
    t.check(
        "destroy after unexport",
        expect_ok(dev.region_destroy_raw(region.handle(), 0)),
    );
    std::mem::forget(region);
}

fn thread_checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let res: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u64)
            .map(|k| {
                s.spawn(move || -> Result<(), String> {
                    let mut out = dev.create_region(4096, 32).map_err(|e| e.to_string())?;
                    let back = dev.create_region(4096, 32).map_err(|e| e.to_string())?;
                    for i in 0..25u64 {
                        let n = 1 + (i % 8) as u32;
                        let rb = k * 32 + (i * 3) % (32 - u64::from(n));
                        pattern(out.as_mut_slice(), k * 1000 + i);
                        rw.write(&out, 0, rb, n)
                            .map_err(|e| format!("write: {e}"))?;
                        rw.read(&back, 0, rb, n).map_err(|e| format!("read: {e}"))?;
                        let b = n as usize * 4096;
                        if out.as_slice()[..b] != back.as_slice()[..b] {
                            return Err(format!("thread {k} iteration {i}: data differs"));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Err("panicked".into())))
            .collect()
    });
    for (k, r) in res.into_iter().enumerate() {
        t.check(
            &format!("thread {k}: 25 write/read round trips on its own blocks"),
            r,
        );
    }
}

/// Four threads write through `rw`'s connection at once (their writes
/// share write fences on iWARP: group commit) and read each write back
/// through a second connection, another queue pair whose READs nothing
/// orders after the first one's WRITEs: an acknowledged write must already
/// be placed in the exporter's memory, which on iWARP only its fence
/// shows (a WRITE completes once sent).
fn fence_visibility_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    rw_token: u64,
    rw: &RemoteRegion<'_>,
) {
    let other = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => return t.check("a second connection", Err(e.to_string())),
    };
    let rw2 = match other.import(rw_token, T) {
        Ok(r) => r,
        Err(e) => return t.check("a second import", Err(e.to_string())),
    };
    let fences = write_fences(dev);
    let res: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u64)
            .map(|k| {
                let rw2 = &rw2;
                s.spawn(move || -> Result<(), String> {
                    let mut out = dev.create_region(4096, 16).map_err(|e| e.to_string())?;
                    let back = dev.create_region(4096, 16).map_err(|e| e.to_string())?;
                    for i in 0..50u64 {
                        let n = 1 + (i % 4) as u32;
                        let rb = 128 + k * 16 + (i * 5) % (16 - u64::from(n));
                        pattern(out.as_mut_slice(), k * 7919 + i);
                        rw.write(&out, 0, rb, n)
                            .map_err(|e| format!("write: {e}"))?;
                        rw2.read(&back, 0, rb, n)
                            .map_err(|e| format!("read: {e}"))?;
                        let b = n as usize * 4096;
                        if out.as_slice()[..b] != back.as_slice()[..b] {
                            return Err(format!(
                                "iteration {i}: blocks {rb}..{} read through the other connection differ",
                                rb + u64::from(n)
                            ));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Err("panicked".into())))
            .collect()
    });
    println!(
        "# 200 writes from 4 threads: {} write fences",
        write_fences(dev) - fences
    );
    for (k, r) in res.into_iter().enumerate() {
        t.check(
            &format!("thread {k}: 50 writes, each read back at once through another connection"),
            r,
        );
    }
}

/// Data lanes each connection should have: the `queue_pairs` module
/// parameter (0: one queue pair per online CPU), up to 16, less the
/// connection's own queue pair.
fn lanes_expected() -> u64 {
    let param = ModParam::get("queue_pairs")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    let qps = if param == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
    } else {
        param
    };
    qps.clamp(1, 16) - 1
}

/// The connection's data lanes come up (both guests load the module with
/// the same `queue_pairs`, so the peer grants all that this side offers);
/// returns how many are expected.
fn lanes_up_checks(dev: &Rrdma, t: &mut Tap) -> u64 {
    let want = lanes_expected();
    let start = std::time::Instant::now();
    let mut up = 0;
    while start.elapsed() < std::time::Duration::from_secs(10) {
        up = dev.fdinfo_value("rrdma-lanes-up").unwrap_or(0);
        if up >= want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!(
        "# data lanes: {up} up of {want} after {} ms",
        start.elapsed().as_millis()
    );
    t.check(
        &format!("the connection's {want} data lanes come up"),
        ensure(up == want, format!("{up} up")),
    );
    want
}

/// Operations submitted from several CPUs went on the data lanes too.
fn lane_ops_checks(dev: &Rrdma, t: &mut Tap, lanes: u64, before: u64) {
    let ops = dev.fdinfo_value("rrdma-lane-ops").unwrap_or(0) - before;
    println!("# operations posted on data lanes by the thread checks: {ops}");
    if lanes == 0 {
        return;
    }
    t.check(
        "threads on several CPUs post on the data lanes",
        ensure(ops > 0, "none"),
    );
}

fn many_connections(dev: &Rrdma, t: &mut Tap, peer: &str, rw_token: u64) {
    let res = (|| -> Result<(), String> {
        let mut conns = Vec::new();
        for i in 0..8 {
            conns.push(
                dev.connect(addr(peer, 7471), T)
                    .map_err(|e| format!("connect {i}: {e}"))?,
            );
        }
        let mut imports = Vec::new();
        for (i, c) in conns.iter().enumerate() {
            imports.push(
                c.import(rw_token, T)
                    .map_err(|e| format!("import {i}: {e}"))?,
            );
        }
        let mut out = dev.create_region(4096, 8).map_err(|e| e.to_string())?;
        let back = dev.create_region(4096, 8).map_err(|e| e.to_string())?;
        for (i, r) in imports.iter().enumerate() {
            pattern(out.as_mut_slice(), 77 + i as u64);
            let rb = 200 + i as u64 * 4;
            r.write(&out, 0, rb, 4)
                .map_err(|e| format!("write {i}: {e}"))?;
            // Read back through another connection than the writer's.
            let other = &imports[(i + 1) % imports.len()];
            other
                .read(&back, 0, rb, 4)
                .map_err(|e| format!("read {i}: {e}"))?;
            if out.as_slice()[..4 * 4096] != back.as_slice()[..4 * 4096] {
                return Err(format!("connection {i}: data differs"));
            }
        }
        Ok(())
    })();
    t.check(
        "8 connections at once, each writes, another reads back",
        res,
    );
}

/// On a small NIC (limit_mr=1024 on both guests): imports of the 256-block
/// export, each on a connection of its own, take 64 of the exporter's
/// registrations each (its queue pairs post nothing, so on iWARP they hold
/// no sinks) until the device has none left: that import fails with
/// ENOMEM, or that connection is refused (ECONNREFUSED: the exporter could
/// not build its queue pair); once the connections are closed the
/// registrations are back.
fn mr_limit_checks(t: &mut Tap, peer: &str, rw_token: u64) {
    let res = (|| -> Result<usize, String> {
        let dev = Rrdma::open().map_err(|e| e.to_string())?;
        let mut held = Vec::new();
        for i in 0..32 {
            let conn = match dev.connect(addr(peer, 7471), T) {
                Ok(c) => c,
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => return Ok(held.len()),
                Err(e) => return Err(format!("connect {i}: {e}")),
            };
            let imported = conn.import(rw_token, T).map(|_| ());
            match imported {
                Ok(()) => held.push(conn),
                Err(e) if e.raw_os_error() == Some(ENOMEM.get()) => return Ok(held.len()),
                Err(e) => return Err(format!("import {i}: {e}")),
            }
        }
        Err("32 imports of 64 registrations each fit in 1024".into())
    })();
    t.check(
        "imports past the exporter's limit_mr: ENOMEM (or the connection refused)",
        // At most 16 fit (1024 / 64); fewer while the connections of the
        // checks before still hold theirs (they close in the background).
        res.and_then(|n| ensure((1..=16).contains(&n), format!("{n} imports fit"))),
    );
    // The connections above are closed: their grants go with them.
    let start = Instant::now();
    let again = loop {
        let r = (|| -> io::Result<()> {
            let dev = Rrdma::open()?;
            let conn = dev.connect(addr(peer, 7471), T)?;
            conn.import(rw_token, T).map(|_| ())
        })();
        if r.is_ok() || start.elapsed() > Duration::from_secs(20) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    t.check(
        "the registrations come back when the connections close",
        again.map_err(|e| e.to_string()),
    );
}

fn close_in_flight(t: &mut Tap, peer: &str, rw_token: u64) {
    let start = Instant::now();
    let res = (|| -> io::Result<usize> {
        let dev = Rrdma::open()?;
        let conn = dev.connect(addr(peer, 7471), T)?;
        let rw = conn.import(rw_token, T)?;
        let local = dev.create_region(4096, 256)?;
        let ops: Vec<Op> = (0..512)
            .map(|i| rw.op(OP_READ, &local, i % 256, i % 256, 1, i))
            .collect();
        let n = dev.submit(&ops)?;
        // Everything drops here with operations in flight: close drains.
        drop((rw, conn, local));
        Ok(n)
    })();
    t.check(
        "close with operations in flight returns promptly",
        match res {
            Ok(n) if n > 0 && start.elapsed() < Duration::from_secs(20) => Ok(()),
            Ok(n) => Err(format!("{n} posted, took {:?}", start.elapsed())),
            Err(e) => Err(e.to_string()),
        },
    );
}

fn revoke_checks(dev: &Rrdma, t: &mut Tap, peer: &str, conn: &Connection<'_>, rw_token: u64) {
    let local = expect_ok(dev.create_region(4096, 1)).expect("region");
    let Ok(rw) = conn.import(rw_token, T) else {
        t.check("import before revoke", Err("failed".into()));
        return;
    };
    t.check("read before revoke", expect_ok(rw.read(&local, 0, 0, 1)));
    t.check(
        "the peer unexports",
        match control(peer, "unexport rw") {
            Ok(s) if s == "ok" => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    // No operation in flight while the revoke travels: one on the wire
    // would meet the invalidated key and take the connection down.
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    let mut last = Ok(());
    while start.elapsed() < T {
        last = rw.read(&local, 0, 0, 1);
        if matches!(&last, Err(e) if e.raw_os_error() == Some(EKEYREVOKED.get())) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    t.check(
        "operations after the revoke fail: EKEYREVOKED",
        expect_errno(last, EKEYREVOKED),
    );
    t.check(
        "import of the revoked token: ENOENT",
        expect_errno(conn.import(rw_token, T), ENOENT),
    );
}

/// Runs the checks against the serving peer at `peer` (an IPv4 address).
pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let (rw_token, ro_token) = match (token(peer, "rw"), token(peer, "ro")) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            t.check("the peer hands out its tokens", Err(format!("{a:?} {b:?}")));
            return;
        }
    };
    connect_checks(dev, t, peer);
    listen_checks(dev, t);
    let conn = match dev.connect(addr(peer, 7471), T) {
        Ok(c) => c,
        Err(e) => {
            t.check("connect", Err(e.to_string()));
            return;
        }
    };
    t.check("connect", Ok(()));
    let region = expect_ok(dev.create_region(4096, 1)).expect("region");
    import_checks(dev, t, &conn, rw_token, &region);
    let rw = conn.import(rw_token, T);
    t.check(
        "import read-write: geometry and access",
        match &rw {
            Ok(r) if r.block_size() == 4096 && r.nblocks() == 256 && r.writable() => Ok(()),
            Ok(r) => Err(format!(
                "{} x {} writable {}",
                r.block_size(),
                r.nblocks(),
                r.writable()
            )),
            Err(e) => Err(e.to_string()),
        },
    );
    let ro = conn.import(ro_token, T);
    t.check(
        "import read-only: not writable",
        match &ro {
            Ok(r) if !r.writable() => Ok(()),
            Ok(_) => Err("writable".into()),
            Err(e) => Err(e.to_string()),
        },
    );
    let (Ok(rw), Ok(ro)) = (rw, ro) else { return };
    println!("# rw import: max_op_blocks {}", rw.max_op_blocks());
    let lanes = lanes_up_checks(dev, t);
    // A guest emulating a small NIC (module limit_* parameters) says what
    // its queues and page lists allow.
    if let Ok(want) = std::env::var("RRDMA_MAX_OP_BLOCKS") {
        t.check(
            "max_op_blocks as the device limits allow",
            ensure(
                want.parse() == Ok(rw.max_op_blocks()),
                format!("{} (want {want})", rw.max_op_blocks()),
            ),
        );
    }
    integrity_checks(dev, t, peer, &rw);
    batch_checks(dev, t, &rw);
    crate::lossy::checks(dev, t, peer, rw_token);
    crate::sync_poll::checks(dev, t, peer, &rw);
    bad_op_checks(dev, t, &rw, &ro);
    crate::uring::checks(dev, t, peer, &rw);
    export_checks(dev, t, &conn);
    let lane_ops = dev.fdinfo_value("rrdma-lane-ops").unwrap_or(0);
    // More rounds on request (`RRDMA_ROUNDS`): an ordering bug across
    // queue pairs may show once in many.
    let rounds = std::env::var("RRDMA_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<u32>().ok())
        .unwrap_or(1);
    for _ in 0..rounds {
        thread_checks(dev, t, &rw);
        fence_visibility_checks(dev, t, peer, rw_token, &rw);
    }
    crate::overlap::checks(dev, t, &rw);
    lane_ops_checks(dev, t, lanes, lane_ops);
    many_connections(dev, t, peer, rw_token);
    close_in_flight(t, peer, rw_token);
    t.check("stale import handle after UNIMPORT: ENOENT", {
        let h = ro.handle();
        drop(ro);
        expect_errno(
            dev.rw_sync(&Op {
                remote: h,
                ..op(&rw, &region, OP_READ, 0, 0, 1, 0)
            }),
            ENOENT,
        )
    });
    if std::env::var("RRDMA_MAX_OP_BLOCKS").is_ok() {
        mr_limit_checks(t, peer, rw_token);
    }
    drop(rw);
    revoke_checks(dev, t, peer, &conn, rw_token);
    drop(conn);
    drop(region);
    // Object counts, and event counts that must have stayed 0 (timeouts,
    // reconnects); the work, fence, lane-operation, sink and ping counts
    // (`rrdma-work-*`, `rrdma-write-fences`, `rrdma-lane-ops`,
    // `rrdma-sink-allocs`, `rrdma-keepalive-pings`) only grow, pings on
    // any connection idle for the keepalive interval (15 s in the guests,
    // which the debug kernel's slow small-NIC run reaches).
    let counts: Vec<_> = dev
        .fdinfo()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| {
            !k.starts_with("rrdma-work-")
                && k != "rrdma-write-fences"
                && k != "rrdma-lane-ops"
                && k != "rrdma-sink-allocs"
                && k != "rrdma-keepalive-pings"
        })
        .collect();
    t.check(
        "after dropping everything, fdinfo counts are all zero",
        if counts.iter().all(|(_, v)| *v == 0) && !counts.is_empty() {
            Ok(())
        } else {
            Err(format!("{counts:?}"))
        },
    );
}

#[cfg(test)]
mod tests {
    use super::pattern;

    #[test]
    fn neighbouring_seeds_give_different_patterns() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..256u64 {
            let mut b = [0u8; 16];
            pattern(&mut b, seed);
            assert!(seen.insert(b), "seed {seed} repeats a pattern");
        }
    }
}
