// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RRDMA_IOCTL_STATUS`: what an administrator sees of the host's rrdma
//! objects (`rrdma status`), one kind of record per call: connections,
//! exports with their importers, imports, disks. The records go into the
//! caller's array at its stride, as GET_INFO's devices do.

use super::errno::{Errno, EINVAL};
use super::info::InfoRequest;
use super::ioctl::{iowr, IoctlCmd};
use super::uapi::{Addr, DEVICE_ENTRY_SIZE_MAX, IOCTL_MAGIC};

abi_struct! {
    /// `struct rrdma_status`: argument of `RRDMA_IOCTL_STATUS`.
    pub struct Status (size = 32) {
        /// In: one of the `STATUS_*` kinds.
        kind: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
        /// In: user pointer to the record array, or 0 (count only).
        records: u64 = 8,
        /// In: records the array has room for.
        capacity: u32 = 16,
        /// In: the caller's size of one record (its stride).
        record_size: u32 = 20,
        /// Out: records there are (may exceed `capacity`).
        count: u32 = 24,
        /// In: must be zero.
        reserved: u32 = 28,
    }
}

/// `RRDMA_IOCTL_STATUS`.
pub const IOCTL_STATUS: IoctlCmd = iowr(IOCTL_MAGIC, 0x11, Status::SIZE);

/// `RRDMA_STATUS_CONNS`: [`StatusConn`] records.
pub const STATUS_CONNS: u32 = 1;
/// `RRDMA_STATUS_EXPORTS`: [`StatusExport`] records.
pub const STATUS_EXPORTS: u32 = 2;
/// `RRDMA_STATUS_IMPORTS`: [`StatusImport`] records.
pub const STATUS_IMPORTS: u32 = 3;
/// `RRDMA_STATUS_DISKS`: [`StatusDisk`] records.
pub const STATUS_DISKS: u32 = 4;

/// `RRDMA_STATUS_CONN_ACTIVE`: this side connected (else it accepted).
pub const STATUS_CONN_ACTIVE: u32 = 1 << 0;
/// `RRDMA_STATUS_CONN_RECONNECT`: it reconnects after a failure.
pub const STATUS_CONN_RECONNECT: u32 = 1 << 1;
/// `RRDMA_STATUS_CONN_DISK`: a disk's own connection, no file's.
pub const STATUS_CONN_DISK: u32 = 1 << 2;

/// `RRDMA_STATUS_EXPORT_ONE_CONN`: restricted to one connection.
pub const STATUS_EXPORT_ONE_CONN: u32 = 1 << 0;

/// `RRDMA_STATUS_IMPORT_REVOKED`: the export was revoked.
pub const STATUS_IMPORT_REVOKED: u32 = 1 << 0;
/// `RRDMA_STATUS_IMPORT_STALE`: asked for again after a reconnect.
pub const STATUS_IMPORT_STALE: u32 = 1 << 1;

/// `RRDMA_STATUS_DISK_RO`: a read-only disk.
pub const STATUS_DISK_RO: u32 = 1 << 0;

abi_struct! {
    /// `struct rrdma_status_conn`: one connection.
    pub struct StatusConn (size = 88) {
        /// The connection's id: unique on this host, never reused.
        id: u64 = 0,
        /// The process that opened its file, in the caller's pid
        /// namespace (0: a disk's, not visible there, or exited).
        pid: u32 = 8,
        /// The owner of its file, in the caller's user namespace.
        uid: u32 = 12,
        /// The peer's address.
        peer: Addr = 16,
        /// `RRDMA_CONN_STATE_*`.
        state: u32 = 40,
        /// `STATUS_CONN_*`.
        flags: u32 = 44,
        /// Data lanes granted: queue pairs beyond the connection's own,
        /// opened at either side's first operation.
        lanes: u32 = 48,
        /// Reconnect attempts so far.
        reconnects: u32 = 52,
        /// Operations in flight.
        in_flight: u64 = 56,
        /// Operations that completed with an error.
        failed: u64 = 64,
        /// Imports made over it.
        imports: u32 = 72,
        /// Exports of this side the peer imported over it.
        grants: u32 = 76,
        /// Index of its RDMA device (GET_INFO's), or `u32::MAX`.
        device: u32 = 80,
        /// Wire protocol version spoken; 0 until known.
        version: u32 = 84,
    }
}

abi_struct! {
    /// `struct rrdma_status_export`: one export and one of its importers
    /// (an export no connection imported has one record, `importer` 0).
    pub struct StatusExport (size = 72) {
        /// Its file's id (unique on this host).
        file: u64 = 0,
        /// The process that opened the file.
        pid: u32 = 8,
        /// The file's owner.
        uid: u32 = 12,
        /// The export's number in its file (not its token).
        export: u32 = 16,
        /// `RRDMA_ACCESS_*`.
        access: u32 = 20,
        /// Block size.
        block_size: u32 = 24,
        /// `STATUS_EXPORT_*`.
        flags: u32 = 28,
        /// Number of blocks.
        nblocks: u64 = 32,
        /// The importing connection's id, or 0.
        importer: u64 = 40,
        /// The importer's address.
        importer_peer: Addr = 48,
    }
}

abi_struct! {
    /// `struct rrdma_status_import`: one import.
    pub struct StatusImport (size = 64) {
        /// Its connection's id.
        conn: u64 = 0,
        /// The process that opened the file.
        pid: u32 = 8,
        /// The file's owner.
        uid: u32 = 12,
        /// `RRDMA_ACCESS_*` granted.
        access: u32 = 16,
        /// `STATUS_IMPORT_*`.
        flags: u32 = 20,
        /// Block size (0 while the import is being made).
        block_size: u32 = 24,
        /// Operations on it in flight.
        in_flight: u32 = 28,
        /// Number of blocks.
        nblocks: u64 = 32,
        /// The exporting peer's address.
        peer: Addr = 40,
    }
}

abi_struct! {
    /// `struct rrdma_status_disk`: one rrdma-blk disk.
    pub struct StatusDisk (size = 48) {
        /// N of `/dev/rrdmabN`.
        index: u32 = 0,
        /// `STATUS_DISK_*`.
        flags: u32 = 4,
        /// Its connection's id.
        conn: u64 = 8,
        /// Logical block size.
        block_size: u32 = 16,
        /// `RRDMA_CONN_STATE_*` of its connection.
        state: u32 = 20,
        /// Number of blocks.
        nblocks: u64 = 24,
        /// Reconnect attempts of its connection so far.
        reconnects: u64 = 32,
        /// Must be zero.
        reserved: u64 = 40,
    }
}

/// A validated STATUS request: its kind and its array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusRequest {
    /// One of the `STATUS_*` kinds.
    pub kind: u32,
    /// The array, with GET_INFO's stride rules.
    pub array: InfoRequest,
}

/// The first published size of each kind's record.
pub fn record_size_ver0(kind: u32) -> Option<u32> {
    Some(match kind {
        STATUS_CONNS => StatusConn::SIZE,
        STATUS_EXPORTS => StatusExport::SIZE,
        STATUS_IMPORTS => StatusImport::SIZE,
        STATUS_DISKS => StatusDisk::SIZE,
        _ => return None,
    } as u32)
}

/// Checks the input fields of a STATUS argument: a known kind, zero flags
/// and reserved, and (with a capacity) an array of records at least the
/// kind's first size apart, whose range does not wrap.
pub fn validate_status(s: &Status) -> Result<StatusRequest, Errno> {
    let min = record_size_ver0(s.kind).ok_or(EINVAL)?;
    if s.flags != 0 || s.reserved != 0 {
        return Err(EINVAL);
    }
    if s.capacity != 0 {
        if s.records == 0 || !(min..=DEVICE_ENTRY_SIZE_MAX).contains(&s.record_size) {
            return Err(EINVAL);
        }
        let bytes = u64::from(s.capacity) * u64::from(s.record_size);
        s.records
            .checked_add(bytes)
            .ok_or(super::errno::EOVERFLOW)?;
    }
    Ok(StatusRequest {
        kind: s.kind,
        array: InfoRequest {
            devices: s.records,
            entry_size: s.record_size,
            capacity: s.capacity,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(kind: u32, records: u64, size: u32, cap: u32) -> Status {
        Status {
            kind,
            records,
            record_size: size,
            capacity: cap,
            ..Status::zeroed()
        }
    }

    #[test]
    fn kinds_flags_and_arrays() {
        assert_eq!(validate_status(&req(0, 0, 0, 0)), Err(EINVAL));
        assert_eq!(validate_status(&req(5, 0, 0, 0)), Err(EINVAL));
        assert!(validate_status(&req(STATUS_CONNS, 0, 0, 0)).is_ok());
        let mut s = req(STATUS_DISKS, 0, 0, 0);
        s.flags = 1;
        assert_eq!(validate_status(&s), Err(EINVAL));
        s.flags = 0;
        s.reserved = 1;
        assert_eq!(validate_status(&s), Err(EINVAL));
        // A capacity needs an array and a stride of at least version 0.
        assert_eq!(validate_status(&req(STATUS_CONNS, 0, 88, 1)), Err(EINVAL));
        assert_eq!(
            validate_status(&req(STATUS_CONNS, 4096, 87, 1)),
            Err(EINVAL)
        );
        assert_eq!(
            validate_status(&req(STATUS_CONNS, 4096, 4097, 1)),
            Err(EINVAL)
        );
        assert!(validate_status(&req(STATUS_CONNS, 4096, 88, 1)).is_ok());
        assert!(validate_status(&req(STATUS_EXPORTS, 4096, 128, 3)).is_ok());
        assert_eq!(
            validate_status(&req(STATUS_IMPORTS, u64::MAX - 10, 64, 1)),
            Err(super::super::errno::EOVERFLOW)
        );
    }

    #[test]
    fn records_go_at_the_callers_stride() {
        let r = validate_status(&req(STATUS_DISKS, 0x1000, 64, 2)).unwrap();
        let s = r.array.slot(1, StatusDisk::SIZE).unwrap();
        assert_eq!((s.addr, s.copy_len, s.zero_len), (0x1040, 48, 16));
        assert!(r.array.slot(2, StatusDisk::SIZE).is_none());
    }
}
