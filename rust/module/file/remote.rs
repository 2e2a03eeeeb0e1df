// SPDX-License-Identifier: GPL-2.0

//! The ioctls of connections, exports, imports and block operations:
//! LISTEN, UNLISTEN, ACCEPT, CONNECT, DISCONNECT, EXPORT, UNEXPORT, IMPORT,
//! UNIMPORT, SUBMIT and RW_SYNC.
//!
//! Each reads its argument, checks it, writes it back unchanged (the probe,
//! see `file.rs`), acts, and writes its answer; a created object is given
//! its handle by [`FileState::publish`], which undoes the creation if the
//! answer cannot be written.

use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::ScopeGuard;

use super::{shim_addr, timeout, uapi_addr, zero_flags, FileState, OP_SIZE_MAX};
use crate::abi::Result;
use crate::abi::{
    conn::Event,
    errno::{Errno, EAGAIN, EINTR, EINVAL, ERESTARTSYS},
    ioctl::Decoded,
    keepalive,
    ops::{self, Checked, Dir},
    uapi::{
        Accept, Connect, Export, HandleArg, Import as ImportArg, Listen, Op, Submit, Unexport,
        ACCESS_READ, ACCESS_WRITE, BACKLOG_DEFAULT, BACKLOG_MAX, CONNECT_NO_KEEPALIVE,
        CONNECT_RECONNECT, OP_FENCE, OP_SIZE_VER0, SUBMIT_MAX,
    },
};
use crate::conn::{Conn, Import, OpWork, Posted, ReportTo, Retry, RunFence, Waiter};

/// An operation resolved: its import, and unless it is a fence its local
/// region and checked extent.
pub(super) type Resolved = (Arc<Import>, Option<(Arc<Region>, Checked)>);

/// What `resolved` does.
fn work(blocks: &Option<(Arc<Region>, Checked)>) -> OpWork<'_> {
    match blocks {
        Some((region, c)) => OpWork::Blocks(region, c),
        None => OpWork::Fence,
    }
}
use crate::ffi::{warn_user, UringCmd};
use crate::listener::Listener;
use crate::objects::Object;
use crate::region::Region;
use crate::uarg;

impl FileState {
    pub(super) fn listen(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Listen::decode(&uarg::read::<{ Listen::SIZE }>(arg, d)?);
        zero_flags("LISTEN", req.flags, req.reserved)?;
        ops::check_addr(&req.addr).inspect_err(|e| {
            warn_user!(
                "LISTEN: bad address (family {}, port {}): errno {}\n",
                req.addr.family,
                req.addr.port,
                e.get()
            );
        })?;
        let backlog = match req.backlog {
            0 => BACKLOG_DEFAULT,
            b if b <= BACKLOG_MAX => b,
            b => {
                warn_user!("LISTEN: backlog {} above {}\n", b, BACKLOG_MAX);
                return Err(EINVAL);
            }
        };
        uarg::write(arg, d, &req.encode())?;
        let listener =
            Listener::new(&self.shared, &shim_addr(&req.addr), backlog).inspect_err(|e| {
                warn_user!("LISTEN: rdma_cm refused the address: errno {}\n", e.get());
            })?;
        self.publish(Object::Listener(listener), |h| {
            req.handle = h;
            uarg::write(arg, d, &req.encode())
        })
    }

    pub(super) fn unlisten(&self, arg: u64, d: &Decoded) -> Result {
        let req = HandleArg::decode(&uarg::read::<{ HandleArg::SIZE }>(arg, d)?);
        zero_flags("UNLISTEN", req.flags, 0)?;
        let l = self.objects.lock().remove_listener(req.handle)?;
        Listener::close(&l);
        Ok(())
    }

    pub(super) fn accept(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Accept::decode(&uarg::read::<{ Accept::SIZE }>(arg, d)?);
        zero_flags("ACCEPT", req.flags, 0)?;
        let listener = self.objects.lock().listener(req.listener)?;
        // Before a connection is taken off the queue: not after, when a
        // failure would cost the connection.
        uarg::write(arg, d, &req.encode())?;
        let conn = listener.accept(req.timeout_ms)?;
        let peer = uapi_addr(&conn.peer());
        self.publish(Object::Conn(conn), |h| {
            req.handle = h;
            req.peer = peer;
            uarg::write(arg, d, &req.encode())
        })
    }

    pub(super) fn connect(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Connect::decode(&uarg::read::<{ Connect::SIZE }>(arg, d)?);
        zero_flags(
            "CONNECT",
            req.flags & !(CONNECT_NO_KEEPALIVE | CONNECT_RECONNECT),
            0,
        )?;
        let (ms, misses) = crate::ffi::keepalive_params();
        let keepalive = keepalive::from_connect(
            req.flags & CONNECT_NO_KEEPALIVE != 0,
            req.keepalive_ms,
            req.keepalive_misses,
            keepalive::from_params(ms, misses),
        )
        .inspect_err(|e| {
            warn_user!(
                "CONNECT: bad keepalive (flags {:#x}, {} ms, {} misses): errno {}\n",
                req.flags,
                req.keepalive_ms,
                req.keepalive_misses,
                e.get()
            );
        })?;
        ops::check_addr(&req.addr).inspect_err(|e| {
            warn_user!(
                "CONNECT: bad address (family {}, port {}): errno {}\n",
                req.addr.family,
                req.addr.port,
                e.get()
            );
        })?;
        uarg::write(arg, d, &req.encode())?;
        let conn = Conn::connect(
            &self.shared,
            &shim_addr(&req.addr),
            timeout(req.timeout_ms),
            keepalive,
            if req.flags & CONNECT_RECONNECT != 0 {
                Retry::Params
            } else {
                Retry::No
            },
        )?;
        self.publish(Object::Conn(conn), |h| {
            req.handle = h;
            uarg::write(arg, d, &req.encode())
        })
    }

    pub(super) fn disconnect(&self, arg: u64, d: &Decoded) -> Result {
        let req = HandleArg::decode(&uarg::read::<{ HandleArg::SIZE }>(arg, d)?);
        zero_flags("DISCONNECT", req.flags, 0)?;
        let conn = self.objects.lock().remove_conn(req.handle)?;
        Conn::destroy(&conn, Event::UserClose);
        Ok(())
    }

    pub(super) fn export(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = Export::decode(&uarg::read::<{ Export::SIZE }>(arg, d)?);
        zero_flags("EXPORT", req.flags, 0)?;
        let writable = ops::export_access(req.access).inspect_err(|_| {
            warn_user!(
                "EXPORT: access {:#x} is not READ or READ|WRITE\n",
                req.access
            );
        })?;
        // The answer's room is probed first: a user copy may stall, and
        // none may under the locks.
        uarg::write(arg, d, &req.encode())?;
        let token = {
            let o = self.objects.lock();
            let region = o.region(req.region)?;
            let restrict = match req.conn {
                0 => None,
                h => Some(o.conn(h)?.serial()),
            };
            // Under the objects' lock, as REGION_DESTROY's check: a region
            // is exported or destroyed, never both (a lookup before a
            // stalled copy, then an insert after the destroy, exported a
            // destroyed region).
            self.shared
                .exports
                .lock()
                .insert(region, writable, restrict)?
        };
        // The caller never learns a token it could not be told.
        let undo = ScopeGuard::new(|| drop(self.shared.exports.lock().remove(token)));
        req.token = token;
        uarg::write(arg, d, &req.encode())?;
        undo.dismiss();
        Ok(())
    }

    pub(super) fn unexport(&self, arg: u64, d: &Decoded) -> Result {
        let req = Unexport::decode(&uarg::read::<{ Unexport::SIZE }>(arg, d)?);
        zero_flags("UNEXPORT", req.flags, req.reserved)?;
        let export = self.shared.exports.lock().remove(req.token)?;
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
        crate::ffi::trace::unexport(export.token, tickets.len() as u32);
        for t in tickets {
            t.finish();
        }
        Ok(())
    }

    pub(super) fn import(&self, arg: u64, d: &Decoded) -> Result {
        let mut req = ImportArg::decode(&uarg::read::<{ ImportArg::SIZE }>(arg, d)?);
        zero_flags("IMPORT", req.flags, 0)?;
        if req.reserved != 0 {
            warn_user!("IMPORT: reserved {:#x} must be zero\n", req.reserved);
            return Err(EINVAL);
        }
        let conn = self.objects.lock().conn(req.conn)?;
        uarg::write(arg, d, &req.encode())?;
        let imp = conn.import(req.token, timeout(req.timeout_ms))?;
        let imp = Arc::new(imp, GFP_KERNEL)?;
        req.block_size = imp.geometry.block_size();
        req.nblocks = imp.geometry.nblocks();
        req.max_op_blocks = imp.max_op_blocks;
        req.access = if imp.writable {
            ACCESS_READ | ACCESS_WRITE
        } else {
            ACCESS_READ
        };
        self.publish(Object::Import(imp), |h| {
            req.handle = h;
            uarg::write(arg, d, &req.encode())
        })
    }

    pub(super) fn unimport(&self, arg: u64, d: &Decoded) -> Result {
        let req = HandleArg::decode(&uarg::read::<{ HandleArg::SIZE }>(arg, d)?);
        zero_flags("UNIMPORT", req.flags, 0)?;
        let imp = self.objects.lock().remove_import(req.handle)?;
        drop(imp);
        Ok(())
    }

    /// Resolves and checks one operation: nothing is posted yet. A fence
    /// has no region.
    pub(super) fn resolve(&self, op: &Op) -> Result<Resolved, Errno> {
        if op.opcode == OP_FENCE {
            let imp = self.objects.lock().import(op.remote)?;
            ops::check_fence(op, &imp.view())?;
            return Ok((imp, None));
        }
        let (imp, region) = {
            let o = self.objects.lock();
            (o.import(op.remote)?, o.region(op.local)?)
        };
        let c = ops::check_op(op, region.geometry(), &imp.view())?;
        Ok((imp, Some((region, c))))
    }

    /// SUBMIT: returns the number of operations posted (also written to
    /// `submitted`).
    pub(super) fn submit(&self, arg: u64, d: &Decoded) -> Result<i64> {
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
            return Err(EINVAL);
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
            // An operation larger than its connection's own queue pair
            // takes waits for a lane, before anything is posted.
            let r = self.resolve(&op).and_then(|(imp, blocks)| match &blocks {
                Some((_, c)) => imp.wait_lane(c.len, true).map(|()| (imp, blocks)),
                None => Ok((imp, blocks)),
            });
            match r {
                Ok((imp, blocks)) => resolved.push((imp, blocks, op), GFP_KERNEL)?,
                Err(e) => {
                    if e != ERESTARTSYS {
                        warn_user!("SUBMIT: operation {} refused: errno {}\n", i, e.get());
                    }
                    req.submitted = i;
                    uarg::write(arg, d, &req.encode())?;
                    return Err(e);
                }
            }
        }
        // Each run of block operations on one connection goes under one
        // acquisition of its lock. On iWARP the writes that complete once
        // placed share one fence per connection: a run's two or more
        // (`RunFence::Batch`) when the SUBMIT is on one connection, else
        // all of the SUBMIT's on that connection, whose groups' fences go
        // once every run is posted (`RunFence::Group`, `Conn::post_deferred`
        // on each connection in `grouped`). A
        // fence is a run of its own: it follows the writes before it,
        // their batch's or group's fence included.
        let several = resolved
            .iter()
            .any(|r| !Arc::ptr_eq(&r.0.conn, &resolved[0].0.conn));
        let mut grouped: KVec<Arc<Conn>> =
            KVec::with_capacity(if several { resolved.len() } else { 0 }, GFP_KERNEL)?;
        let reserved = self.shared.ring.lock().reserve(resolved.len());
        let report = |op: &Op| ReportTo {
            user_data: op.user_data,
            opcode: op.opcode,
            waiter: None,
        };
        let mut posted = 0;
        let mut err = None;
        // Every run on the CPU's path the SUBMIT started on (`post_ops`).
        let cpu = crate::ffi::this_cpu();
        let mut rest = &resolved[..reserved.min(resolved.len())];
        let mut lane_waited = false;
        while let Some((imp, blocks, op)) = rest.first() {
            if blocks.is_none() {
                match imp.conn.post_op(imp, OpWork::Fence, &mut report(op)) {
                    Ok((Posted::Yes, _)) => posted += 1,
                    Ok((Posted::Full, _)) => break,
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
                rest = &rest[1..];
                continue;
            }
            let len = rest
                .iter()
                .take_while(|r| Arc::ptr_eq(&r.0.conn, &imp.conn) && r.1.is_some())
                .count();
            let (run, tail) = rest.split_at(len);
            let placed_writes = run
                .iter()
                .filter(|r| matches!(&r.1, Some((_, c)) if c.dir == Dir::Write && !c.sent))
                .count();
            let fence = match placed_writes {
                0 => RunFence::Alone,
                // Each connection once (a scan of the SUBMIT's own
                // connections), in room reserved above.
                _ if several => {
                    if grouped.iter().any(|c| Arc::ptr_eq(c, &imp.conn))
                        || grouped.push(imp.conn.clone(), GFP_ATOMIC).is_ok()
                    {
                        RunFence::Group
                    } else {
                        RunFence::Alone
                    }
                }
                1 => RunFence::Alone,
                _ => RunFence::Batch,
            };
            let (n, e) = imp.conn.post_ops(
                run.iter().filter_map(|(imp, blocks, op)| {
                    blocks
                        .as_ref()
                        .map(|(region, c)| (&**imp, region, c, report(op)))
                }),
                fence,
                cpu,
            );
            posted += n;
            if n < len {
                // The small own queue pair full before the lanes are up
                // (a new connection's first batch): the rest waits for the
                // first lane and goes there, once per call (a lane full
                // too ends it as before).
                if e.is_none() && !lane_waited && imp.conn.wait_lane_for_room() {
                    lane_waited = true;
                    rest = &rest[n..];
                    continue;
                }
                err = e;
                break;
            }
            rest = tail;
        }
        for conn in &grouped {
            conn.post_deferred();
        }
        drop(grouped);
        let inflight = {
            let mut ring = self.shared.ring.lock();
            ring.unreserve(reserved - posted);
            ring.in_flight()
        };
        if posted == 0 {
            if err.is_none() && inflight == 0 {
                // Full, yet no completion of ours will come to make room.
                match resolved.first() {
                    Some((imp, ..)) if reserved > 0 => imp.conn.warn_no_room("SUBMIT", EAGAIN),
                    _ => warn_user!(
                        "SUBMIT: no room in the completion ring (errno {})\n",
                        EAGAIN.get()
                    ),
                }
            }
            return Err(err.unwrap_or(EAGAIN));
        }
        req.submitted = posted as u32;
        // Posted operations cannot be taken back: if the argument vanished
        // since the probe, the count still comes back as the return value.
        let _ = uarg::write(arg, d, &req.encode());
        Ok(posted as i64)
    }

    pub(super) fn rw_sync(&self, arg: u64, d: &Decoded) -> Result {
        let op = Op::decode(&uarg::read::<{ Op::SIZE }>(arg, d)?);
        let (imp, blocks) = self.resolve(&op).inspect_err(|e| {
            warn_user!("RW_SYNC: operation refused: errno {}\n", e.get());
        })?;
        let status = imp.conn.run_sync(&imp, work(&blocks), op.opcode)?;
        crate::abi::to_result(status)
    }

    /// An io_uring command carrying `op`: checked like one operation of
    /// SUBMIT and posted to complete `cmd`. With the queues full, `EAGAIN`
    /// when the issue must not block (io_uring then issues it again from
    /// a worker), else a wait for room. On success `cmd` is the posted
    /// operation's; on error it was not taken and io_uring posts the CQE.
    pub(crate) fn uring_op(&self, cmd: UringCmd, op: &Op, nonblock: bool) -> Result<(), Errno> {
        let (imp, blocks) = self.resolve(op).inspect_err(|e| {
            warn_user!("io_uring: operation refused: errno {}\n", e.get());
        })?;
        // An operation larger than its connection's own queue pair takes
        // waits for a lane (a worker's wait, as for room), before `cmd` is
        // taken.
        if let Some((_, c)) = &blocks {
            imp.wait_lane(c.len, !nonblock)
                .map_err(|e| if e == ERESTARTSYS { EINTR } else { e })?;
        }
        let mut to = ReportTo {
            user_data: op.user_data,
            opcode: op.opcode,
            waiter: Some(Waiter::Uring(cmd)),
        };
        // Counted until it ends: its operation's end counts it down
        // (`Waiter::tell`), or, not taken, the return here.
        let counts = &self.shared.work;
        counts.uring_issued();
        let r = loop {
            match imp.conn.post_op(&imp, work(&blocks), &mut to) {
                Ok((Posted::Yes, _)) => break Ok(()),
                Ok((Posted::Full, _)) if nonblock => break Err(EAGAIN),
                // A worker's wait: a signal ends the command with EINTR
                // (no system call to restart).
                Ok((Posted::Full, _)) => {
                    if let Err(e) = imp.conn.wait_room() {
                        break Err(if e == ERESTARTSYS { EINTR } else { e });
                    }
                }
                Err(e) => break Err(e),
            }
        };
        if to.waiter.is_some() {
            counts.uring_ended();
        }
        r
    }
}
