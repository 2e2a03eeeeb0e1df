// SPDX-License-Identifier: GPL-2.0

//! What `RRDMA_IOCTL_STATUS` shows of a connection (`crate::status`): its
//! record, its imports', and whether the peer imported an export over it.
//! Each is read under `Conn::inner` alone, and copied out after. Also the
//! lane-op count a disk's sysfs `on_lanes` shows (an atomic, no lock).

use core::sync::atomic::Ordering;

use kernel::prelude::*;

use super::Conn;
use crate::abi::status::{
    StatusConn, StatusImport, STATUS_CONN_ACTIVE, STATUS_CONN_DISK, STATUS_CONN_RECONNECT,
    STATUS_IMPORT_REVOKED, STATUS_IMPORT_STALE,
};
use crate::abi::uapi::{ACCESS_READ, ACCESS_WRITE};
use crate::abi::Result;
use crate::file::uapi_addr;

impl Conn {
    /// Operations posted on a data lane of the connections of its file
    /// (a disk's: its own connection's, sysfs `on_lanes`; fdinfo
    /// `rrdma-lane-ops`).
    pub(crate) fn lane_ops(&self) -> u64 {
        self.shared.work.lane_ops()
    }

    /// The connection's record, but for its owner's pid and uid.
    pub(crate) fn status(&self) -> StatusConn {
        let g = self.inner.lock();
        let (imports, in_flight) = g.imports.views().fold((0u32, 0u64), |(n, f), v| {
            (n + 1, f + u64::from(v.in_flight))
        });
        let mut flags = 0;
        if self.active {
            flags |= STATUS_CONN_ACTIVE;
        }
        if g.reconnect.is_some() {
            flags |= STATUS_CONN_RECONNECT;
        }
        if self.shared.backs_disk() {
            flags |= STATUS_CONN_DISK;
        }
        // The device's index needs a query of the device (a port query
        // takes the RTNL on siw and rxe): made once the lock is let go.
        let device = g.device.clone();
        let record = StatusConn {
            id: self.serial,
            peer: uapi_addr(&g.peer),
            state: g.state.code(),
            flags,
            lanes: u32::from(g.lanes),
            reconnects: g
                .reconnect
                .as_ref()
                .map_or(0, |r| u32::try_from(r.budget.total()).unwrap_or(u32::MAX)),
            in_flight,
            failed: self.failed.load(Ordering::Relaxed),
            imports,
            grants: g.res.as_ref().map_or(0, |r| r.grants.len() as u32),
            version: u32::from(g.version),
            ..StatusConn::zeroed()
        };
        drop(g);
        StatusConn {
            device: device.map_or(u32::MAX, |d| d.attr().index),
            ..record
        }
    }

    /// Appends the records of the connection's imports to `out`, but for
    /// their owner's pid and uid.
    pub(crate) fn import_status(&self, out: &mut KVVec<StatusImport>) -> Result {
        let g = self.inner.lock();
        let peer = uapi_addr(&g.peer);
        for v in g.imports.views().filter(|v| !v.orphan) {
            let mut flags = 0;
            if v.revoked {
                flags |= STATUS_IMPORT_REVOKED;
            }
            if v.stale {
                flags |= STATUS_IMPORT_STALE;
            }
            let access = if v.writable {
                ACCESS_READ | ACCESS_WRITE
            } else {
                ACCESS_READ
            };
            out.push(
                StatusImport {
                    conn: self.serial,
                    access,
                    flags,
                    block_size: v.block_size,
                    in_flight: v.in_flight,
                    nblocks: v.nblocks,
                    peer,
                    ..StatusImport::zeroed()
                },
                GFP_KERNEL,
            )?;
        }
        Ok(())
    }

    /// The tokens of the exports the peer imported over this connection.
    pub(crate) fn granted_tokens(&self) -> Result<KVVec<u64>> {
        let g = self.inner.lock();
        let mut out = KVVec::new();
        if let Some(r) = g.res.as_ref() {
            for t in r.grants.tokens() {
                out.push(t, GFP_KERNEL)?;
            }
        }
        Ok(out)
    }
}
