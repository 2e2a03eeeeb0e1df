// SPDX-License-Identifier: GPL-2.0

//! Per-open-file state of `/dev/rrdma`: ioctl dispatch, regions and mmap.
//! The remote ioctls are in `file/remote.rs`, open and release in
//! `file/open.rs`, read(2), poll and fdinfo in `file/read.rs`; the C entry
//! points of the `file_operations` in `entry/file.rs`.
//!
//! Every ioctl that writes a result back first writes its argument back
//! unchanged (a probe): an argument the caller cannot write (read-only
//! memory) fails with `EFAULT` before anything is done. The write of the
//! result can then fail only if another thread unmaps or write-protects the
//! argument meanwhile; the creating ioctls then undo what they did, and
//! SUBMIT returns its count anyway (its completions say what was posted).
//!
//! Locking: no lock is held across a copy to or from user memory (a fault
//! can stall for as long as a userfaultfd handler likes); see `objects.rs`,
//! `shared.rs` and `conn/mod.rs` for each lock's rules.

use kernel::prelude::*;

use crate::abi::Result;
use kernel::sync::{Arc, Mutex};
use kernel::types::ScopeGuard;

use crate::abi::{
    self,
    caps::Kind,
    errno::{EBUSY, EINVAL, ENXIO},
    ioctl::{Command, Decoded},
    region::{validate_create, validate_register, MapRequest},
    uapi::{Addr, RegionCreate, RegionDestroy, RegionRegister},
};
use crate::conn::DEFAULT_TIMEOUT_MS;
use crate::context::Context;
use crate::ffi::{self, warn_user, ShimAddr};
use crate::info;
use crate::objects::{Object, Objects, Slot};
use crate::region::Region;
use crate::shared::Shared;
use crate::uarg;
use crate::vma::NewVma;

mod blk;
mod open;
mod read;
mod remote;

/// Largest `op_size` accepted by SUBMIT.
const OP_SIZE_MAX: u32 = 4096;

/// State of one open `/dev/rrdma`.
#[pin_data]
pub(crate) struct FileState {
    context: Arc<Context>,
    shared: Arc<Shared>,
    /// Guards the file's handle table. Order: before `Shared::exports`
    /// (a region's destruction checks its exports, EXPORT inserts under
    /// it); nothing else is taken under it, and no object is destroyed
    /// under it.
    #[pin]
    objects: Mutex<Objects>,
}

fn shim_addr(a: &Addr) -> ShimAddr {
    ShimAddr {
        family: a.family,
        port: a.port,
        scope_id: a.scope_id,
        addr: a.addr,
    }
}

pub(crate) fn uapi_addr(a: &ShimAddr) -> Addr {
    Addr {
        family: a.family,
        port: a.port,
        scope_id: a.scope_id,
        addr: a.addr,
    }
}

fn timeout(ms: u32) -> u32 {
    if ms == 0 {
        DEFAULT_TIMEOUT_MS
    } else {
        ms
    }
}

fn zero_flags(what: &str, flags: u32, reserved: u32) -> Result {
    if flags != 0 || reserved != 0 {
        warn_user!(
            "{}: flags {:#x} / reserved {:#x} must be zero\n",
            what,
            flags,
            reserved
        );
        return Err(EINVAL);
    }
    Ok(())
}

impl FileState {
    /// Gives `object` a handle (room allocated before the lock) and lets
    /// `answer` write it back to the caller. If either fails, the object is
    /// closed again: no object exists that the caller cannot name.
    fn publish(&self, object: Object, answer: impl FnOnce(u32) -> Result) -> Result {
        let inserted =
            Slot::new().and_then(|slot| self.objects.lock().insert(slot, object.clone()));
        let handle = match inserted {
            Ok(h) => h,
            Err(e) => {
                object.close();
                return Err(e);
            }
        };
        drop(object);
        let undo = ScopeGuard::new(|| {
            // Removed under the lock, closed outside it. A region that
            // another thread exported meanwhile (handles are predictable)
            // stays: an exported region keeps its handle.
            let object = {
                let mut o = self.objects.lock();
                match o.region(handle) {
                    Ok(r) if self.shared.exports.lock().exports_region(&r) => None,
                    _ => o.remove(handle),
                }
            };
            if let Some(o) = object {
                o.close();
            }
        });
        answer(handle)?;
        undo.dismiss();
        Ok(())
    }

    pub(crate) fn ioctl(&self, cmd: u32, arg: u64) -> Result<i64> {
        // Unknown commands are routine (isatty() probes): no warning.
        let d = abi::ioctl::decode(cmd)?;
        match d.cmd {
            Command::GetInfo => info::get_info(&self.context, arg, &d),
            Command::RegionCreate => self.region_create(arg, &d),
            Command::RegionDestroy => self.region_destroy(arg, &d),
            Command::Listen => self.listen(arg, &d),
            Command::Accept => self.accept(arg, &d),
            Command::Connect => self.connect(arg, &d),
            Command::Disconnect => self.disconnect(arg, &d),
            Command::Unlisten => self.unlisten(arg, &d),
            Command::Export => self.export(arg, &d),
            Command::Unexport => self.unexport(arg, &d),
            Command::Import => self.import(arg, &d),
            Command::Unimport => self.unimport(arg, &d),
            Command::Submit => return self.submit(arg, &d),
            Command::RwSync => self.rw_sync(arg, &d),
            Command::RegionRegister => self.region_register(arg, &d),
            Command::BlkMap => self.blk_map(arg, &d),
            Command::BlkUnmap => self.blk_unmap(arg, &d),
            Command::Status => crate::status::status(&self.context, arg, &d),
        }?;
        Ok(0)
    }

    fn region_create(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = RegionCreate::decode(&uarg::read::<{ RegionCreate::SIZE }>(arg, d)?);
        let max = ffi::max_region_bytes();
        let geometry = validate_create(&req, max).inspect_err(|e| {
            warn_user!(
                "REGION_CREATE: invalid argument (block size {}, blocks {}, flags {:#x}, reserved {:#x}, limit {} bytes): errno {}\n",
                req.block_size,
                req.nblocks,
                req.flags,
                req.reserved,
                max,
                e.get()
            );
        })?;
        uarg::write(arg, d, &req.encode())?;
        let charge = self.shared.charges.token(Kind::Region, "REGION_CREATE")?;
        let page = ffi::page_size();
        let offset = self
            .objects
            .lock()
            .alloc_mmap_offset(geometry.pages(page) * page)?;
        let region = Region::new(geometry, offset, Some(charge))?;
        self.publish(Object::Region(region), |h| {
            req.handle = h;
            req.mmap_offset = offset;
            req.size = geometry.bytes();
            uarg::write(arg, d, &req.encode())
        })
    }

    fn region_register(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = RegionRegister::decode(&uarg::read::<{ RegionRegister::SIZE }>(arg, d)?);
        let max = ffi::max_region_bytes();
        let geometry = validate_register(&req, ffi::page_size(), max).inspect_err(|e| {
            warn_user!(
                "REGION_REGISTER: invalid argument (address {:#x}, block size {}, blocks {}, flags {:#x}, reserved {:#x}, limit {} bytes; whole pages from a page boundary): errno {}\n",
                req.addr,
                req.block_size,
                req.nblocks,
                req.flags,
                req.reserved,
                max,
                e.get()
            );
        })?;
        // Writable before anything is pinned.
        uarg::write(arg, d, &req.encode())?;
        let charge = self.shared.charges.token(Kind::Region, "REGION_REGISTER")?;
        let region = Region::register(geometry, req.addr, charge)?;
        self.publish(Object::Region(region), |h| {
            req.handle = h;
            req.size = geometry.bytes();
            uarg::write(arg, d, &req.encode())
        })
    }

    fn region_destroy(&self, arg: u64, d: &Decoded) -> Result {
        let req = RegionDestroy::decode(&uarg::read::<{ RegionDestroy::SIZE }>(arg, d)?);
        if req.flags != 0 {
            warn_user!("REGION_DESTROY: flags {:#x} must be zero\n", req.flags);
            return Err(EINVAL);
        }
        let region = {
            let mut o = self.objects.lock();
            let region = o.region(req.handle)?;
            if self.shared.exports.lock().exports_region(&region) {
                warn_user!(
                    "REGION_DESTROY: region {:#x} is exported; unexport it first\n",
                    req.handle
                );
                return Err(EBUSY);
            }
            o.remove_region(req.handle)?
        };
        region.mark_destroyed();
        // Only a region some connection cached a registration of has any
        // to forget: the others' destroy does not grow with connections.
        // The handle is gone already: no error from here (an entry not
        // forgotten for want of memory goes at its last operation's end,
        // or with its connection).
        if region.is_cached() {
            if let Ok(conns) = self.shared.conns() {
                for conn in conns.iter() {
                    conn.forget_region(&region);
                }
            }
        }
        // The pages go when the last mapping of them (and the last
        // operation on them) does.
        drop(region);
        Ok(())
    }

    pub(crate) fn mmap(&self, vma: NewVma<'_>) -> Result {
        let info = vma.info();
        let offset = info.pgoff.checked_mul(1 << info.page_shift).ok_or(ENXIO)?;
        let req = MapRequest {
            offset,
            len: info.end - info.start,
            shared: info.shared != 0,
            exec: info.exec != 0,
        };
        let region: Option<Arc<Region>> = self.objects.lock().region_at(offset);
        let Some(region) = region else {
            warn_user!("mmap: no region at offset {:#x}\n", offset);
            return Err(ENXIO);
        };
        region.map(vma, &req)
    }
}
