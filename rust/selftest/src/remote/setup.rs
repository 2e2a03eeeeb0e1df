// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The arguments of CONNECT, LISTEN, IMPORT and EXPORT against a serving
//! peer: each bad one refused with its errno.

use std::time::Duration;

use rrdma::abi::errno::{EAFNOSUPPORT, EBUSY, ECONNREFUSED, EINVAL, ENOENT};
use rrdma::abi::uapi::{
    Addr, Connect, Export as ExportArg, Import, Listen, ACCESS_READ, ACCESS_WRITE, AF_INET,
    CONNECT_NO_KEEPALIVE,
};
use rrdma::{to_addr, Access, Connection, Region, Rrdma};

use super::peer::{addr, T};
use crate::{expect_errno, expect_ok, Tap};

pub(super) fn connect_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
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

pub(super) fn listen_checks(dev: &Rrdma, t: &mut Tap) {
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

pub(super) fn import_checks<'a>(
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

pub(super) fn export_checks(dev: &Rrdma, t: &mut Tap, conn: &Connection<'_>) {
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
