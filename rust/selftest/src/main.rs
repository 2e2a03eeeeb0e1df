// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest`: in-guest checks of `/dev/rrdma` against the bad inputs
//! a hostile client can pass (Documentation/rrdma.rst, "Userspace ABI"),
//! printed as TAP-like lines (`ok N - name`, `not ok N - name # why`) that
//! the guest harness counts.
//!
//! Each check asserts exactly one thing. Subcommands:
//! - `abi`: ioctl framing, reserved fields, pointers, arithmetic (`abi.rs`);
//! - `devices NAME:NODETYPE...`: the named devices are listed, usable, with
//!   an active port and the given node type (`rnic` or `ib_ca`);
//! - `absent NAME...`: the named devices are not listed (both `devices.rs`);
//! - `regions`: regions and their mappings (`regions/`);
//! - `remote PEER_IP [quick]`: connections, export/import and block operations
//!   against a peer running `rrdma serve` (`remote/`);
//! - `sync-poll PEER_IP`: `remote`'s busy-polling checks alone
//!   (`sync_poll.rs`; tests/guest/remote.sh's argument `PROVIDER,sync-poll`);
//! - `attack PEER_IP SELF_IP PROVIDER [quick]`: the faults of an outside
//!   attack run (`quick`: small transfers and longer timer intervals, for
//!   debug kernels): exporter-side revoke and device loss under load,
//!   refused calls, stalled user copies, concurrency, keepalive and
//!   reconnect (`attack/`);
//! - `keepalive PEER_IP [quick]`, `reconnect PEER_IP [quick]`, `hostile
//!   PEER_IP PROVIDER`, `stall PEER_IP PROVIDER`, `stalled-copies PEER_IP
//!   PROVIDER`, `unexport PEER_IP PROVIDER`: those parts alone
//!   (`keepalive.rs`, `reconnect.rs`, `hostile/`, `stall.rs`,
//!   `stalled_copies.rs`, `unexport.rs`; with tests/guest/attack.sh's
//!   argument `PROVIDER,PART`);
//! - `flood PEER_IP PROVIDER [SECONDS]`: connect, import and disconnect
//!   cycles while the exporter's accepts fail at each point, then a
//!   connection that must still work (`flood.rs`; tests/guest/attack.sh's
//!   argument `PROVIDER,flood[,SECONDS]`);
//! - `agent PORT DEV PROVIDER`: removes and re-adds DEV on request, for
//!   `attack` on the peer (`agent.rs`);
//! - `hold-get-info RELEASE_FILE`: a `GET_INFO` stalled on a userfaultfd
//!   page until `RELEASE_FILE` exists (`uffd.rs`);
//! - `faults PEER_IP PROVIDER SECONDS [quick] [KEY...]`: the fault suite
//!   against `rrdma serve` and the agent on the peer: a checksummed
//!   workload through network, host, process, device and module faults,
//!   with a table of what each did (`faults/`); `faults-load ...` is its
//!   workload process;
//! - `fuzz SEED SECONDS THREADS ADDR...`: random multi-threaded call
//!   sequences with valid, stale, foreign and garbage arguments, connecting
//!   to this machine's `ADDR`s (`fuzz/`);
//! - `blk PEER_IP [quick]`: rrdma-blk's bad, foreign, stale and racing arguments;
//!   `touch-pages MIB` (every page written and checked) and `pin-memory
//!   MIB` (locked until killed): tests/guest/blk.sh's swap workloads
//!   (`blk.rs`);
//! - `memcpy`, `memory PEER_IP`: measurements for `make bench` (`measure.rs`);
//! - `scale SELF_IP MAX CONNS [quick]` and `fanout SELF_IP PEERS [quick]`: how cost grows
//!   with what one file holds, and with the exporters one initiator uses
//!   (`scale.rs`, `fanout.rs`; tests/guest/scale.sh).

use std::io;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod abi;
mod affinity;
mod agent;
mod attack;
mod blk;
mod caps;
mod child;
mod devices;
mod fanout;
mod faults;
mod flood;
mod fuzz;
mod hostile;
mod keepalive;
mod lossy;
mod measure;
mod overlap;
mod param;
mod passive_lanes;
mod quick;
mod reconnect;
mod reconnect_errnos;
mod regions;
mod remote;
mod scale;
mod stall;
mod stalled_copies;
mod status;
mod sync_poll;
mod uffd;
mod unexport;
mod uring;
mod uring_sqe;

use abi::abi_checks;
use devices::{absent_checks, device_checks};
use quick::quick_arg;
use rrdma::abi::uapi;
use rrdma::Rrdma;

/// Every ioctl command of the UAPI, by name.
pub(crate) const ALL_IOCTLS: [(&str, u32); 17] = [
    ("GET_INFO", uapi::IOCTL_GET_INFO),
    ("REGION_CREATE", uapi::IOCTL_REGION_CREATE),
    ("REGION_DESTROY", uapi::IOCTL_REGION_DESTROY),
    ("LISTEN", uapi::IOCTL_LISTEN),
    ("ACCEPT", uapi::IOCTL_ACCEPT),
    ("CONNECT", uapi::IOCTL_CONNECT),
    ("DISCONNECT", uapi::IOCTL_DISCONNECT),
    ("EXPORT", uapi::IOCTL_EXPORT),
    ("UNEXPORT", uapi::IOCTL_UNEXPORT),
    ("IMPORT", uapi::IOCTL_IMPORT),
    ("UNIMPORT", uapi::IOCTL_UNIMPORT),
    ("UNLISTEN", uapi::IOCTL_UNLISTEN),
    ("SUBMIT", uapi::IOCTL_SUBMIT),
    ("RW_SYNC", uapi::IOCTL_RW_SYNC),
    ("REGION_REGISTER", uapi::IOCTL_REGION_REGISTER),
    ("BLK_MAP", rrdma::abi::blkdev::IOCTL_BLK_MAP),
    ("BLK_UNMAP", rrdma::abi::blkdev::IOCTL_BLK_UNMAP),
];

pub(crate) struct Tap {
    n: u32,
    failed: u32,
    /// When the previous result was printed (or the run started).
    last: Instant,
}

/// A check that took at least this long since the previous result gets a
/// `# ` line saying so (the console log shows where a run's time goes).
const SLOW_CHECK: Duration = Duration::from_secs(10);

impl Tap {
    fn new() -> Self {
        Tap {
            n: 0,
            failed: 0,
            last: Instant::now(),
        }
    }

    /// The result number of the next check; a `# ` line first when the
    /// time since the previous result reached `SLOW_CHECK`.
    fn next(&mut self, name: &str) -> u32 {
        let took = self.last.elapsed();
        if took >= SLOW_CHECK {
            println!("# {:.1} s to this result: {name}", took.as_secs_f64());
        }
        self.last = Instant::now();
        self.n += 1;
        self.n
    }

    /// A check that cannot run here, and why (TAP's `# SKIP`).
    pub(crate) fn skip(&mut self, name: &str, why: &str) {
        let n = self.next(name);
        println!("ok {n} - {name} # SKIP {why}");
    }

    pub(crate) fn check(&mut self, name: &str, res: Result<(), String>) {
        let n = self.next(name);
        match res {
            Ok(()) => println!("ok {n} - {name}"),
            Err(why) => {
                self.failed += 1;
                println!("not ok {n} - {name} # {why}");
            }
        }
    }
}

/// `Ok` if `cond` holds, else the reason `why`.
pub(crate) fn ensure(cond: bool, why: impl Into<String>) -> Result<(), String> {
    cond.then_some(()).ok_or_else(|| why.into())
}

/// Expects `res` to fail with `errno`.
pub(crate) fn expect_errno<T>(res: io::Result<T>, errno: impl Into<i32>) -> Result<(), String> {
    let errno = errno.into();
    match res {
        Ok(_) => Err(format!("succeeded, expected errno {errno}")),
        Err(e) if e.raw_os_error() == Some(errno) => Ok(()),
        Err(e) => Err(format!("got {e}, expected errno {errno}")),
    }
}

pub(crate) fn expect_ok<T>(res: io::Result<T>) -> Result<T, String> {
    res.map_err(|e| format!("failed: {e}"))
}

/// Maps `len` anonymous bytes with `prot`, returning the address.
pub(crate) fn map_anon(len: usize, prot: i32) -> u64 {
    // SAFETY: an anonymous private mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(p != libc::MAP_FAILED, "mmap failed");
    p as u64
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: rrdma-selftest abi | devices NAME:NODE... | absent NAME... | regions");
        return ExitCode::from(2);
    };
    if cmd == "memcpy" || cmd == "memory" {
        let res = match (cmd.as_str(), rest.first()) {
            ("memcpy", _) => measure::memcpy(),
            ("memory", Some(peer)) => measure::memory(peer),
            _ => {
                eprintln!("usage: rrdma-selftest memory PEER_IP");
                return ExitCode::from(2);
            }
        };
        return match res {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rrdma-selftest {cmd}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if cmd == "touch-pages" || cmd == "pin-memory" {
        let run = match cmd.as_str() {
            "touch-pages" => blk::touch_pages,
            _ => blk::pin_memory,
        };
        return match rest.first().and_then(|m| m.parse().ok()) {
            Some(mib) => match run(mib) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("rrdma-selftest {cmd}: {e}");
                    ExitCode::FAILURE
                }
            },
            None => {
                eprintln!("usage: rrdma-selftest {cmd} MIB");
                ExitCode::from(2)
            }
        };
    }
    if cmd == "udp-echo" || cmd == "udp-ping" {
        let res = match (cmd.as_str(), rest) {
            ("udp-echo", [port]) => measure::udp_echo(port),
            ("udp-ping", [peer, size, count]) => match (size.parse(), count.parse()) {
                (Ok(size), Ok(count)) => measure::udp_ping(peer, size, count),
                _ => Err(std::io::Error::other("SIZE and COUNT are numbers")),
            },
            _ => {
                eprintln!("usage: rrdma-selftest udp-echo PORT | udp-ping PEER:PORT SIZE COUNT");
                return ExitCode::from(2);
            }
        };
        return match res {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rrdma-selftest {cmd}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if cmd == "agent" {
        let [port, dev, prov] = rest else {
            eprintln!("usage: rrdma-selftest agent PORT DEV PROVIDER");
            return ExitCode::from(2);
        };
        return ExitCode::from(agent::run(port, dev, prov) as u8);
    }
    if cmd == "faults-load" {
        let [path, peer, conns, threads, blocks, interval_ms] = rest else {
            eprintln!(
                "usage: rrdma-selftest faults-load STATE PEER CONNS THREADS BLOCKS INTERVAL_MS"
            );
            return ExitCode::from(2);
        };
        let load = faults::Load {
            peer: peer.clone(),
            conns: conns.parse().unwrap_or(1),
            threads: threads.parse().unwrap_or(1),
            blocks: blocks.parse().unwrap_or(16),
            interval: Duration::from_millis(interval_ms.parse().unwrap_or(300)),
        };
        return match faults::load(std::path::Path::new(path), &load) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("# load: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if cmd == "hold-get-info" {
        let Some(release) = rest.first() else {
            eprintln!("usage: rrdma-selftest hold-get-info RELEASE_FILE");
            return ExitCode::from(2);
        };
        return ExitCode::from(uffd::hold_get_info(std::path::Path::new(release)) as u8);
    }
    let dev = match Rrdma::open() {
        Ok(d) => d,
        Err(e) => {
            println!("not ok 1 - open /dev/rrdma # {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut t = Tap::new();
    match cmd.as_str() {
        "abi" => abi_checks(&dev, &mut t),
        "devices" => device_checks(&dev, &mut t, rest),
        "absent" => absent_checks(&dev, &mut t, rest),
        "regions" => regions::checks(&dev, &mut t),
        "remote" => match quick_arg(rest, 1) {
            Some(quick) => remote::checks(&dev, &mut t, &rest[0], quick),
            None => {
                eprintln!("usage: rrdma-selftest remote PEER_IP [quick]");
                return ExitCode::from(2);
            }
        },
        "attack" => match rest {
            [peer, me, prov] => attack::checks(&dev, &mut t, peer, me, prov, false),
            [peer, me, prov, q] if q == "quick" => {
                attack::checks(&dev, &mut t, peer, me, prov, true)
            }
            _ => {
                eprintln!("usage: rrdma-selftest attack PEER_IP SELF_IP PROVIDER [quick]");
                return ExitCode::from(2);
            }
        },
        "fanout" => match (quick_arg(rest, 2), rest.get(1).map(|p| p.parse::<usize>())) {
            (Some(quick), Some(Ok(peers))) if peers >= 1 => {
                fanout::checks(&dev, &mut t, &rest[0], peers, quick)
            }
            _ => {
                eprintln!("usage: rrdma-selftest fanout SELF_IP PEERS [quick]");
                return ExitCode::from(2);
            }
        },
        "scale" => match (
            quick_arg(rest, 3),
            rest.get(1).map(|m| m.parse()),
            rest.get(2).map(|c| c.parse()),
        ) {
            (Some(quick), Some(Ok(max)), Some(Ok(conns))) => {
                // Its own file, closed before the last check.
                match Rrdma::open() {
                    Ok(own) => scale::checks(&own, &mut t, &rest[0], max, conns, quick),
                    Err(e) => t.check("scale: open", Err(e.to_string())),
                }
                passive_lanes::checks(&mut t, &rest[0]);
                t.check(
                    "scale: the file closed, nothing of it left",
                    scale::nothing_left(&dev),
                );
            }
            _ => {
                eprintln!("usage: rrdma-selftest scale SELF_IP MAX CONNS [quick]");
                return ExitCode::from(2);
            }
        },
        "caps" => match rest {
            [me] => caps::checks(&mut t, me),
            _ => {
                eprintln!("usage: rrdma-selftest caps SELF_IP");
                return ExitCode::from(2);
            }
        },
        "status" => match rest {
            [peer, me] => status::checks(&dev, &mut t, peer, me),
            _ => {
                eprintln!("usage: rrdma-selftest status PEER_IP SELF_IP (with rrdmab0 mapped)");
                return ExitCode::from(2);
            }
        },
        "blk" => match quick_arg(rest, 1) {
            Some(quick) => blk::checks(&dev, &mut t, &rest[0], quick),
            None => {
                eprintln!("usage: rrdma-selftest blk PEER_IP [quick]");
                return ExitCode::from(2);
            }
        },
        "sync-poll" => match rest.first() {
            Some(peer) => sync_poll::run(&dev, &mut t, peer),
            None => {
                eprintln!("usage: rrdma-selftest sync-poll PEER_IP");
                return ExitCode::from(2);
            }
        },
        "stalled-copies" => match rest {
            [peer, _prov] => stalled_copies::run(&dev, &mut t, peer),
            _ => {
                eprintln!("usage: rrdma-selftest stalled-copies PEER_IP PROVIDER");
                return ExitCode::from(2);
            }
        },
        "stall" => match rest {
            [peer, prov] => stall::checks(&dev, &mut t, peer, prov),
            _ => {
                eprintln!("usage: rrdma-selftest stall PEER_IP PROVIDER");
                return ExitCode::from(2);
            }
        },
        "flood" => match rest {
            [peer, prov] => flood::checks(&mut t, peer, prov, 40),
            [peer, prov, secs] => flood::checks(&mut t, peer, prov, secs.parse().unwrap_or(40)),
            _ => {
                eprintln!("usage: rrdma-selftest flood PEER_IP PROVIDER [SECONDS]");
                return ExitCode::from(2);
            }
        },
        "unexport" => match rest {
            [peer, _prov] => unexport::run(&dev, &mut t, peer),
            _ => {
                eprintln!("usage: rrdma-selftest unexport PEER_IP PROVIDER");
                return ExitCode::from(2);
            }
        },
        "hostile" => match rest {
            [peer, prov] => hostile::checks(&dev, &mut t, peer, prov),
            _ => {
                eprintln!("usage: rrdma-selftest hostile PEER_IP PROVIDER");
                return ExitCode::from(2);
            }
        },
        "keepalive" => match rest {
            [peer] => keepalive::checks(&dev, &mut t, peer, false),
            [peer, q] if q == "quick" => keepalive::checks(&dev, &mut t, peer, true),
            _ => {
                eprintln!("usage: rrdma-selftest keepalive PEER_IP [quick]");
                return ExitCode::from(2);
            }
        },
        "reconnect" => match rest {
            [peer] => reconnect::checks(&dev, &mut t, peer, false),
            [peer, q] if q == "quick" => reconnect::checks(&dev, &mut t, peer, true),
            _ => {
                eprintln!("usage: rrdma-selftest reconnect PEER_IP [quick]");
                return ExitCode::from(2);
            }
        },
        "faults" => match rest {
            [peer, prov, secs, more @ ..] => {
                let quick = more.first().is_some_and(|q| q == "quick");
                let keys = &more[usize::from(quick)..];
                let secs = secs.parse().unwrap_or(4);
                faults::run(&dev, &mut t, peer, prov, secs, quick, keys)
            }
            _ => {
                eprintln!("usage: rrdma-selftest faults PEER_IP PROVIDER SECONDS [quick] [KEY...]");
                return ExitCode::from(2);
            }
        },
        "fuzz" => match rest {
            [seed, secs, threads, addrs @ ..] => {
                let seed = if seed == "random" {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(1, |d| d.as_nanos() as u64)
                } else {
                    seed.parse().unwrap_or(1)
                };
                let secs = secs.parse().unwrap_or(10);
                let threads = threads.parse().unwrap_or(4).max(1);
                fuzz::run(&mut t, seed, secs, threads, addrs)
            }
            _ => {
                eprintln!("usage: rrdma-selftest fuzz SEED|random SECONDS THREADS ADDR...");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("unknown subcommand {cmd}");
            return ExitCode::from(2);
        }
    }
    if t.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
