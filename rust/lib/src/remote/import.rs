// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A peer's region, imported: IMPORT, its synchronous block operations,
//! and UNIMPORT.

use std::io;
use std::time::Duration;

use rrdma_abi::uapi::{self, Import, Op, ACCESS_WRITE, OP_FENCE, OP_F_SENT, OP_READ, OP_WRITE};

use super::{ms, Connection};
use crate::{Region, Rrdma};

/// A peer's region, imported. Forgotten on drop.
#[derive(Debug)]
pub struct RemoteRegion<'a> {
    dev: &'a Rrdma,
    handle: u32,
    block_size: u32,
    nblocks: u64,
    writable: bool,
    max_op_blocks: u32,
}

impl Rrdma {
    /// Issues `IMPORT`.
    pub fn import_raw(&self, req: &Import) -> io::Result<Import> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_IMPORT, &mut b)?;
        Ok(Import::decode(&b))
    }
}

impl<'a> Connection<'a> {
    /// Imports the peer's export `token`.
    pub fn import(&self, token: u64, timeout: Duration) -> io::Result<RemoteRegion<'a>> {
        let out = self.dev.import_raw(&Import {
            conn: self.handle,
            token,
            timeout_ms: ms(Some(timeout)),
            ..Import::zeroed()
        })?;
        Ok(RemoteRegion {
            dev: self.dev,
            handle: out.handle,
            block_size: out.block_size,
            nblocks: out.nblocks,
            writable: out.access & ACCESS_WRITE != 0,
            // An older kernel does not say: then one operation is one call.
            max_op_blocks: if out.max_op_blocks == 0 {
                u32::MAX
            } else {
                out.max_op_blocks
            },
        })
    }
}

impl RemoteRegion<'_> {
    /// The import's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Block size.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of blocks.
    pub fn nblocks(&self) -> u64 {
        self.nblocks
    }

    /// Whether the export allows writes.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The largest `count` of one operation on this import (larger ones
    /// are refused with `E2BIG`; [`Self::read`] and [`Self::write`] split).
    pub fn max_op_blocks(&self) -> u32 {
        self.max_op_blocks
    }

    /// An operation of `count` blocks between `local` and this region.
    pub fn op(
        &self,
        opcode: u32,
        local: &Region<'_>,
        local_block: u64,
        remote_block: u64,
        count: u32,
        user_data: u64,
    ) -> Op {
        Op {
            opcode,
            remote: self.handle,
            local: local.handle(),
            remote_block,
            local_block,
            count,
            user_data,
            ..Op::zeroed()
        }
    }

    /// A write like [`Self::op`]'s that completes once sent
    /// (`RRDMA_OP_F_SENT`): its bytes are placed only once a later
    /// [`Self::fence_op`] completes.
    pub fn write_sent_op(
        &self,
        local: &Region<'_>,
        local_block: u64,
        remote_block: u64,
        count: u32,
        user_data: u64,
    ) -> Op {
        Op {
            flags: OP_F_SENT,
            ..self.op(OP_WRITE, local, local_block, remote_block, count, user_data)
        }
    }

    /// A fence on this region (`RRDMA_OP_FENCE`): completes once every
    /// write submitted before it on this region is placed.
    pub fn fence_op(&self, user_data: u64) -> Op {
        Op {
            opcode: OP_FENCE,
            remote: self.handle,
            user_data,
            ..Op::zeroed()
        }
    }

    /// Waits until every write submitted before on this region is placed
    /// (a synchronous fence). `ECONNRESET`: the connection ended since the
    /// last fence, and writes sent before may be lost.
    pub fn fence(&self) -> io::Result<()> {
        self.dev.rw_sync(&self.fence_op(0))
    }

    /// Runs `count` blocks as synchronous operations of at most
    /// [`Self::max_op_blocks`] blocks each, in order.
    fn sync_pieces(
        &self,
        opcode: u32,
        local: &Region<'_>,
        local_block: u64,
        remote_block: u64,
        count: u32,
    ) -> io::Result<()> {
        let step = self.max_op_blocks.max(1);
        let mut done = 0u32;
        loop {
            let n = (count - done).min(step);
            let off = u64::from(done);
            self.dev.rw_sync(&self.op(
                opcode,
                local,
                local_block + off,
                remote_block + off,
                n,
                0,
            ))?;
            done += n;
            if done >= count {
                return Ok(());
            }
        }
    }

    /// Reads `count` remote blocks from `remote_block` into `local` at
    /// `local_block`, synchronously (in pieces if larger than one
    /// operation may be).
    pub fn read(
        &self,
        local: &Region<'_>,
        local_block: u64,
        remote_block: u64,
        count: u32,
    ) -> io::Result<()> {
        self.sync_pieces(OP_READ, local, local_block, remote_block, count)
    }

    /// Writes `count` blocks of `local` from `local_block` to the remote
    /// region at `remote_block`, synchronously (in pieces if larger than
    /// one operation may be).
    pub fn write(
        &self,
        local: &Region<'_>,
        local_block: u64,
        remote_block: u64,
        count: u32,
    ) -> io::Result<()> {
        self.sync_pieces(OP_WRITE, local, local_block, remote_block, count)
    }
}

impl Drop for RemoteRegion<'_> {
    fn drop(&mut self) {
        let _ = self.dev.handle_op(uapi::IOCTL_UNIMPORT, self.handle);
    }
}
