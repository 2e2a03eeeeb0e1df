// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest`: in-guest checks of `/dev/rrdma` against the bad inputs
//! a hostile client can pass (Documentation/rrdma.rst, "Userspace ABI"),
//! printed as TAP-like lines (`ok N - name`, `not ok N - name # why`) that
//! the guest harness counts.
//!
//! Each check asserts exactly one thing. Subcommands:
//! - `abi`: ioctl framing, reserved fields, pointers, arithmetic;
//! - `devices NAME:NODETYPE...`: the named devices are listed, usable, with
//!   an active port and the given node type (`rnic` or `ib_ca`);
//! - `absent NAME...`: the named devices are not listed;
//! - `regions`: regions and their mappings (`regions.rs`);
//! - `remote PEER_IP`: connections, export/import and block operations
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
//! - `memcpy`, `memory PEER_IP`: measurements for `make bench` (`measure.rs`).

use std::io;
use std::process::ExitCode;

mod agent;
mod attack;
mod faults;
mod flood;
mod fuzz;
mod hostile;
mod keepalive;
mod lossy;
mod measure;
mod overlap;
mod param;
mod reconnect;
mod reconnect_errnos;
mod regions;
mod remote;
mod stall;
mod stalled_copies;
mod sync_poll;
mod uffd;
mod unexport;
mod uring;
mod uring_sqe;

use rrdma::abi::errno::{E2BIG, EFAULT, EINVAL, ENOTTY, EOVERFLOW};
use rrdma::abi::ioctl::{ioc, iowr, IOC_READ, IOC_WRITE};
use rrdma::abi::uapi::{self, DeviceInfo, Info, IOCTL_MAGIC};
use rrdma::Rrdma;

/// Every ioctl command of the UAPI, by name.
pub(crate) const ALL_IOCTLS: [(&str, u32); 14] = [
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
];

pub(crate) struct Tap {
    n: u32,
    failed: u32,
}

impl Tap {
    pub(crate) fn check(&mut self, name: &str, res: Result<(), String>) {
        self.n += 1;
        match res {
            Ok(()) => println!("ok {} - {name}", self.n),
            Err(why) => {
                self.failed += 1;
                println!("not ok {} - {name} # {why}", self.n);
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

/// Issues GET_INFO with a caller struct of `size` bytes (a longer struct's
/// tail given by `tail`).
fn get_info_sized(dev: &Rrdma, info: &Info, size: usize, tail: u8) -> io::Result<Vec<u8>> {
    let mut buf = vec![tail; size.max(Info::SIZE)];
    buf[..Info::SIZE].copy_from_slice(&info.encode());
    dev.ioctl_bytes(iowr(IOCTL_MAGIC, 0, size), &mut buf)?;
    Ok(buf)
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

fn abi_checks(dev: &Rrdma, t: &mut Tap) {
    let page = 4096usize;
    let z = Info::zeroed();

    t.check(
        "valid GET_INFO reports ABI version 1",
        (|| {
            let out = expect_ok(dev.get_info_raw(&z))?;
            (out.abi_version == uapi::ABI_VERSION)
                .then_some(())
                .ok_or(format!("abi_version {}", out.abi_version))
        })(),
    );
    t.check("unknown command number is ENOTTY", {
        let mut b = [0u8; Info::SIZE];
        expect_errno(
            dev.ioctl_bytes(iowr(IOCTL_MAGIC, 0x7f, Info::SIZE), &mut b),
            ENOTTY,
        )
    });
    t.check("foreign ioctl type is ENOTTY", {
        let mut b = [0u8; Info::SIZE];
        expect_errno(dev.ioctl_bytes(iowr(b'T', 0, Info::SIZE), &mut b), ENOTTY)
    });
    t.check("GET_INFO with wrong direction is ENOTTY", {
        let mut b = [0u8; Info::SIZE];
        expect_errno(
            dev.ioctl_bytes(ioc(IOC_WRITE, IOCTL_MAGIC, 0, Info::SIZE), &mut b),
            ENOTTY,
        )
        .and_then(|_| {
            expect_errno(
                dev.ioctl_bytes(ioc(IOC_READ, IOCTL_MAGIC, 0, Info::SIZE), &mut b),
                ENOTTY,
            )
        })
    });
    t.check(
        "struct shorter than version 1 is EINVAL",
        expect_errno(get_info_sized(dev, &z, Info::SIZE - 8, 0), EINVAL),
    );
    t.check(
        "zero-sized struct is EINVAL",
        expect_errno(get_info_sized(dev, &z, 0, 0), EINVAL),
    );
    t.check(
        "longer struct with zero tail is accepted",
        (|| {
            let buf = expect_ok(get_info_sized(dev, &z, Info::SIZE + 24, 0))?;
            if buf[Info::SIZE..].iter().any(|&b| b != 0) {
                return Err("tail modified".into());
            }
            let out = Info::decode(buf[..Info::SIZE].try_into().unwrap());
            (out.abi_version == uapi::ABI_VERSION)
                .then_some(())
                .ok_or("no answer".into())
        })(),
    );
    t.check(
        "longer struct with non-zero tail is E2BIG",
        expect_errno(get_info_sized(dev, &z, Info::SIZE + 24, 1), E2BIG),
    );
    t.check(
        "far longer struct (4 KiB) with non-zero last byte is E2BIG",
        {
            let mut buf = vec![0u8; 4096];
            buf[..Info::SIZE].copy_from_slice(&z.encode());
            buf[4095] = 1;
            expect_errno(dev.ioctl_bytes(iowr(IOCTL_MAGIC, 0, 4096), &mut buf), E2BIG)
        },
    );
    for bit in [0u32, 1, 7, 31] {
        t.check(
            &format!("flags bit {bit} is EINVAL"),
            expect_errno(
                dev.get_info_raw(&Info {
                    flags: 1 << bit,
                    ..z
                }),
                EINVAL,
            ),
        );
    }
    t.check(
        "reserved field is EINVAL",
        expect_errno(dev.get_info_raw(&Info { reserved: 1, ..z }), EINVAL),
    );
    t.check(
        "output fields are ignored on input",
        expect_ok(dev.get_info_raw(&Info {
            abi_version: 99,
            features: !0,
            device_count: 7,
            ..z
        }))
        .map(|_| ()),
    );
    t.check(
        "device capacity without array is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_capacity: 1,
                device_entry_size: DeviceInfo::SIZE as u32,
                ..z
            }),
            EINVAL,
        ),
    );

    let mut entries = vec![0u8; 16 * page];
    let arr = Info {
        devices: entries.as_mut_ptr() as u64,
        device_entry_size: DeviceInfo::SIZE as u32,
        device_capacity: 4,
        ..z
    };
    t.check(
        "entry size below version 1 is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_entry_size: DeviceInfo::SIZE as u32 - 8,
                ..arr
            }),
            EINVAL,
        ),
    );
    t.check(
        "entry size above 4096 is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_entry_size: 4097,
                ..arr
            }),
            EINVAL,
        ),
    );
    t.check(
        "entry size u32::MAX is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_entry_size: u32::MAX,
                ..arr
            }),
            EINVAL,
        ),
    );
    t.check(
        "array range wrapping the address space is EOVERFLOW",
        expect_errno(
            dev.get_info_raw(&Info {
                devices: u64::MAX - 64,
                ..arr
            }),
            EOVERFLOW,
        ),
    );
    t.check(
        "capacity u32::MAX at a high address is EOVERFLOW",
        expect_errno(
            dev.get_info_raw(&Info {
                devices: u64::MAX - (1 << 40),
                device_capacity: u32::MAX,
                device_entry_size: 4096,
                ..z
            }),
            EOVERFLOW,
        ),
    );

    // Pointers: the argument itself.
    // SAFETY: invalid addresses; the kernel must fail, not write.
    t.check(
        "NULL argument is EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, 0) }, EFAULT),
    );
    // SAFETY: as above.
    t.check(
        "kernel-address argument is EFAULT",
        expect_errno(
            unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, 0xffff_ffff_8100_0000) },
            EFAULT,
        ),
    );
    let ro = map_anon(page, libc::PROT_READ);
    // SAFETY: read-only page: the kernel's write back must fail.
    t.check(
        "read-only argument is EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, ro) }, EFAULT),
    );
    let none = map_anon(page, libc::PROT_NONE);
    // SAFETY: inaccessible page.
    t.check(
        "unmapped (PROT_NONE) argument is EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, none) }, EFAULT),
    );
    // Every command: a bad argument pointer is EFAULT, whatever the command
    // would have checked next.
    for (name, cmd) in ALL_IOCTLS {
        // SAFETY: invalid addresses; the kernel must fail, not write.
        t.check(
            &format!("{name}: NULL argument is EFAULT"),
            expect_errno(unsafe { dev.ioctl_raw(cmd, 0) }, EFAULT),
        );
        // SAFETY: as above.
        t.check(
            &format!("{name}: inaccessible argument is EFAULT"),
            expect_errno(unsafe { dev.ioctl_raw(cmd, none) }, EFAULT),
        );
    }
    // An argument whose first bytes are readable but whose tail runs into an
    // inaccessible page.
    let two = map_anon(2 * page, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: valid mapping of two pages, second one made inaccessible.
    unsafe { libc::mprotect((two + page as u64) as *mut _, page, libc::PROT_NONE) };
    // SAFETY: the first 16 bytes are ours; the rest faults.
    t.check(
        "argument running into an inaccessible page is EFAULT",
        expect_errno(
            unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, two + page as u64 - 16) },
            EFAULT,
        ),
    );

    // Pointers: the device array (only matters when devices exist).
    let count = dev.get_info_raw(&z).map(|i| i.device_count).unwrap_or(0);
    if count > 0 {
        t.check(
            "NULL-page device array is EFAULT",
            expect_errno(
                dev.get_info_raw(&Info {
                    devices: 4096,
                    ..arr
                }),
                EFAULT,
            ),
        );
        t.check(
            "read-only device array is EFAULT",
            expect_errno(dev.get_info_raw(&Info { devices: ro, ..arr }), EFAULT),
        );
        t.check(
            "kernel-address device array is EFAULT",
            expect_errno(
                dev.get_info_raw(&Info {
                    devices: 0xffff_ffff_8100_0000,
                    ..arr
                }),
                EFAULT,
            ),
        );
        t.check(
            "larger entry stride is zero-filled past version 1",
            (|| {
                entries.fill(0xaa);
                let stride = 256usize;
                let out = expect_ok(dev.get_info_raw(&Info {
                    device_entry_size: stride as u32,
                    devices: entries.as_mut_ptr() as u64,
                    ..arr
                }))?;
                let n = (out.device_count as usize).min(4);
                for i in 0..n {
                    let e = &entries[i * stride..(i + 1) * stride];
                    if e[DeviceInfo::SIZE..].iter().any(|&b| b != 0) {
                        return Err(format!("entry {i} tail not zeroed"));
                    }
                    if e[0] == 0 || e[0] == 0xaa {
                        return Err(format!("entry {i} has no name"));
                    }
                }
                if entries[n * stride] != 0xaa {
                    return Err("wrote past the last entry".into());
                }
                Ok(())
            })(),
        );
        t.check(
            "capacity smaller than device count writes only capacity entries",
            (|| {
                entries.fill(0xaa);
                let out = expect_ok(dev.get_info_raw(&Info {
                    device_capacity: 1,
                    devices: entries.as_mut_ptr() as u64,
                    ..arr
                }))?;
                if out.device_count != count {
                    return Err(format!("device_count {} != {count}", out.device_count));
                }
                (entries[DeviceInfo::SIZE] == 0xaa)
                    .then_some(())
                    .ok_or("wrote past capacity".into())
            })(),
        );
    }
}

fn parse_node(s: &str) -> Option<u32> {
    match s {
        "rnic" => Some(uapi::node_type::RNIC),
        "ib_ca" => Some(uapi::node_type::IB_CA),
        _ => None,
    }
}

fn device_checks(dev: &Rrdma, t: &mut Tap, specs: &[String]) {
    let report = dev.info();
    for spec in specs {
        let (name, node) = spec.split_once(':').unwrap_or((spec, ""));
        t.check(
            &format!("GET_INFO lists {name} usable, port ACTIVE, node type {node}"),
            (|| {
                let report = report
                    .as_ref()
                    .map_err(|e| format!("GET_INFO failed: {e}"))?;
                let d = report
                    .devices
                    .iter()
                    .find(|d| d.name == name)
                    .ok_or(format!("{name} not listed"))?;
                if let Some(nt) = parse_node(node) {
                    if d.node_type != nt {
                        return Err(format!("node type {}", d.node_type_name()));
                    }
                }
                if !d.usable {
                    return Err("not usable".into());
                }
                if d.port_state != uapi::port_state::ACTIVE {
                    return Err(format!("port {}", d.port_state_name()));
                }
                if d.port_count != 1 || d.link_layer != uapi::link_layer::ETHERNET {
                    return Err(format!(
                        "ports {} link {}",
                        d.port_count,
                        d.link_layer_name()
                    ));
                }
                Ok(())
            })(),
        );
    }
}

fn absent_checks(dev: &Rrdma, t: &mut Tap, names: &[String]) {
    let report = dev.info();
    for name in names {
        t.check(
            &format!("GET_INFO no longer lists {name}"),
            match &report {
                Err(e) => Err(format!("GET_INFO failed: {e}")),
                Ok(r) if r.devices.iter().any(|d| &d.name == name) => Err("still listed".into()),
                Ok(_) => Ok(()),
            },
        );
    }
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
            interval: std::time::Duration::from_millis(interval_ms.parse().unwrap_or(300)),
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
    let mut t = Tap { n: 0, failed: 0 };
    match cmd.as_str() {
        "abi" => abi_checks(&dev, &mut t),
        "devices" => device_checks(&dev, &mut t, rest),
        "absent" => absent_checks(&dev, &mut t, rest),
        "regions" => regions::checks(&dev, &mut t),
        "remote" => match rest.first() {
            Some(peer) => remote::checks(&dev, &mut t, peer),
            None => {
                eprintln!("usage: rrdma-selftest remote PEER_IP");
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
