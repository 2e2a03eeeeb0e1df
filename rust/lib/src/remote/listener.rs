// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Listening: LISTEN, ACCEPT and UNLISTEN.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use rrdma_abi::uapi::{self, Accept, Listen};

use super::{from_addr, ms, to_addr, Connection};
use crate::Rrdma;

/// A listening endpoint. Stops listening on drop.
#[derive(Debug)]
pub struct Listener<'a> {
    dev: &'a Rrdma,
    handle: u32,
}

impl Rrdma {
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
