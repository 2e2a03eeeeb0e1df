// SPDX-License-Identifier: GPL-2.0

//! Per-open-file state of `/dev/rrdma`: ioctl dispatch, mmap, read and
//! fdinfo.
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

use kernel::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, ArcBorrow, Mutex};

use crate::abi::{
    self,
    conn::Event,
    errno::{Errno, EAGAIN, EBUSY, EINVAL, ENXIO},
    ioctl::{Command, Decoded},
    ops::{self, Checked},
    region::{validate_create, MapRequest},
    uapi::{
        Accept, Addr, Completion, Connect, Export, HandleArg, Import as ImportArg, Listen, Op,
        RegionCreate, RegionDestroy, Submit, Unexport, ACCESS_READ, ACCESS_WRITE, BACKLOG_DEFAULT,
        BACKLOG_MAX, OP_SIZE_VER0, SUBMIT_MAX,
    },
};
use crate::compat::user_slice;
use crate::conn::{Conn, Import, Posted, DEFAULT_TIMEOUT_MS};
use crate::context::Context;
use crate::ffi::{self, warn_user, SeqFile, ShimAddr, VmArea, VmaInfo};
use crate::info;
use crate::listener::Listener;
use crate::objects::{Object, Objects, Slot};
use crate::region::Region;
use crate::ring::READ_BATCH;
use crate::shared::Shared;
use crate::uarg;

/// Largest `op_size` accepted by SUBMIT.
const OP_SIZE_MAX: u32 = 4096;

/// State of one open `/dev/rrdma`.
#[pin_data]
pub(crate) struct FileState {
    context: Arc<Context>,
    shared: Arc<Shared>,
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

fn uapi_addr(a: &ShimAddr) -> Addr {
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
        return Err(abi::error(EINVAL));
    }
    Ok(())
}

/// Stores `object` under a new handle (room allocated first).
fn insert(objects: &Mutex<Objects>, object: Object) -> Result<u32> {
    let slot = Slot::new().map_err(abi::error)?;
    objects.lock().insert(slot, object).map_err(abi::error)
}

impl FileState {
    fn ioctl(&self, cmd: u32, arg: u64) -> Result<i64> {
        // Unknown commands are routine (isatty() probes): no warning.
        let d = abi::ioctl::decode(cmd).map_err(abi::error)?;
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
        }?;
        Ok(0)
    }

    fn listen(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Listen::decode(&uarg::read::<{ Listen::SIZE }>(arg, d)?);
        zero_flags("LISTEN", req.flags, req.reserved)?;
        ops::check_addr(&req.addr).map_err(|e| {
            warn_user!(
                "LISTEN: bad address (family {}, port {}): errno {}\n",
                req.addr.family,
                req.addr.port,
                e
            );
            abi::error(e)
        })?;
        let backlog = match req.backlog {
            0 => BACKLOG_DEFAULT,
            b if b <= BACKLOG_MAX => b,
            b => {
                warn_user!("LISTEN: backlog {} above {}\n", b, BACKLOG_MAX);
                return Err(abi::error(EINVAL));
            }
        };
        uarg::write(arg, d, &req.encode())?;
        let listener =
            Listener::new(&self.shared, &shim_addr(&req.addr), backlog).map_err(|e| {
                warn_user!("LISTEN: rdma_cm refused the address: errno {}\n", e);
                abi::error(e)
            })?;
        let handle = match insert(&self.objects, Object::Listener(listener.clone())) {
            Ok(h) => h,
            Err(e) => {
                Listener::close(&listener);
                return Err(e);
            }
        };
        req.handle = handle;
        if let Err(e) = uarg::write(arg, d, &req.encode()) {
            let l = self.objects.lock().remove_listener(handle);
            if let Ok(l) = l {
                Listener::close(&l);
            }
            return Err(e);
        }
        Ok(())
    }

    fn unlisten(&self, arg: u64, d: &Decoded) -> Result {
        let req = HandleArg::decode(&uarg::read::<{ HandleArg::SIZE }>(arg, d)?);
        zero_flags("UNLISTEN", req.flags, 0)?;
        let l = self
            .objects
            .lock()
            .remove_listener(req.handle)
            .map_err(abi::error)?;
        Listener::close(&l);
        Ok(())
    }

    /// Gives `conn` a handle and writes `out` back; undoes on failure.
    fn publish_conn(&self, conn: &Arc<Conn>, out: impl FnOnce(u32) -> Result) -> Result {
        let handle = match insert(&self.objects, Object::Conn(conn.clone())) {
            Ok(h) => h,
            Err(e) => {
                Conn::destroy(conn, Event::UserClose);
                return Err(e);
            }
        };
        if let Err(e) = out(handle) {
            let c = self.objects.lock().remove_conn(handle);
            if let Ok(c) = c {
                Conn::destroy(&c, Event::UserClose);
            }
            return Err(e);
        }
        Ok(())
    }

    fn accept(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Accept::decode(&uarg::read::<{ Accept::SIZE }>(arg, d)?);
        zero_flags("ACCEPT", req.flags, 0)?;
        let listener = self
            .objects
            .lock()
            .listener(req.listener)
            .map_err(abi::error)?;
        // Before a connection is taken off the queue: not after, when a
        // failure would cost the connection.
        uarg::write(arg, d, &req.encode())?;
        let conn = listener.accept(req.timeout_ms).map_err(abi::error)?;
        self.publish_conn(&conn, |h| {
            req.handle = h;
            req.peer = uapi_addr(&conn.peer());
            uarg::write(arg, d, &req.encode())
        })
    }

    fn connect(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Connect::decode(&uarg::read::<{ Connect::SIZE }>(arg, d)?);
        zero_flags("CONNECT", req.flags, req.reserved)?;
        ops::check_addr(&req.addr).map_err(|e| {
            warn_user!(
                "CONNECT: bad address (family {}, port {}): errno {}\n",
                req.addr.family,
                req.addr.port,
                e
            );
            abi::error(e)
        })?;
        uarg::write(arg, d, &req.encode())?;
        let conn = Conn::connect(&self.shared, &shim_addr(&req.addr), timeout(req.timeout_ms))
            .map_err(abi::error)?;
        self.publish_conn(&conn, |h| {
            req.handle = h;
            uarg::write(arg, d, &req.encode())
        })
    }

    fn disconnect(&self, arg: u64, d: &Decoded) -> Result {
        let req = HandleArg::decode(&uarg::read::<{ HandleArg::SIZE }>(arg, d)?);
        zero_flags("DISCONNECT", req.flags, 0)?;
        let conn = self
            .objects
            .lock()
            .remove_conn(req.handle)
            .map_err(abi::error)?;
        Conn::destroy(&conn, Event::UserClose);
        Ok(())
    }

    fn export(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Export::decode(&uarg::read::<{ Export::SIZE }>(arg, d)?);
        zero_flags("EXPORT", req.flags, 0)?;
        let writable = ops::export_access(req.access).map_err(|e| {
            warn_user!(
                "EXPORT: access {:#x} is not READ or READ|WRITE\n",
                req.access
            );
            abi::error(e)
        })?;
        let (region, restrict) = {
            let o = self.objects.lock();
            let region = o.region(req.region).map_err(abi::error)?;
            let restrict = match req.conn {
                0 => None,
                h => Some(o.conn(h).map_err(abi::error)?.serial()),
            };
            (region, restrict)
        };
        uarg::write(arg, d, &req.encode())?;
        let token = self
            .shared
            .exports
            .lock()
            .insert(region, writable, restrict)?;
        req.token = token;
        if let Err(e) = uarg::write(arg, d, &req.encode()) {
            let _ = self.shared.exports.lock().remove(token);
            return Err(e);
        }
        Ok(())
    }

    fn unexport(&self, arg: u64, d: &Decoded) -> Result {
        let req = Unexport::decode(&uarg::read::<{ Unexport::SIZE }>(arg, d)?);
        zero_flags("UNEXPORT", req.flags, req.reserved)?;
        let export = self
            .shared
            .exports
            .lock()
            .remove(req.token)
            .map_err(abi::error)?;
        // Every importer is told first, then each acknowledgement awaited:
        // when this returns, nothing of the export is registered anywhere.
        let conns = self.shared.conns()?;
        let mut tickets = KVec::with_capacity(conns.len(), GFP_KERNEL)?;
        for conn in conns.iter() {
            if let Some(t) = conn.start_revoke(export.token, export.generation) {
                // Within capacity.
                let _ = tickets.push(t, GFP_KERNEL);
            }
        }
        for t in tickets {
            t.finish();
        }
        Ok(())
    }

    fn import(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = ImportArg::decode(&uarg::read::<{ ImportArg::SIZE }>(arg, d)?);
        zero_flags("IMPORT", req.flags, 0)?;
        if req.reserved != 0 {
            warn_user!("IMPORT: reserved {:#x} must be zero\n", req.reserved);
            return Err(abi::error(EINVAL));
        }
        let conn = self.objects.lock().conn(req.conn).map_err(abi::error)?;
        uarg::write(arg, d, &req.encode())?;
        let imp = conn
            .import(req.token, timeout(req.timeout_ms))
            .map_err(abi::error)?;
        let imp = Arc::new(imp, GFP_KERNEL)?;
        let handle = insert(&self.objects, Object::Import(imp.clone()))?;
        req.handle = handle;
        req.block_size = imp.geometry.block_size();
        req.nblocks = imp.geometry.nblocks();
        req.max_op_blocks = imp.max_op_blocks;
        req.access = if imp.writable {
            ACCESS_READ | ACCESS_WRITE
        } else {
            ACCESS_READ
        };
        if let Err(e) = uarg::write(arg, d, &req.encode()) {
            let _ = self.objects.lock().remove_import(handle);
            return Err(e);
        }
        Ok(())
    }

    fn unimport(&self, arg: u64, d: &Decoded) -> Result {
        let req = HandleArg::decode(&uarg::read::<{ HandleArg::SIZE }>(arg, d)?);
        zero_flags("UNIMPORT", req.flags, 0)?;
        let imp = self
            .objects
            .lock()
            .remove_import(req.handle)
            .map_err(abi::error)?;
        drop(imp);
        Ok(())
    }

    /// Resolves and checks one operation: nothing is posted yet.
    fn resolve(&self, op: &Op) -> Result<(Arc<Import>, Arc<Region>, Checked), Errno> {
        let (imp, region) = {
            let o = self.objects.lock();
            (o.import(op.remote)?, o.region(op.local)?)
        };
        let c = ops::check_op(op, region.geometry(), &imp.view())?;
        Ok((imp, region, c))
    }

    /// SUBMIT: returns the number of operations posted (also written to
    /// `submitted`).
    fn submit(&self, arg: u64, d: &Decoded) -> Result<i64> {
        let mut req = Submit::decode(&uarg::read::<{ Submit::SIZE }>(arg, d)?);
        if req.flags != 0
            || req.count == 0
            || req.count > SUBMIT_MAX
            || (req.op_size as usize) < OP_SIZE_VER0
            || req.op_size > OP_SIZE_MAX
        {
            warn_user!(
                "SUBMIT: flags {:#x}, count {} (1..={}), op_size {} ({}..={}) refused\n",
                req.flags,
                req.count,
                SUBMIT_MAX,
                req.op_size,
                OP_SIZE_VER0,
                OP_SIZE_MAX
            );
            return Err(abi::error(EINVAL));
        }
        // The probe: an argument we could not write `submitted` back to
        // fails now, with nothing posted.
        req.submitted = 0;
        uarg::write(arg, d, &req.encode())?;
        let mut resolved = KVec::with_capacity(req.count as usize, GFP_KERNEL)?;
        for i in 0..req.count {
            let addr = req
                .ops
                .checked_add(u64::from(i) * u64::from(req.op_size))
                .ok_or(EFAULT)?;
            let op = Op::decode(&uarg::read_sized::<{ Op::SIZE }>(
                addr,
                req.op_size as usize,
            )?);
            match self.resolve(&op) {
                Ok((imp, region, c)) => resolved.push((imp, region, c, op), GFP_KERNEL)?,
                Err(e) => {
                    warn_user!("SUBMIT: operation {} refused: errno {}\n", i, e);
                    req.submitted = i;
                    uarg::write(arg, d, &req.encode())?;
                    return Err(abi::error(e));
                }
            }
        }
        let reserved = self.shared.ring.lock().reserve(resolved.len());
        let mut posted = 0;
        let mut err = None;
        for (imp, region, c, op) in resolved.iter().take(reserved) {
            match imp
                .conn
                .post_op(imp, region, c, op.user_data, op.opcode, None)
            {
                Ok(Posted::Yes) => posted += 1,
                Ok(Posted::Full) => break,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        self.shared.ring.lock().unreserve(reserved - posted);
        if posted == 0 {
            return Err(abi::error(err.unwrap_or(EAGAIN)));
        }
        req.submitted = posted as u32;
        // Posted operations cannot be taken back: if the argument vanished
        // since the probe, the count still comes back as the return value.
        let _ = uarg::write(arg, d, &req.encode());
        Ok(posted as i64)
    }

    fn rw_sync(&self, arg: u64, d: &Decoded) -> Result {
        let op = Op::decode(&uarg::read::<{ Op::SIZE }>(arg, d)?);
        let (imp, region, c) = self.resolve(&op).map_err(|e| {
            warn_user!("RW_SYNC: operation refused: errno {}\n", e);
            abi::error(e)
        })?;
        let status = imp
            .conn
            .run_sync(&imp, &region, &c, op.opcode)
            .map_err(abi::error)?;
        if status < 0 {
            return Err(kernel::error::Error::from_errno(status));
        }
        Ok(())
    }

    fn region_create(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = RegionCreate::decode(&uarg::read::<{ RegionCreate::SIZE }>(arg, d)?);
        // SAFETY: no preconditions.
        let max = unsafe { ffi::rrdma_shim_max_region_bytes() };
        let geometry = validate_create(&req, max).map_err(|e| {
            warn_user!(
                "REGION_CREATE: invalid argument (block size {}, blocks {}, flags {:#x}, reserved {:#x}, limit {} bytes): errno {}\n",
                req.block_size,
                req.nblocks,
                req.flags,
                req.reserved,
                max,
                e
            );
            abi::error(e)
        })?;
        uarg::write(arg, d, &req.encode())?;
        let page = ffi::page_size();
        let offset = self
            .objects
            .lock()
            .alloc_mmap_offset(geometry.pages(page) * page)
            .map_err(abi::error)?;
        let region = Region::new(geometry, offset)?;
        let handle = insert(&self.objects, Object::Region(region))?;
        req.handle = handle;
        req.mmap_offset = offset;
        req.size = geometry.bytes();
        if let Err(e) = uarg::write(arg, d, &req.encode()) {
            // The caller never learned the handle: undo rather than keep an
            // object nobody can name until close.
            let region = self.objects.lock().remove_region(handle);
            drop(region);
            return Err(e);
        }
        Ok(())
    }

    fn region_destroy(&self, arg: u64, d: &Decoded) -> Result {
        let req = RegionDestroy::decode(&uarg::read::<{ RegionDestroy::SIZE }>(arg, d)?);
        if req.flags != 0 {
            warn_user!("REGION_DESTROY: flags {:#x} must be zero\n", req.flags);
            return Err(abi::error(EINVAL));
        }
        let region = {
            let mut o = self.objects.lock();
            let region = o.region(req.handle).map_err(abi::error)?;
            if self.shared.exports.lock().exports_region(&region) {
                warn_user!(
                    "REGION_DESTROY: region {:#x} is exported; unexport it first\n",
                    req.handle
                );
                return Err(abi::error(EBUSY));
            }
            o.remove_region(req.handle).map_err(abi::error)?
        };
        region.mark_destroyed();
        for conn in self.shared.conns()?.iter() {
            conn.forget_region(&region);
        }
        // The pages go when the last mapping of them (and the last
        // operation on them) does.
        drop(region);
        Ok(())
    }

    fn mmap(&self, vma: *mut VmArea) -> Result {
        let mut info = VmaInfo::default();
        // SAFETY: `vma` is the VMA of the mmap(2) call in progress.
        unsafe { ffi::rrdma_shim_vma_info(vma, &mut info) };
        let offset = info
            .pgoff
            .checked_mul(1 << info.page_shift)
            .ok_or_else(|| abi::error(ENXIO))?;
        let req = MapRequest {
            offset,
            len: info.end - info.start,
            shared: info.shared != 0,
            exec: info.exec != 0,
        };
        let region: Option<Arc<Region>> = self.objects.lock().region_at(offset);
        let Some(region) = region else {
            warn_user!("mmap: no region at offset {:#x}\n", offset);
            return Err(abi::error(ENXIO));
        };
        region.map(vma, &req)
    }
}

/// Borrows the file state the shim hands back.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and the file is open for `'a`.
unsafe fn borrow<'a>(state: *mut c_void) -> ArcBorrow<'a, FileState> {
    // SAFETY: by the function's safety requirements, `state` is the
    // reference `open` leaked with `Arc::into_raw`, alive until `release`.
    unsafe { ArcBorrow::from_raw(state.cast::<FileState>().cast_const()) }
}

/// `open`: allocates the file's state.
///
/// # Safety
///
/// `context` is the pointer the shim was registered with, `waitq` the
/// file's wait queue (valid until release returns), and `out` is valid for
/// a write.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_open(
    context: *mut c_void,
    waitq: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: by the function's safety requirements.
    let context: Arc<Context> = unsafe { Context::from_ffi(context) }.into();
    let shared = match Shared::new(context.clone(), waitq) {
        Ok(s) => s,
        Err(e) => return e.to_errno(),
    };
    let state = Arc::pin_init(
        pin_init!(FileState {
            context,
            shared,
            objects <- new_mutex!(Objects::new(), "FileState::objects"),
        }),
        GFP_KERNEL,
    );
    match state {
        Ok(state) => {
            // SAFETY: `out` is valid by the function's safety requirements.
            unsafe { *out = Arc::into_raw(state).cast_mut().cast() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `release`: drops the file's state; every object of the file dies with it.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is not used afterwards.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_release(state: *mut c_void) {
    // SAFETY: by the function's safety requirements, this is the reference
    // `open` leaked.
    let state = unsafe { Arc::from_raw(state.cast::<FileState>().cast_const()) };
    // Listeners first (no new connections), then every connection: their
    // operations complete with errors and their QPs are drained.
    // The table is taken out whole (no allocation that could fail) and
    // emptied outside its lock: closing a listener takes rdma_cm and socket
    // locks, and mmap(2) takes the table's lock under the mmap lock.
    let objects = state.objects.lock().take_all();
    for o in objects.values() {
        if let Object::Listener(l) = o {
            Listener::close(l);
        }
    }
    drop(objects);
    // `destroy` returns once the connection is torn down (waiting for a
    // teardown another path started), which unregisters it.
    loop {
        let conn = state.shared.conns.lock().iter().next().cloned();
        match conn {
            Some(c) => {
                Conn::destroy(&c, Event::UserClose);
                state.shared.unregister(&c);
            }
            None => break,
        }
    }
    drop(state.shared.exports.lock().take_all());
}

/// `unlocked_ioctl`.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_ioctl(
    state: *mut c_void,
    cmd: c_uint,
    arg: c_ulong,
) -> c_long {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    match state.ioctl(cmd, arg as u64) {
        Ok(n) => n as c_long,
        Err(e) => e.to_errno() as c_long,
    }
}

/// `mmap`: maps a region.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live; `vma` is the VMA
/// of the mmap(2) call in progress.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_mmap(state: *mut c_void, vma: *mut VmArea) -> c_int {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    match state.mmap(vma) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `show_fdinfo`: per-file object counts, so that tests can see leaks.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live; `m` is the
/// seq_file being written.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_show_fdinfo(state: *mut c_void, m: *mut SeqFile) {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    let counts = state.objects.lock().counts();
    let exports = state.shared.exports.lock().len() as u64;
    let (in_flight, pending) = {
        let r = state.shared.ring.lock();
        (r.in_flight() as u64, r.len() as u64)
    };
    let live = state.shared.conns.lock().len() as u64;
    for (key, value) in [
        (&b"rrdma-regions\0"[..], counts.regions),
        (&b"rrdma-region-bytes\0"[..], counts.region_bytes),
        (&b"rrdma-listeners\0"[..], counts.listeners),
        (&b"rrdma-connections\0"[..], counts.conns),
        (&b"rrdma-connections-live\0"[..], live),
        (&b"rrdma-exports\0"[..], exports),
        (&b"rrdma-imports\0"[..], counts.imports),
        (&b"rrdma-ops-in-flight\0"[..], in_flight),
        (&b"rrdma-completions\0"[..], pending),
    ] {
        // SAFETY: `m` is valid by the function's safety requirements and
        // `key` is NUL-terminated.
        unsafe { ffi::rrdma_shim_seq_u64(m, key.as_ptr().cast(), value) };
    }
}

/// `read`: copies whole completion records; `-EAGAIN` when there are none
/// (the shim sleeps unless `O_NONBLOCK`). Records are lent out of the ring
/// under its lock and copied to user memory without it (`abi::ring`): a
/// copy stalled on a fault holds up nothing else, and records it could not
/// deliver go back to the front of the ring.
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_read(
    state: *mut c_void,
    buf: *mut c_char,
    len: usize,
    _nonblock: bool,
) -> c_long {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    let max = len / Completion::SIZE;
    if max == 0 {
        return abi::error(EINVAL).to_errno() as c_long;
    }
    let mut writer = user_slice(buf as u64, max * Completion::SIZE).writer();
    let mut done = 0;
    let mut batch = [Completion::zeroed(); READ_BATCH];
    while done < max {
        let want = (max - done).min(READ_BATCH);
        let n = state.shared.ring.lock().lend(&mut batch[..want]);
        if n == 0 {
            break;
        }
        let mut delivered = 0;
        let mut fault = None;
        for c in &batch[..n] {
            if let Err(e) = writer.write_slice(&c.encode()) {
                fault = Some(e);
                break;
            }
            delivered += 1;
        }
        state.shared.ring.lock().settle(&batch[..n], delivered);
        done += delivered;
        if let Some(e) = fault {
            if done == 0 {
                return e.to_errno() as c_long;
            }
            break;
        }
    }
    if done == 0 {
        return abi::error(EAGAIN).to_errno() as c_long;
    }
    (done * Completion::SIZE) as c_long
}

/// Whether completions are waiting (poll and blocking read).
///
/// # Safety
///
/// `state` comes from [`rrdma_rust_file_open`] and is live.
#[no_mangle]
unsafe extern "C" fn rrdma_rust_file_readable(state: *mut c_void) -> bool {
    // SAFETY: by the function's safety requirements.
    let state = unsafe { borrow(state) };
    let n = state.shared.ring.lock().len();
    n > 0
}
