// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Connections, exports, imports and block operations.
//!
//! [`Listener`], [`Connection`], [`Export`] and [`RemoteRegion`] are RAII
//! handles: dropping one stops listening, disconnects, unexports or
//! forgets the import. Block operations are submitted in batches
//! ([`Rrdma::submit`]) and their completions read back
//! ([`Rrdma::completions`]), or run one at a time ([`RemoteRegion::read`],
//! [`RemoteRegion::write`]).
//!
//! Each handle's file holds its type, the calls that make it (but
//! `accept`, with the listener) and its drop: `listener.rs`,
//! `connection.rs` (with its options), `export.rs`, `import.rs`. Block
//! operations in batches are in `submit.rs`, the socket address
//! conversions in `addr.rs`.

use std::io;
use std::time::Duration;

use rrdma_abi::uapi::HandleArg;

use crate::Rrdma;

mod addr;
mod connection;
mod export;
mod import;
mod listener;
mod submit;

pub use addr::{from_addr, to_addr};
pub use connection::{ConnectOptions, Connection, Keepalive};
pub use export::{Access, Export};
pub use import::RemoteRegion;
pub use listener::Listener;
pub use submit::{errno, SubmitError};

fn ms(d: Option<Duration>) -> u32 {
    match d {
        None => u32::MAX,
        Some(d) => u32::try_from(d.as_millis()).unwrap_or(u32::MAX - 1).max(1),
    }
}

impl Rrdma {
    fn handle_op(&self, cmd: u32, handle: u32) -> io::Result<()> {
        let mut b = HandleArg { handle, flags: 0 }.encode();
        self.ioctl_bytes(cmd, &mut b)
    }

    /// Issues `DISCONNECT`, `UNIMPORT` or `UNLISTEN` on a raw handle.
    pub fn release_raw(&self, cmd: u32, handle: u32) -> io::Result<()> {
        self.handle_op(cmd, handle)
    }
}
