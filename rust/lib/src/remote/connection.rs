// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Connecting: CONNECT with its options (keepalive, reconnect), and
//! DISCONNECT.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use rrdma_abi::uapi::{self, Connect};

use super::{ms, to_addr};
use crate::Rrdma;

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
    pub(super) dev: &'a Rrdma,
    pub(super) handle: u32,
    pub(super) peer: Option<SocketAddr>,
}

impl Rrdma {
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
