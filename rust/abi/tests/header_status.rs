// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RRDMA_IOCTL_STATUS` in the C header matches its Rust mirror
//! (`status.rs`): sizes, offsets and constants, from a compiled probe.

use std::path::PathBuf;
use std::process::Command;

use rrdma_abi::conn::State;
use rrdma_abi::status::{self, Status, StatusConn, StatusDisk, StatusExport, StatusImport};
use rrdma_abi::uapi;

const PROBE: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include "uapi/rrdma.h"
#define F(s, f) printf(#s "." #f " %zu\n", offsetof(struct s, f))
#define C(c) printf(#c " %llu\n", (unsigned long long)(c))
int main(void)
{
	printf("rrdma_status %zu\n", sizeof(struct rrdma_status));
	F(rrdma_status, kind); F(rrdma_status, flags); F(rrdma_status, records);
	F(rrdma_status, capacity); F(rrdma_status, record_size); F(rrdma_status, count);
	F(rrdma_status, reserved);
	printf("rrdma_status_conn %zu\n", sizeof(struct rrdma_status_conn));
	F(rrdma_status_conn, id); F(rrdma_status_conn, pid); F(rrdma_status_conn, uid);
	F(rrdma_status_conn, peer); F(rrdma_status_conn, state); F(rrdma_status_conn, flags);
	F(rrdma_status_conn, lanes); F(rrdma_status_conn, reconnects);
	F(rrdma_status_conn, in_flight); F(rrdma_status_conn, failed);
	F(rrdma_status_conn, imports); F(rrdma_status_conn, grants);
	F(rrdma_status_conn, device); F(rrdma_status_conn, version);
	printf("rrdma_status_export %zu\n", sizeof(struct rrdma_status_export));
	F(rrdma_status_export, file); F(rrdma_status_export, pid); F(rrdma_status_export, uid);
	F(rrdma_status_export, export); F(rrdma_status_export, access);
	F(rrdma_status_export, block_size); F(rrdma_status_export, flags);
	F(rrdma_status_export, nblocks); F(rrdma_status_export, importer);
	F(rrdma_status_export, importer_peer);
	printf("rrdma_status_import %zu\n", sizeof(struct rrdma_status_import));
	F(rrdma_status_import, conn); F(rrdma_status_import, pid); F(rrdma_status_import, uid);
	F(rrdma_status_import, access); F(rrdma_status_import, flags);
	F(rrdma_status_import, block_size); F(rrdma_status_import, in_flight);
	F(rrdma_status_import, nblocks); F(rrdma_status_import, peer);
	printf("rrdma_status_disk %zu\n", sizeof(struct rrdma_status_disk));
	F(rrdma_status_disk, index); F(rrdma_status_disk, flags); F(rrdma_status_disk, conn);
	F(rrdma_status_disk, block_size); F(rrdma_status_disk, state);
	F(rrdma_status_disk, nblocks); F(rrdma_status_disk, reconnects);
	F(rrdma_status_disk, reserved);
	C(RRDMA_IOCTL_STATUS); C(RRDMA_FEATURE_STATUS); C(RRDMA_FEATURE_CAPS);
	C(RRDMA_STATUS_CONNS); C(RRDMA_STATUS_EXPORTS); C(RRDMA_STATUS_IMPORTS);
	C(RRDMA_STATUS_DISKS);
	C(RRDMA_STATUS_CONN_SIZE_VER0); C(RRDMA_STATUS_EXPORT_SIZE_VER0);
	C(RRDMA_STATUS_IMPORT_SIZE_VER0); C(RRDMA_STATUS_DISK_SIZE_VER0);
	C(RRDMA_STATUS_CONN_ACTIVE); C(RRDMA_STATUS_CONN_RECONNECT); C(RRDMA_STATUS_CONN_DISK);
	C(RRDMA_STATUS_EXPORT_ONE_CONN); C(RRDMA_STATUS_IMPORT_REVOKED);
	C(RRDMA_STATUS_IMPORT_STALE); C(RRDMA_STATUS_DISK_RO);
	C(RRDMA_CONN_STATE_RESOLVING); C(RRDMA_CONN_STATE_ROUTE);
	C(RRDMA_CONN_STATE_CONNECTING); C(RRDMA_CONN_STATE_ACCEPTING);
	C(RRDMA_CONN_STATE_CONNECTED); C(RRDMA_CONN_STATE_CLOSING);
	C(RRDMA_CONN_STATE_CLOSED); C(RRDMA_CONN_STATE_WAITING);
	return 0;
}
"#;

#[test]
fn status_header_matches_rust_mirror() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("rrdma-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("probe.c"), dir.join("probe"));
    std::fs::write(&src, PROBE).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args(["-std=c99", "-Wall", "-Werror", "-pedantic", "-I"])
        .arg(repo.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "the UAPI header does not compile");
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let got: std::collections::HashMap<&str, u64> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    std::fs::remove_dir_all(&dir).ok();

    macro_rules! check {
        ($c:literal, $t:ty, [$($f:ident),*]) => {
            assert_eq!(got[$c], <$t>::SIZE as u64, "{}", $c);
            $(assert_eq!(
                got[concat!($c, ".", stringify!($f))],
                std::mem::offset_of!($t, $f) as u64,
                "{}.{}", $c, stringify!($f)
            );)*
        };
    }
    check!(
        "rrdma_status",
        Status,
        [kind, flags, records, capacity, record_size, count, reserved]
    );
    check!(
        "rrdma_status_conn",
        StatusConn,
        [
            id, pid, uid, peer, state, flags, lanes, reconnects, in_flight, failed, imports,
            grants, device, version
        ]
    );
    check!(
        "rrdma_status_export",
        StatusExport,
        [
            file,
            pid,
            uid,
            export,
            access,
            block_size,
            flags,
            nblocks,
            importer,
            importer_peer
        ]
    );
    check!(
        "rrdma_status_import",
        StatusImport,
        [conn, pid, uid, access, flags, block_size, in_flight, nblocks, peer]
    );
    check!(
        "rrdma_status_disk",
        StatusDisk,
        [index, flags, conn, block_size, state, nblocks, reconnects, reserved]
    );
    let consts: [(&str, u64); 19] = [
        ("RRDMA_IOCTL_STATUS", u64::from(status::IOCTL_STATUS)),
        ("RRDMA_FEATURE_STATUS", uapi::FEATURE_STATUS),
        ("RRDMA_FEATURE_CAPS", uapi::FEATURE_CAPS),
        ("RRDMA_STATUS_CONNS", status::STATUS_CONNS.into()),
        ("RRDMA_STATUS_EXPORTS", status::STATUS_EXPORTS.into()),
        ("RRDMA_STATUS_IMPORTS", status::STATUS_IMPORTS.into()),
        ("RRDMA_STATUS_DISKS", status::STATUS_DISKS.into()),
        ("RRDMA_STATUS_CONN_SIZE_VER0", StatusConn::SIZE as u64),
        ("RRDMA_STATUS_EXPORT_SIZE_VER0", StatusExport::SIZE as u64),
        ("RRDMA_STATUS_IMPORT_SIZE_VER0", StatusImport::SIZE as u64),
        ("RRDMA_STATUS_DISK_SIZE_VER0", StatusDisk::SIZE as u64),
        (
            "RRDMA_STATUS_CONN_ACTIVE",
            status::STATUS_CONN_ACTIVE.into(),
        ),
        (
            "RRDMA_STATUS_CONN_RECONNECT",
            status::STATUS_CONN_RECONNECT.into(),
        ),
        ("RRDMA_STATUS_CONN_DISK", status::STATUS_CONN_DISK.into()),
        (
            "RRDMA_STATUS_EXPORT_ONE_CONN",
            status::STATUS_EXPORT_ONE_CONN.into(),
        ),
        (
            "RRDMA_STATUS_IMPORT_REVOKED",
            status::STATUS_IMPORT_REVOKED.into(),
        ),
        (
            "RRDMA_STATUS_IMPORT_STALE",
            status::STATUS_IMPORT_STALE.into(),
        ),
        ("RRDMA_STATUS_DISK_RO", status::STATUS_DISK_RO.into()),
        ("RRDMA_CONN_STATE_CONNECTED", State::Connected.code().into()),
    ];
    for (name, want) in consts {
        assert_eq!(got[name], want, "{name}");
    }
    let states = [
        ("RRDMA_CONN_STATE_RESOLVING", State::Resolving),
        ("RRDMA_CONN_STATE_ROUTE", State::RoutePending),
        ("RRDMA_CONN_STATE_CONNECTING", State::Connecting),
        ("RRDMA_CONN_STATE_ACCEPTING", State::Accepting),
        ("RRDMA_CONN_STATE_CONNECTED", State::Connected),
        (
            "RRDMA_CONN_STATE_CLOSING",
            State::Closing {
                error: None,
                retry: false,
            },
        ),
        ("RRDMA_CONN_STATE_CLOSED", State::Closed { error: None }),
        (
            "RRDMA_CONN_STATE_WAITING",
            State::Waiting {
                error: rrdma_abi::errno::ETIMEDOUT,
            },
        ),
    ];
    for (name, s) in states {
        assert_eq!(got[name], u64::from(s.code()), "{name}");
    }
}
