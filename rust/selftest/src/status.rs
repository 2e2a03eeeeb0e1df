// SPDX-License-Identifier: GPL-2.0

//! `rrdma-selftest status PEER SELF`: `RRDMA_IOCTL_STATUS` against
//! `rrdma serve` on PEER, run while a disk is mapped (tests/guest/blk.sh):
//! - refusals: an unknown kind, flags, a record size below the first
//!   version, a capacity without an array;
//! - count only (capacity 0), and a longer record than the kernel's: the
//!   kernel fills its part and zeroes the rest;
//! - this process's connection and import are there, with its pid, the
//!   peer, the state and the import count; the disk and its connection
//!   too;
//! - the exporter (through serve's control channel) shows its export
//!   imported twice from SELF (the disk's connection and this one), over
//!   accepted connections with a grant each;
//! - a child that dropped root (uid 65534) and opened its own file sees
//!   its own export and the disks, and nothing of root's files.

use rrdma::abi::status::{Status, StatusConn, STATUS_CONNS};
use rrdma::{Access, Rrdma, StatusReport};

use crate::remote::{addr, control, token, T};
use crate::{ensure, expect_errno, Tap};

const EINVAL: i32 = 22;

fn refusals(dev: &Rrdma) -> Result<(), String> {
    let mut buf = [0u8; 4096];
    let req = |kind, flags, records, capacity, record_size| Status {
        kind,
        flags,
        records,
        capacity,
        record_size,
        ..Status::zeroed()
    };
    let p = buf.as_mut_ptr() as u64;
    expect_errno(dev.status_raw(&req(0, 0, 0, 0, 0)), EINVAL)
        .map_err(|e| format!("kind 0: {e}"))?;
    expect_errno(dev.status_raw(&req(9, 0, 0, 0, 0)), EINVAL)
        .map_err(|e| format!("kind 9: {e}"))?;
    expect_errno(dev.status_raw(&req(STATUS_CONNS, 1, 0, 0, 0)), EINVAL)
        .map_err(|e| format!("flags: {e}"))?;
    expect_errno(dev.status_raw(&req(STATUS_CONNS, 0, p, 1, 87)), EINVAL)
        .map_err(|e| format!("record size 87: {e}"))?;
    expect_errno(dev.status_raw(&req(STATUS_CONNS, 0, 0, 1, 88)), EINVAL)
        .map_err(|e| format!("capacity without array: {e}"))
}

/// Count only, then one record at a stride of 128: bytes 88..128 zeroed.
fn stride(dev: &Rrdma) -> Result<(), String> {
    let n = dev
        .status_raw(&Status {
            kind: STATUS_CONNS,
            ..Status::zeroed()
        })
        .map_err(|e| format!("count: {e}"))?
        .count;
    ensure(
        n >= 2,
        format!("{n} connections counted, expected this one and the disk's"),
    )?;
    let mut buf = [0xffu8; 256];
    let out = dev
        .status_raw(&Status {
            kind: STATUS_CONNS,
            records: buf.as_mut_ptr() as u64,
            capacity: 1,
            record_size: 128,
            ..Status::zeroed()
        })
        .map_err(|e| format!("one record: {e}"))?;
    ensure(out.count == n, format!("count {} then {n}", out.count))?;
    ensure(
        buf[StatusConn::SIZE..128].iter().all(|&b| b == 0),
        "the tail past the kernel's record is not zeroed",
    )?;
    ensure(
        buf[128..].iter().all(|&b| b == 0xff),
        "written past the capacity",
    )?;
    let c = StatusConn::decode(buf[..StatusConn::SIZE].try_into().expect("size"));
    ensure(c.id != 0 && c.state != 0, format!("an empty record: {c:?}"))
}

fn own_objects(r: &StatusReport, peer: &str) -> Result<u64, String> {
    let me = std::process::id();
    let want = addr(peer, 7471);
    let c = r
        .connections
        .iter()
        .find(|c| c.pid == me)
        .ok_or_else(|| format!("no connection of pid {me}: {:?}", r.connections))?;
    ensure(
        c.peer == Some(want) && c.state == "connected" && c.active && c.imports == 1 && !c.disk,
        format!("this connection: {c:?}"),
    )?;
    let i = r
        .imports
        .iter()
        .find(|i| i.pid == me)
        .ok_or_else(|| format!("no import of pid {me}: {:?}", r.imports))?;
    ensure(
        i.conn == c.id && i.access == "rw" && i.nblocks > 0 && !i.revoked,
        format!("this import: {i:?}"),
    )?;
    let d = r
        .disks
        .iter()
        .find(|d| d.name == "rrdmab0")
        .ok_or_else(|| format!("no rrdmab0: {:?}", r.disks))?;
    let dc = r
        .connections
        .iter()
        .find(|x| x.id == d.conn)
        .ok_or_else(|| format!("no connection {} of the disk", d.conn))?;
    ensure(
        d.state == "connected" && dc.disk && dc.pid == 0 && dc.peer == Some(want) && dc.reconnect,
        format!("the disk {d:?}, its connection {dc:?}"),
    )?;
    Ok(c.id)
}

/// The exporter's view: its export imported from `me` twice (the disk's
/// connection and this process's), over accepted connections with grants.
fn exporter_view(peer: &str, me: &str) -> Result<(), String> {
    let json = control(peer, "status").map_err(|e| format!("control: {e}"))?;
    let from_me = json.matches(&format!(",\"{me}:")).count();
    ensure(
        json.contains("\"importers\":[[") && from_me >= 2,
        format!("not 2 importers at {me} ({from_me}): {json}"),
    )?;
    ensure(
        json.contains("\"active\":false") && json.contains("\"grants\":1"),
        format!("no accepted connection with a grant: {json}"),
    )
}

/// A child as uid 65534 that opened its own file and exported a region:
/// it sees its export (its pid and uid) and the disks, and nothing of
/// root's files (the parent's export, root's connections).
fn unprivileged(dev: &Rrdma) -> Result<(), String> {
    let region = dev
        .create_region(4096, 1)
        .map_err(|e| format!("region: {e}"))?;
    let _export = dev
        .export(&region, Access::ReadOnly, None)
        .map_err(|e| format!("export: {e}"))?;
    let parent = std::process::id();
    // The child opens /dev/rrdma as itself.
    crate::child::open_to_all(|| {
        crate::child::unprivileged(
            1 << 20,
            || Some(()),
            |()| {
                let Ok(own) = Rrdma::open() else { return 5 };
                let Ok(r) = own.create_region(4096, 1) else {
                    return 6;
                };
                let Ok(_e) = own.export(&r, Access::ReadOnly, None) else {
                    return 7;
                };
                let Ok(rep) = own.status() else { return 1 };
                let me = std::process::id();
                if rep.connections.iter().any(|c| !c.disk)
                    || !rep.imports.iter().all(|i| i.pid == 0)
                    || rep.exports.iter().any(|e| e.pid == parent)
                {
                    return 2;
                }
                if !rep.disks.iter().any(|d| d.name == "rrdmab0") {
                    return 3;
                }
                if !rep
                    .exports
                    .iter()
                    .any(|e| e.pid == me && e.uid == 65534 && e.nblocks == 1)
                {
                    return 4;
                }
                0
            },
            "1: STATUS failed, 2: root's objects seen, 3: no disk, 4: its own export not seen, \
         5-7: open, region or export failed",
        )
    })
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, me: &str) {
    t.check("status: refusals", refusals(dev));
    let conn = match token(peer, "rw")
        .map_err(|e| e.to_string())
        .and_then(|tok| {
            let c = dev
                .connect(addr(peer, 7471), T)
                .map_err(|e| e.to_string())?;
            let i = c.import(tok, T).map_err(|e| e.to_string())?;
            Ok((c, i))
        }) {
        Ok(c) => c,
        Err(e) => {
            t.check("status: connect and import", Err(e));
            return;
        }
    };
    t.check(
        "status: count only; a longer record's tail zeroed",
        stride(dev),
    );
    let report = dev.status().map_err(|e| e.to_string());
    t.check(
        "status: this connection, its import, the disk and its connection",
        report.and_then(|r| own_objects(&r, peer).map(|_| ())),
    );
    t.check(
        "status: the exporter shows its export imported from here",
        exporter_view(peer, me),
    );
    t.check(
        "status: uid 65534 sees its own export and the disks, nothing of root's",
        unprivileged(dev),
    );
    drop(conn);
}
