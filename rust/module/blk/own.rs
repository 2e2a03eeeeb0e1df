// SPDX-License-Identifier: GPL-2.0

//! A disk's own connection. BLK_MAP dials the peer of the import it is
//! given again, from no file (its `Shared` has no wait queue), with the
//! module's keepalive, reconnecting for as long as the disk is mapped
//! (`Retry::Forever`: the loss timeout fails its I/O, not a connection
//! that gave up), and imports the same export over it: the disk is then
//! no file's, as nvme-rdma's and RNBD's belong to the kernel. The caller's
//! connection and import stay the caller's, and BLK_UNMAP ends the disk's.

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::abi::conn::Event;
use crate::abi::errno::{EINVAL, ENOENT};
use crate::abi::{keepalive, Result};
use crate::conn::{Conn, Import, Retry, DEFAULT_TIMEOUT_MS};
use crate::context::Context;
use crate::ffi::{self, warn_user};
use crate::shared::Shared;

/// A disk's connection, which belongs to no file: dropped, it ends (a
/// failed BLK_MAP, or the disk's unmap).
pub(crate) struct ConnEnd(Arc<Conn>);

impl ConnEnd {
    /// The connection.
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.0
    }
}

impl Drop for ConnEnd {
    fn drop(&mut self) {
        Conn::destroy(&self.0, Event::UserClose);
    }
}

/// A disk's own import, and the end of its connection.
pub(crate) struct OwnImport {
    pub(crate) import: Arc<Import>,
    pub(crate) end: ConnEnd,
}

/// Imports `import`'s export again over a new connection to its peer:
/// `EINVAL` if `import`'s connection was accepted by a listener (its
/// peer's port listens for nothing), else the errnos of CONNECT and
/// IMPORT. Waits for both (each up to [`DEFAULT_TIMEOUT_MS`]).
pub(crate) fn own_import(context: &Arc<Context>, import: &Import) -> Result<OwnImport> {
    let Some(addr) = import.conn.dialed() else {
        warn_user!("BLK_MAP: the import's connection was accepted, not made with CONNECT\n");
        return Err(EINVAL);
    };
    let token = import.token().ok_or(ENOENT)?;
    let shared = Shared::new(context.clone(), None)?;
    let (ms, misses) = ffi::keepalive_params();
    let conn = Conn::connect(
        &shared,
        &addr,
        DEFAULT_TIMEOUT_MS,
        keepalive::from_params(ms, misses),
        Retry::Forever,
    )
    .inspect_err(|e| warn_user!("BLK_MAP: the disk's connection failed: errno {}\n", e.get()))?;
    let end = ConnEnd(conn);
    let own = end
        .0
        .import(token, DEFAULT_TIMEOUT_MS)
        .inspect_err(|e| warn_user!("BLK_MAP: the disk's import failed: errno {}\n", e.get()))?;
    Ok(OwnImport {
        import: Arc::new(own, GFP_KERNEL)?,
        end,
    })
}
