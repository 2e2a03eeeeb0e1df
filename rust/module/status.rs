// SPDX-License-Identifier: GPL-2.0

//! `RRDMA_IOCTL_STATUS`: the host's connections, exports with their
//! importers, imports and disks, as an administrator sees them
//! (`rrdma status`).
//!
//! Visibility: a caller with `CAP_NET_ADMIN` sees every file's objects;
//! another, those of files opened by its own effective uid. Disks and
//! their connections belong to no file and are seen by all (sysfs shows
//! them too). Tokens and keys are never shown.
//!
//! The records are gathered first, each under its object's lock and
//! nothing held across objects, and copied out after every lock is let
//! go: a copy stalled on a fault holds up nothing.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::ioctl::Decoded;
use crate::abi::status::{
    validate_status, Status, StatusConn, StatusDisk, StatusExport, StatusImport, STATUS_CONNS,
    STATUS_DISKS, STATUS_DISK_RO, STATUS_EXPORTS, STATUS_EXPORT_ONE_CONN, STATUS_IMPORTS,
};
use crate::abi::uapi::{Addr, ACCESS_READ, ACCESS_WRITE};
use crate::abi::{errno::EOVERFLOW, Result};
use crate::compat::user_slice;
use crate::conn::Conn;
use crate::context::Context;
use crate::ffi::{self, warn_user};
use crate::file::uapi_addr;
use crate::shared::Shared;
use crate::uarg;

/// Serves `RRDMA_IOCTL_STATUS`.
pub(crate) fn status(context: &Context, arg: u64, d: &Decoded) -> Result {
    let mut st = Status::decode(&uarg::read::<{ Status::SIZE }>(arg, d)?);
    let req = validate_status(&st).inspect_err(|e| {
        warn_user!(
            "STATUS: invalid argument (kind {}, flags {:#x}, reserved {:#x}, record size {}, capacity {}): errno {}\n",
            st.kind,
            st.flags,
            st.reserved,
            st.record_size,
            st.capacity,
            e.get()
        );
    })?;
    let all = ffi::sees_all();
    let records = match req.kind {
        STATUS_CONNS => encode(&conns(context, all)?)?,
        STATUS_EXPORTS => encode(&exports(context, all)?)?,
        STATUS_IMPORTS => encode(&imports(context, all)?)?,
        STATUS_DISKS => encode(&disks(context)?)?,
        _ => return Err(crate::abi::errno::EINVAL),
    };
    let size = records.size;
    for (i, rec) in records.bytes.chunks(size).enumerate() {
        let Some(slot) = req.array.slot(i as u32, size) else {
            break;
        };
        user_slice(slot.addr, slot.copy_len)
            .writer()
            .write_slice(&rec[..slot.copy_len])?;
        if slot.zero_len > 0 {
            uarg::clear(slot.addr + slot.copy_len as u64, slot.zero_len)?;
        }
    }
    st.count = u32::try_from(records.bytes.len() / size).map_err(|_| EOVERFLOW)?;
    uarg::write(arg, d, &st.encode())
}

/// Records of one kind, encoded back to back.
struct Encoded {
    bytes: KVVec<u8>,
    size: usize,
}

/// A record kind of `RRDMA_IOCTL_STATUS`.
trait Record {
    const SIZE: usize;
    fn append_to(&self, out: &mut KVVec<u8>) -> Result;
}

macro_rules! record {
    ($($t:ty),*) => {$(
        impl Record for $t {
            const SIZE: usize = <$t>::SIZE;
            fn append_to(&self, out: &mut KVVec<u8>) -> Result {
                out.extend_from_slice(&self.encode(), GFP_KERNEL)?;
                Ok(())
            }
        }
    )*};
}
record!(StatusConn, StatusExport, StatusImport, StatusDisk);

fn encode<R: Record>(records: &[R]) -> Result<Encoded> {
    let mut bytes = KVVec::with_capacity(records.len() * R::SIZE, GFP_KERNEL)?;
    for r in records {
        r.append_to(&mut bytes)?;
    }
    Ok(Encoded {
        bytes,
        size: R::SIZE,
    })
}

/// The open files the caller may see.
fn visible_files(context: &Context, all: bool) -> Result<KVec<Arc<Shared>>> {
    let mut out = KVec::new();
    for f in context.files()? {
        if all || f.owner.as_ref().is_some_and(|o| o.is_current_user()) {
            out.push(f, GFP_KERNEL)?;
        }
    }
    Ok(out)
}

/// The owner's pid and uid as the caller sees them (0 and 0: a disk's).
fn owner_ids(file: &Shared) -> (u32, u32) {
    file.owner.as_ref().map_or((0, 0), |o| (o.pid(), o.uid()))
}

fn conns(context: &Context, all: bool) -> Result<KVVec<StatusConn>> {
    let mut out = KVVec::new();
    for f in visible_files(context, all)? {
        let (pid, uid) = owner_ids(&f);
        for c in f.conns()? {
            out.push(
                StatusConn {
                    pid,
                    uid,
                    ..c.status()
                },
                GFP_KERNEL,
            )?;
        }
    }
    // The table's lock is let go first: it is a leaf.
    let views = context.disks.lock().views()?;
    for disk in views.iter() {
        out.push(disk.conn.status(), GFP_KERNEL)?;
    }
    Ok(out)
}

fn exports(context: &Context, all: bool) -> Result<KVVec<StatusExport>> {
    let mut out = KVVec::new();
    for f in visible_files(context, all)? {
        let (pid, uid) = owner_ids(&f);
        // Each connection's grants once, then the exports (each lock
        // alone).
        let mut granted: KVec<(Arc<Conn>, KVVec<u64>)> = KVec::new();
        for c in f.conns()? {
            let tokens = c.granted_tokens()?;
            granted.push((c, tokens), GFP_KERNEL)?;
        }
        let list = f.exports.lock().snapshot()?;
        for e in list.iter() {
            let base = StatusExport {
                file: f.id,
                pid,
                uid,
                export: e.generation,
                access: if e.writable {
                    ACCESS_READ | ACCESS_WRITE
                } else {
                    ACCESS_READ
                },
                block_size: e.region.geometry().block_size(),
                flags: if e.conn.is_some() {
                    STATUS_EXPORT_ONE_CONN
                } else {
                    0
                },
                nblocks: e.region.geometry().nblocks(),
                ..StatusExport::zeroed()
            };
            let mut importers = 0;
            for (c, _) in granted.iter().filter(|(_, t)| t.contains(&e.token)) {
                let importer_peer: Addr = uapi_addr(&c.peer());
                out.push(
                    StatusExport {
                        importer: c.serial(),
                        importer_peer,
                        ..base
                    },
                    GFP_KERNEL,
                )?;
                importers += 1;
            }
            if importers == 0 {
                out.push(base, GFP_KERNEL)?;
            }
        }
    }
    Ok(out)
}

fn imports(context: &Context, all: bool) -> Result<KVVec<StatusImport>> {
    let mut out = KVVec::new();
    for f in visible_files(context, all)? {
        let (pid, uid) = owner_ids(&f);
        let first = out.len();
        for c in f.conns()? {
            c.import_status(&mut out)?;
        }
        for r in out.iter_mut().skip(first) {
            r.pid = pid;
            r.uid = uid;
        }
    }
    let views = context.disks.lock().views()?;
    for disk in views.iter() {
        disk.conn.import_status(&mut out)?;
    }
    Ok(out)
}

fn disks(context: &Context) -> Result<KVec<StatusDisk>> {
    let views = context.disks.lock().views()?;
    let mut out = KVec::with_capacity(views.len(), GFP_KERNEL)?;
    for v in views.iter() {
        let c = v.conn.status();
        out.push(
            StatusDisk {
                index: v.index,
                flags: if v.plan.read_only { STATUS_DISK_RO } else { 0 },
                conn: c.id,
                block_size: v.plan.block_size,
                state: c.state,
                nblocks: v.plan.sectors * 512 / u64::from(v.plan.block_size.max(1)),
                reconnects: u64::from(c.reconnects),
                ..StatusDisk::zeroed()
            },
            GFP_KERNEL,
        )?;
    }
    Ok(out)
}
