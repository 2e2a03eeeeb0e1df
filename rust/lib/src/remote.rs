// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Connections, exports, imports and block operations.
//!
//! [`Listener`], [`Connection`], [`Export`] and [`RemoteRegion`] are RAII
//! handles: dropping one stops listening, disconnects, unexports or
//! forgets the import. Block operations are submitted in batches
//! ([`Rrdma::submit`]) and their completions read back
//! ([`Rrdma::completions`]), or run one at a time ([`RemoteRegion::read`],
//! [`RemoteRegion::write`]).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use rrdma_abi::uapi::{
    self, Accept, Addr, Completion, Connect, Export as ExportArg, HandleArg, Import, Listen, Op,
    Submit, Unexport, ACCESS_READ, ACCESS_WRITE, AF_INET, AF_INET6, OP_READ, OP_WRITE,
};

use crate::{Region, Rrdma};

/// Converts a socket address to the ABI's.
pub fn to_addr(sa: SocketAddr) -> Addr {
    let mut a = Addr {
        port: sa.port(),
        ..Addr::zeroed()
    };
    match sa.ip() {
        IpAddr::V4(v4) => {
            a.family = AF_INET;
            a.addr[..4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            a.family = AF_INET6;
            a.addr = v6.octets();
            if let SocketAddr::V6(s) = sa {
                a.scope_id = s.scope_id();
            }
        }
    }
    a
}

/// Converts the ABI's address to a socket address.
pub fn from_addr(a: &Addr) -> Option<SocketAddr> {
    match a.family {
        AF_INET => {
            let o: [u8; 4] = a.addr[..4].try_into().ok()?;
            Some(SocketAddr::from((o, a.port)))
        }
        AF_INET6 => Some(SocketAddr::from((a.addr, a.port))),
        _ => None,
    }
}

fn ms(d: Option<Duration>) -> u32 {
    match d {
        None => u32::MAX,
        Some(d) => u32::try_from(d.as_millis()).unwrap_or(u32::MAX - 1).max(1),
    }
}

/// What an export lets peers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Peers may read.
    ReadOnly,
    /// Peers may read and write.
    ReadWrite,
}

impl Access {
    /// The ABI's access bits.
    pub fn bits(self) -> u32 {
        match self {
            Access::ReadOnly => ACCESS_READ,
            Access::ReadWrite => ACCESS_READ | ACCESS_WRITE,
        }
    }
}

/// A listening endpoint. Stops listening on drop.
#[derive(Debug)]
pub struct Listener<'a> {
    dev: &'a Rrdma,
    handle: u32,
}

/// How a connection checks that its peer is still there (CONNECT's
/// keepalive fields; `RRDMA_FEATURE_KEEPALIVE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keepalive {
    /// The module parameters `keepalive_ms` and `keepalive_misses`.
    Module,
    /// No keepalive on this connection.
    Off,
    /// A ping after `interval` (100 ms to 65535 ms) without an answer from
    /// the peer; the connection ends with `ETIMEDOUT` after `misses` (2 to
    /// 255; 0: the module's) intervals without one.
    Every {
        /// Time without an answer before a ping.
        interval: Duration,
        /// Intervals without an answer before the peer is taken as gone.
        misses: u16,
    },
}

/// CONNECT's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// How the connection checks that its peer is still there.
    pub keepalive: Keepalive,
    /// Once established, reconnect after a failure
    /// (`RRDMA_CONNECT_RECONNECT`, `RRDMA_FEATURE_RECONNECT`): operations
    /// in flight then fail with `ECONNRESET`, new ones with `EAGAIN` until
    /// the connection and its imports are back.
    pub reconnect: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            keepalive: Keepalive::Module,
            reconnect: false,
        }
    }
}

/// A connection to a peer. Disconnects on drop.
#[derive(Debug)]
pub struct Connection<'a> {
    dev: &'a Rrdma,
    handle: u32,
    peer: Option<SocketAddr>,
}

/// An export of a local region. Revoked on drop.
#[derive(Debug)]
pub struct Export<'a> {
    dev: &'a Rrdma,
    token: u64,
}

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
    fn handle_op(&self, cmd: u32, handle: u32) -> io::Result<()> {
        let mut b = HandleArg { handle, flags: 0 }.encode();
        self.ioctl_bytes(cmd, &mut b)
    }

    /// Issues `LISTEN`.
    pub fn listen_raw(&self, req: &Listen) -> io::Result<Listen> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_LISTEN, &mut b)?;
        Ok(Listen::decode(&b))
    }

    /// Listens on `addr` (port required); `backlog` 0 means the default.
    pub fn listen(&self, addr: SocketAddr, backlog: u32) -> io::Result<Listener<'_>> {
        let out = self.listen_raw(&Listen {
            addr: to_addr(addr),
            backlog,
            ..Listen::zeroed()
        })?;
        Ok(Listener {
            dev: self,
            handle: out.handle,
        })
    }

    /// Issues `CONNECT`.
    pub fn connect_raw(&self, req: &Connect) -> io::Result<Connect> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_CONNECT, &mut b)?;
        Ok(Connect::decode(&b))
    }

    /// Connects to `addr`, waiting at most `timeout`, with the module's
    /// keepalive settings.
    pub fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<Connection<'_>> {
        self.connect_with(addr, timeout, Keepalive::Module)
    }

    /// Connects to `addr`, waiting at most `timeout`, with `keepalive`.
    pub fn connect_with(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        keepalive: Keepalive,
    ) -> io::Result<Connection<'_>> {
        self.connect_opts(
            addr,
            timeout,
            ConnectOptions {
                keepalive,
                ..ConnectOptions::default()
            },
        )
    }

    /// Connects to `addr`, waiting at most `timeout`, with `opts`.
    pub fn connect_opts(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        opts: ConnectOptions,
    ) -> io::Result<Connection<'_>> {
        let (flags, keepalive_ms, keepalive_misses) = match opts.keepalive {
            Keepalive::Module => (0, 0, 0),
            Keepalive::Off => (uapi::CONNECT_NO_KEEPALIVE, 0, 0),
            Keepalive::Every { interval, misses } => {
                let ms = u16::try_from(interval.as_millis()).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "keepalive interval above 65535 ms",
                    )
                })?;
                (0, ms, misses)
            }
        };
        let reconnect = if opts.reconnect {
            uapi::CONNECT_RECONNECT
        } else {
            0
        };
        let out = self.connect_raw(&Connect {
            addr: to_addr(addr),
            timeout_ms: ms(Some(timeout)),
            flags: flags | reconnect,
            keepalive_ms,
            keepalive_misses,
            ..Connect::zeroed()
        })?;
        Ok(Connection {
            dev: self,
            handle: out.handle,
            peer: Some(addr),
        })
    }

    /// Issues `EXPORT`.
    pub fn export_raw(&self, req: &ExportArg) -> io::Result<ExportArg> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_EXPORT, &mut b)?;
        Ok(ExportArg::decode(&b))
    }

    /// Exports `region` to peers, to any connection of this file or only
    /// to `only`.
    pub fn export(
        &self,
        region: &Region<'_>,
        access: Access,
        only: Option<&Connection<'_>>,
    ) -> io::Result<Export<'_>> {
        let out = self.export_raw(&ExportArg {
            region: region.handle(),
            access: access.bits(),
            conn: only.map_or(0, |c| c.handle),
            ..ExportArg::zeroed()
        })?;
        Ok(Export {
            dev: self,
            token: out.token,
        })
    }

    /// Issues `UNEXPORT`.
    pub fn unexport_raw(&self, token: u64, flags: u32) -> io::Result<()> {
        let mut b = Unexport {
            token,
            flags,
            reserved: 0,
        }
        .encode();
        self.ioctl_bytes(uapi::IOCTL_UNEXPORT, &mut b)
    }

    /// Issues `IMPORT`.
    pub fn import_raw(&self, req: &Import) -> io::Result<Import> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_IMPORT, &mut b)?;
        Ok(Import::decode(&b))
    }

    /// Issues `DISCONNECT`, `UNIMPORT` or `UNLISTEN` on a raw handle.
    pub fn release_raw(&self, cmd: u32, handle: u32) -> io::Result<()> {
        self.handle_op(cmd, handle)
    }

    /// Submits `ops` (in order); returns how many were posted. Each posted
    /// operation yields one completion from [`Rrdma::completions`].
    pub fn submit(&self, ops: &[Op]) -> io::Result<usize> {
        let bytes: Vec<u8> = ops.iter().flat_map(|o| o.encode()).collect();
        let out = self.submit_raw(&Submit {
            ops: bytes.as_ptr() as u64,
            count: ops.len() as u32,
            op_size: Op::SIZE as u32,
            ..Submit::zeroed()
        })?;
        Ok(out.submitted as usize)
    }

    /// Issues `SUBMIT` with `req` as is; on failure the kernel's
    /// `submitted` (the refused operation's index) is in the error's
    /// second member.
    pub fn submit_raw(&self, req: &Submit) -> io::Result<Submit> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_SUBMIT, &mut b).map_err(|e| {
            io::Error::new(
                e.kind(),
                SubmitError {
                    err: e,
                    index: Submit::decode(&b).submitted,
                },
            )
        })?;
        Ok(Submit::decode(&b))
    }

    /// Runs one operation synchronously.
    pub fn rw_sync(&self, op: &Op) -> io::Result<()> {
        let mut b = op.encode();
        self.ioctl_bytes(uapi::IOCTL_RW_SYNC, &mut b)
    }

    /// Reads completions into `out`, waiting at most `timeout` (`None`:
    /// until at least one arrives) for the first; returns how many.
    pub fn completions(
        &self,
        out: &mut [Completion],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let mut pfd = libc::pollfd {
            fd: self.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let t = timeout.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, t) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 {
            return Ok(0);
        }
        let mut buf = vec![0u8; out.len() * Completion::SIZE];
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(self.raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EAGAIN) {
                Ok(0)
            } else {
                Err(e)
            };
        }
        let n = n as usize / Completion::SIZE;
        for (i, c) in out.iter_mut().take(n).enumerate() {
            let mut rec = [0u8; Completion::SIZE];
            rec.copy_from_slice(&buf[i * Completion::SIZE..(i + 1) * Completion::SIZE]);
            *c = Completion::decode(&rec);
        }
        Ok(n)
    }
}

/// A refused `SUBMIT`: the errno and the index of the refused operation.
#[derive(Debug)]
pub struct SubmitError {
    /// The errno.
    pub err: io::Error,
    /// Index of the refused operation (or operations posted).
    pub index: u32,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (operation {})", self.err, self.index)
    }
}

impl std::error::Error for SubmitError {}

/// The errno of an I/O error, looking through [`SubmitError`].
pub fn errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()
            .and_then(|x| x.downcast_ref::<SubmitError>())
            .and_then(|s| s.err.raw_os_error())
    })
}

impl<'a> Listener<'a> {
    /// The listener's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Takes the next established connection, waiting at most `timeout`
    /// (`None`: until a signal). `Ok(None)` when none came in time. The
    /// connection outlives the listener.
    pub fn accept(&self, timeout: Option<Duration>) -> io::Result<Option<Connection<'a>>> {
        let mut b = Accept {
            listener: self.handle,
            timeout_ms: ms(timeout),
            ..Accept::zeroed()
        }
        .encode();
        match self.dev.ioctl_bytes(uapi::IOCTL_ACCEPT, &mut b) {
            Ok(()) => {
                let out = Accept::decode(&b);
                Ok(Some(Connection {
                    dev: self.dev,
                    handle: out.handle,
                    peer: from_addr(&out.peer),
                }))
            }
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        let _ = self.dev.handle_op(uapi::IOCTL_UNLISTEN, self.handle);
    }
}

impl<'a> Connection<'a> {
    /// The connection's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The peer's address, if known.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

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

    /// Disconnects now (also done on drop).
    pub fn disconnect(self) -> io::Result<()> {
        let r = self.dev.handle_op(uapi::IOCTL_DISCONNECT, self.handle);
        std::mem::forget(self);
        r
    }
}

impl Drop for Connection<'_> {
    fn drop(&mut self) {
        let _ = self.dev.handle_op(uapi::IOCTL_DISCONNECT, self.handle);
    }
}

impl Export<'_> {
    /// The token to hand to peers.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Revokes now (also done on drop).
    pub fn revoke(self) -> io::Result<()> {
        let r = self.dev.unexport_raw(self.token, 0);
        std::mem::forget(self);
        r
    }
}

impl Drop for Export<'_> {
    fn drop(&mut self) {
        let _ = self.dev.unexport_raw(self.token, 0);
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
