// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Rust mirror of `include/uapi/rrdma.h`.
//!
//! Field offsets and struct sizes are checked at compile time by
//! `abi_struct!`; the module's C shim checks the same sizes against the
//! header with `static_assert`, so the two definitions cannot drift apart.

use super::ioctl::{iow, iowr, IoctlCmd};

// `abi_struct!` in `device` names `super::codec`.
use super::codec;

#[path = "uapi/device.rs"]
mod device;
pub use device::*;

/// ABI version of this definition (`RRDMA_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;
/// ioctl type byte (`RRDMA_IOCTL_MAGIC`).
pub const IOCTL_MAGIC: u8 = 0xE7;
/// `RRDMA_FEATURE_REGIONS`: regions and their mappings.
pub const FEATURE_REGIONS: u64 = 1 << 0;
/// `RRDMA_FEATURE_REMOTE`: connections, export/import and block operations.
pub const FEATURE_REMOTE: u64 = 1 << 1;
/// `RRDMA_FEATURE_KEEPALIVE`: CONNECT's keepalive fields and flag.
pub const FEATURE_KEEPALIVE: u64 = 1 << 2;
/// `RRDMA_FEATURE_RECONNECT`: `RRDMA_CONNECT_RECONNECT`.
pub const FEATURE_RECONNECT: u64 = 1 << 3;
/// `RRDMA_FEATURE_URING`: io_uring commands ([`URING_CMD_OP`]), on
/// kernels with io_uring.
pub const FEATURE_URING: u64 = 1 << 4;
/// `RRDMA_FEATURE_URING_IOPOLL`: io_uring commands on an
/// `IORING_SETUP_IOPOLL` ring complete by polling.
pub const FEATURE_URING_IOPOLL: u64 = 1 << 5;
/// `RRDMA_FEATURE_REGISTER`: `RRDMA_IOCTL_REGION_REGISTER`.
pub const FEATURE_REGISTER: u64 = 1 << 6;
/// `RRDMA_FEATURE_WRITE_SENT`: [`OP_F_SENT`] and [`OP_FENCE`].
pub const FEATURE_WRITE_SENT: u64 = 1 << 7;
/// `RRDMA_FEATURE_BLK`: `RRDMA_IOCTL_BLK_MAP` and `BLK_UNMAP`.
pub const FEATURE_BLK: u64 = 1 << 8;
/// `RRDMA_FEATURE_STATUS`: `RRDMA_IOCTL_STATUS`.
pub const FEATURE_STATUS: u64 = 1 << 9;
/// `RRDMA_FEATURE_CAPS`: per-file caps (`ENOSPC`) and per-user caps
/// (`EDQUOT`) on connections, regions and exports (`caps`).
pub const FEATURE_CAPS: u64 = 1 << 10;
/// Feature bits this ABI defines (`RRDMA_FEATURES_ALL`).
pub const FEATURES_ALL: u64 = FEATURE_REGIONS
    | FEATURE_REMOTE
    | FEATURE_KEEPALIVE
    | FEATURE_RECONNECT
    | FEATURE_URING
    | FEATURE_URING_IOPOLL
    | FEATURE_REGISTER
    | FEATURE_WRITE_SENT
    | FEATURE_BLK
    | FEATURE_STATUS
    | FEATURE_CAPS;

abi_struct! {
    /// `struct rrdma_region_create`: argument of `RRDMA_IOCTL_REGION_CREATE`.
    pub struct RegionCreate (size = 40) {
        /// In: bytes per block.
        block_size: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
        /// In: number of blocks.
        nblocks: u64 = 8,
        /// Out: the region's handle.
        handle: u32 = 16,
        /// In: must be zero.
        reserved: u32 = 20,
        /// Out: offset for mmap(2).
        mmap_offset: u64 = 24,
        /// Out: bytes in the region.
        size: u64 = 32,
    }
}

/// First published size of `struct rrdma_region_create`.
pub const REGION_CREATE_SIZE_VER0: usize = 40;

abi_struct! {
    /// `struct rrdma_region_destroy`: argument of `RRDMA_IOCTL_REGION_DESTROY`.
    pub struct RegionDestroy (size = 8) {
        /// In: the region's handle.
        handle: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
    }
}

/// First published size of `struct rrdma_region_destroy`.
pub const REGION_DESTROY_SIZE_VER0: usize = 8;

/// `RRDMA_IOCTL_REGION_CREATE`.
pub const IOCTL_REGION_CREATE: IoctlCmd = iowr(IOCTL_MAGIC, 0x01, RegionCreate::SIZE);
/// `RRDMA_IOCTL_REGION_DESTROY`.
pub const IOCTL_REGION_DESTROY: IoctlCmd = iow(IOCTL_MAGIC, 0x02, RegionDestroy::SIZE);

abi_struct! {
    /// `struct rrdma_region_register`: argument of
    /// `RRDMA_IOCTL_REGION_REGISTER`.
    pub struct RegionRegister (size = 40) {
        /// In: start of the caller's memory, page aligned.
        addr: u64 = 0,
        /// In: bytes per block.
        block_size: u32 = 8,
        /// In: must be zero.
        flags: u32 = 12,
        /// In: number of blocks (whole pages in all).
        nblocks: u64 = 16,
        /// Out: the region's handle.
        handle: u32 = 24,
        /// In: must be zero.
        reserved: u32 = 28,
        /// Out: bytes in the region.
        size: u64 = 32,
    }
}

/// First published size of `struct rrdma_region_register`.
pub const REGION_REGISTER_SIZE_VER0: usize = 40;
/// `RRDMA_IOCTL_REGION_REGISTER`.
pub const IOCTL_REGION_REGISTER: IoctlCmd = iowr(IOCTL_MAGIC, 0x0e, RegionRegister::SIZE);

/// `RRDMA_AF_INET`.
pub const AF_INET: u16 = 2;
/// `RRDMA_AF_INET6`.
pub const AF_INET6: u16 = 10;

abi_struct! {
    /// `struct rrdma_addr`: an IP address and port.
    pub struct Addr (size = 24) {
        /// `AF_INET` or `AF_INET6`.
        family: u16 = 0,
        /// Port, host byte order.
        port: u16 = 2,
        /// IPv6 scope id.
        scope_id: u32 = 4,
        /// Address, network byte order.
        addr: [u8; 16] = 8,
    }
}

impl super::codec::Field for Addr {
    const SIZE: usize = Addr::SIZE;
    fn get(b: &[u8]) -> Self {
        let mut a = [0u8; Addr::SIZE];
        a.copy_from_slice(&b[..Addr::SIZE]);
        Addr::decode(&a)
    }
    fn put(&self, b: &mut [u8]) {
        b[..Addr::SIZE].copy_from_slice(&self.encode());
    }
}

/// `RRDMA_BACKLOG_DEFAULT`.
pub const BACKLOG_DEFAULT: u32 = 16;
/// `RRDMA_BACKLOG_MAX`.
pub const BACKLOG_MAX: u32 = 256;

abi_struct! {
    /// `struct rrdma_listen`.
    pub struct Listen (size = 40) {
        /// In: local address.
        addr: Addr = 0,
        /// In: accepted connections not yet taken (0: default).
        backlog: u32 = 24,
        /// In: must be zero.
        flags: u32 = 28,
        /// Out: the listener's handle.
        handle: u32 = 32,
        /// In: must be zero.
        reserved: u32 = 36,
    }
}

abi_struct! {
    /// `struct rrdma_accept`.
    pub struct Accept (size = 40) {
        /// In: the listener's handle.
        listener: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
        /// In: milliseconds to wait; 0 does not wait, `u32::MAX` forever.
        timeout_ms: u32 = 8,
        /// Out: the connection's handle.
        handle: u32 = 12,
        /// Out: the peer's address.
        peer: Addr = 16,
    }
}

abi_struct! {
    /// `struct rrdma_connect`.
    pub struct Connect (size = 40) {
        /// In: the peer's address.
        addr: Addr = 0,
        /// In: milliseconds (0: default).
        timeout_ms: u32 = 24,
        /// In: `CONNECT_*` flags.
        flags: u32 = 28,
        /// Out: the connection's handle.
        handle: u32 = 32,
        /// In: keepalive interval in milliseconds (0: module parameter).
        keepalive_ms: u16 = 36,
        /// In: intervals without an answer before the connection ends
        /// (0: module parameter).
        keepalive_misses: u16 = 38,
    }
}

/// `RRDMA_CONNECT_NO_KEEPALIVE`: no keepalive on this connection.
pub const CONNECT_NO_KEEPALIVE: u32 = 1 << 0;
/// `RRDMA_CONNECT_RECONNECT`: once established, reconnect after a failure.
pub const CONNECT_RECONNECT: u32 = 1 << 1;

abi_struct! {
    /// `struct rrdma_handle_arg`: DISCONNECT, UNIMPORT, UNLISTEN.
    pub struct HandleArg (size = 8) {
        /// In: the handle.
        handle: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
    }
}

/// `RRDMA_ACCESS_READ`.
pub const ACCESS_READ: u32 = 1 << 0;
/// `RRDMA_ACCESS_WRITE`.
pub const ACCESS_WRITE: u32 = 1 << 1;

abi_struct! {
    /// `struct rrdma_export`.
    pub struct Export (size = 24) {
        /// In: the region's handle.
        region: u32 = 0,
        /// In: `ACCESS_READ` or `ACCESS_READ | ACCESS_WRITE`.
        access: u32 = 4,
        /// In: connection restriction, or 0.
        conn: u32 = 8,
        /// In: must be zero.
        flags: u32 = 12,
        /// Out: the token.
        token: u64 = 16,
    }
}

abi_struct! {
    /// `struct rrdma_unexport`.
    pub struct Unexport (size = 16) {
        /// In: the token.
        token: u64 = 0,
        /// In: must be zero.
        flags: u32 = 8,
        /// In: must be zero.
        reserved: u32 = 12,
    }
}

abi_struct! {
    /// `struct rrdma_import`.
    pub struct Import (size = 48) {
        /// In: the connection.
        conn: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
        /// In: the peer's token.
        token: u64 = 8,
        /// In: milliseconds (0: default).
        timeout_ms: u32 = 16,
        /// Out: the remote region's handle.
        handle: u32 = 20,
        /// Out: block size.
        block_size: u32 = 24,
        /// Out: `ACCESS_*` granted.
        access: u32 = 28,
        /// Out: number of blocks.
        nblocks: u64 = 32,
        /// Out: the largest `count` of one operation on this import.
        max_op_blocks: u32 = 40,
        /// In: must be zero.
        reserved: u32 = 44,
    }
}

/// `RRDMA_IMPORT_SIZE_VER0`: `struct rrdma_import` before `max_op_blocks`.
pub const IMPORT_SIZE_VER0: usize = 40;

/// `RRDMA_OP_READ`.
pub const OP_READ: u32 = 1;
/// `RRDMA_OP_WRITE`.
pub const OP_WRITE: u32 = 2;
/// `RRDMA_OP_FENCE`: completes once every earlier write on its import is
/// placed.
pub const OP_FENCE: u32 = 3;
/// `RRDMA_OP_F_SENT`: a write completes once sent, not once placed.
pub const OP_F_SENT: u32 = 1 << 0;

abi_struct! {
    /// `struct rrdma_op`.
    pub struct Op (size = 48) {
        /// `OP_READ`, `OP_WRITE` or `OP_FENCE`.
        opcode: u32 = 0,
        /// `OP_F_SENT` (a write only), or zero.
        flags: u32 = 4,
        /// Import handle.
        remote: u32 = 8,
        /// Region handle.
        local: u32 = 12,
        /// First remote block.
        remote_block: u64 = 16,
        /// First local block.
        local_block: u64 = 24,
        /// Number of blocks.
        count: u32 = 32,
        /// Must be zero.
        reserved: u32 = 36,
        /// Returned in the completion.
        user_data: u64 = 40,
    }
}

/// `RRDMA_OP_SIZE_VER0`.
pub const OP_SIZE_VER0: usize = 48;

abi_struct! {
    /// `struct rrdma_submit`.
    pub struct Submit (size = 24) {
        /// In: user pointer to the ops.
        ops: u64 = 0,
        /// In: number of ops.
        count: u32 = 8,
        /// In: the caller's op size.
        op_size: u32 = 12,
        /// In: must be zero.
        flags: u32 = 16,
        /// Out: ops posted (or index of the refused op).
        submitted: u32 = 20,
    }
}

/// `RRDMA_SUBMIT_MAX`.
pub const SUBMIT_MAX: u32 = 1024;

abi_struct! {
    /// `struct rrdma_completion`.
    pub struct Completion (size = 24) {
        /// The op's user data.
        user_data: u64 = 0,
        /// 0 or a negative errno.
        status: i32 = 8,
        /// The op's opcode.
        opcode: u32 = 12,
        /// Bytes transferred.
        bytes: u64 = 16,
    }
}

/// `RRDMA_IOCTL_LISTEN`.
pub const IOCTL_LISTEN: IoctlCmd = iowr(IOCTL_MAGIC, 0x03, Listen::SIZE);
/// `RRDMA_IOCTL_ACCEPT`.
pub const IOCTL_ACCEPT: IoctlCmd = iowr(IOCTL_MAGIC, 0x04, Accept::SIZE);
/// `RRDMA_IOCTL_CONNECT`.
pub const IOCTL_CONNECT: IoctlCmd = iowr(IOCTL_MAGIC, 0x05, Connect::SIZE);
/// `RRDMA_IOCTL_DISCONNECT`.
pub const IOCTL_DISCONNECT: IoctlCmd = iow(IOCTL_MAGIC, 0x06, HandleArg::SIZE);
/// `RRDMA_IOCTL_EXPORT`.
pub const IOCTL_EXPORT: IoctlCmd = iowr(IOCTL_MAGIC, 0x07, Export::SIZE);
/// `RRDMA_IOCTL_UNEXPORT`.
pub const IOCTL_UNEXPORT: IoctlCmd = iow(IOCTL_MAGIC, 0x08, Unexport::SIZE);
/// `RRDMA_IOCTL_IMPORT`.
pub const IOCTL_IMPORT: IoctlCmd = iowr(IOCTL_MAGIC, 0x09, Import::SIZE);
/// `RRDMA_IOCTL_UNIMPORT`.
pub const IOCTL_UNIMPORT: IoctlCmd = iow(IOCTL_MAGIC, 0x0a, HandleArg::SIZE);
/// `RRDMA_IOCTL_UNLISTEN`.
pub const IOCTL_UNLISTEN: IoctlCmd = iow(IOCTL_MAGIC, 0x0b, HandleArg::SIZE);
/// `RRDMA_IOCTL_SUBMIT`.
pub const IOCTL_SUBMIT: IoctlCmd = iowr(IOCTL_MAGIC, 0x0c, Submit::SIZE);
/// `RRDMA_IOCTL_RW_SYNC`.
pub const IOCTL_RW_SYNC: IoctlCmd = iow(IOCTL_MAGIC, 0x0d, Op::SIZE);
/// `RRDMA_URING_CMD_OP`: the `cmd_op` of an io_uring command carrying one
/// [`Op`] in a 128-byte SQE.
pub const URING_CMD_OP: IoctlCmd = iow(IOCTL_MAGIC, 0x40, Op::SIZE);
