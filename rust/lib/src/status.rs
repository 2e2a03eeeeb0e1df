// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RRDMA_IOCTL_STATUS`: the host's connections, exports with their
//! importers, imports and disks ([`Rrdma::status`]), as `rrdma status`
//! prints them.

use std::io;
use std::net::SocketAddr;

use rrdma_abi::conn::State;
use rrdma_abi::status::{
    self, Status, StatusConn, StatusDisk, StatusExport, StatusImport, STATUS_CONN_ACTIVE,
    STATUS_CONN_DISK, STATUS_CONN_RECONNECT, STATUS_DISK_RO, STATUS_EXPORT_ONE_CONN,
    STATUS_IMPORT_REVOKED, STATUS_IMPORT_STALE,
};
use rrdma_abi::uapi::ACCESS_WRITE;
use serde::Serialize;

use crate::{from_addr, Rrdma};

/// The name of a `RRDMA_CONN_STATE_*` number.
pub fn state_name(code: u32) -> &'static str {
    let states = [
        State::Resolving,
        State::RoutePending,
        State::Connecting,
        State::Accepting,
        State::Connected,
    ];
    match code {
        6 => "closing",
        7 => "closed",
        8 => "waiting",
        c => states
            .iter()
            .find(|s| s.code() == c)
            .and_then(|s| s.name().to_str().ok())
            .unwrap_or("unknown"),
    }
}

fn access(bits: u32) -> &'static str {
    if bits & ACCESS_WRITE != 0 {
        "rw"
    } else {
        "ro"
    }
}

fn peer(a: &rrdma_abi::uapi::Addr) -> Option<SocketAddr> {
    from_addr(a)
}

/// A connection.
#[derive(Clone, Debug, Serialize)]
pub struct ConnStatus {
    /// Unique on this host.
    pub id: u64,
    /// The process that opened its file (0: a disk's).
    pub pid: u32,
    /// Its file's owner.
    pub uid: u32,
    /// The peer.
    pub peer: Option<SocketAddr>,
    /// State name (`connected`, `waiting`, ...).
    pub state: &'static str,
    /// This side connected (else it accepted).
    pub active: bool,
    /// It reconnects after a failure.
    pub reconnect: bool,
    /// A disk's own connection.
    pub disk: bool,
    /// Data lanes beyond the connection's own queue pair.
    pub lanes: u32,
    /// Reconnect attempts so far.
    pub reconnects: u32,
    /// Operations in flight.
    pub in_flight: u64,
    /// Operations that ended with an error.
    pub failed: u64,
    /// Imports over it.
    pub imports: u32,
    /// Exports of this side the peer imported over it.
    pub grants: u32,
    /// RDMA device index (`None`: none yet).
    pub device: Option<u32>,
    /// Wire protocol version.
    pub version: u32,
}

/// An export, with the connections that imported it.
#[derive(Clone, Debug, Serialize)]
pub struct ExportStatus {
    /// Its file's id.
    pub file: u64,
    /// The process that opened the file.
    pub pid: u32,
    /// The file's owner.
    pub uid: u32,
    /// Its number in the file (not its token).
    pub export: u32,
    /// `ro` or `rw`.
    pub access: &'static str,
    /// Restricted to one connection.
    pub one_connection: bool,
    /// Block size.
    pub block_size: u32,
    /// Blocks.
    pub nblocks: u64,
    /// Importing connections: (connection id, peer).
    pub importers: Vec<(u64, Option<SocketAddr>)>,
}

/// An import.
#[derive(Clone, Debug, Serialize)]
pub struct ImportStatus {
    /// Its connection's id.
    pub conn: u64,
    /// The process that opened the file (0: a disk's).
    pub pid: u32,
    /// The file's owner.
    pub uid: u32,
    /// The exporting peer.
    pub peer: Option<SocketAddr>,
    /// `ro` or `rw`.
    pub access: &'static str,
    /// The export was revoked.
    pub revoked: bool,
    /// Being asked for again after a reconnect.
    pub stale: bool,
    /// Block size.
    pub block_size: u32,
    /// Blocks.
    pub nblocks: u64,
    /// Operations in flight on it.
    pub in_flight: u32,
}

/// An rrdma-blk disk.
#[derive(Clone, Debug, Serialize)]
pub struct DiskStatus {
    /// `/dev/rrdmabN`.
    pub name: String,
    /// Read-only.
    pub read_only: bool,
    /// Its connection's id.
    pub conn: u64,
    /// Its connection's state.
    pub state: &'static str,
    /// Logical block size.
    pub block_size: u32,
    /// Blocks.
    pub nblocks: u64,
    /// Reconnect attempts of its connection.
    pub reconnects: u64,
}

/// Everything `RRDMA_IOCTL_STATUS` shows the caller.
#[derive(Clone, Debug, Serialize)]
pub struct StatusReport {
    /// Connections.
    pub connections: Vec<ConnStatus>,
    /// Exports with their importers.
    pub exports: Vec<ExportStatus>,
    /// Imports.
    pub imports: Vec<ImportStatus>,
    /// Disks.
    pub disks: Vec<DiskStatus>,
}

impl Rrdma {
    /// Issues `STATUS` with `req`, returning the kernel's answer.
    pub fn status_raw(&self, req: &Status) -> io::Result<Status> {
        let mut b = req.encode();
        self.ioctl_bytes(status::IOCTL_STATUS, &mut b)?;
        Ok(Status::decode(&b))
    }

    /// The records of `kind`, `size` bytes each, asking again with more
    /// room while objects appear in between.
    fn records(&self, kind: u32, size: usize) -> io::Result<Vec<Vec<u8>>> {
        let mut capacity = 16u32;
        loop {
            let mut buf = vec![0u8; capacity as usize * size];
            let out = self.status_raw(&Status {
                kind,
                records: buf.as_mut_ptr() as u64,
                capacity,
                record_size: size as u32,
                ..Status::zeroed()
            })?;
            if out.count > capacity {
                capacity = out.count + 16;
                continue;
            }
            return Ok(buf
                .chunks(size)
                .take(out.count as usize)
                .map(<[u8]>::to_vec)
                .collect());
        }
    }

    /// What the caller may see of the host's rrdma objects.
    pub fn status(&self) -> io::Result<StatusReport> {
        let conns = self
            .records(status::STATUS_CONNS, StatusConn::SIZE)?
            .iter()
            .map(|b| {
                let c = StatusConn::decode(b.as_slice().try_into().expect("record size"));
                ConnStatus {
                    id: c.id,
                    pid: c.pid,
                    uid: c.uid,
                    peer: peer(&c.peer),
                    state: state_name(c.state),
                    active: c.flags & STATUS_CONN_ACTIVE != 0,
                    reconnect: c.flags & STATUS_CONN_RECONNECT != 0,
                    disk: c.flags & STATUS_CONN_DISK != 0,
                    lanes: c.lanes,
                    reconnects: c.reconnects,
                    in_flight: c.in_flight,
                    failed: c.failed,
                    imports: c.imports,
                    grants: c.grants,
                    device: (c.device != u32::MAX).then_some(c.device),
                    version: c.version,
                }
            })
            .collect();
        let mut exports: Vec<ExportStatus> = Vec::new();
        for b in self.records(status::STATUS_EXPORTS, StatusExport::SIZE)? {
            let e = StatusExport::decode(b.as_slice().try_into().expect("record size"));
            let importer = (e.importer != 0).then(|| (e.importer, peer(&e.importer_peer)));
            if let Some(x) = exports
                .iter_mut()
                .find(|x| x.file == e.file && x.export == e.export)
            {
                x.importers.extend(importer);
                continue;
            }
            exports.push(ExportStatus {
                file: e.file,
                pid: e.pid,
                uid: e.uid,
                export: e.export,
                access: access(e.access),
                one_connection: e.flags & STATUS_EXPORT_ONE_CONN != 0,
                block_size: e.block_size,
                nblocks: e.nblocks,
                importers: importer.into_iter().collect(),
            });
        }
        let imports = self
            .records(status::STATUS_IMPORTS, StatusImport::SIZE)?
            .iter()
            .map(|b| {
                let i = StatusImport::decode(b.as_slice().try_into().expect("record size"));
                ImportStatus {
                    conn: i.conn,
                    pid: i.pid,
                    uid: i.uid,
                    peer: peer(&i.peer),
                    access: access(i.access),
                    revoked: i.flags & STATUS_IMPORT_REVOKED != 0,
                    stale: i.flags & STATUS_IMPORT_STALE != 0,
                    block_size: i.block_size,
                    nblocks: i.nblocks,
                    in_flight: i.in_flight,
                }
            })
            .collect();
        let disks = self
            .records(status::STATUS_DISKS, StatusDisk::SIZE)?
            .iter()
            .map(|b| {
                let d = StatusDisk::decode(b.as_slice().try_into().expect("record size"));
                DiskStatus {
                    name: format!("rrdmab{}", d.index),
                    read_only: d.flags & STATUS_DISK_RO != 0,
                    conn: d.conn,
                    state: state_name(d.state),
                    block_size: d.block_size,
                    nblocks: d.nblocks,
                    reconnects: d.reconnects,
                }
            })
            .collect();
        Ok(StatusReport {
            connections: conns,
            exports,
            imports,
            disks,
        })
    }
}
