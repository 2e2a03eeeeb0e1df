// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Exporting a local region to peers: EXPORT and UNEXPORT.

use std::io;

use rrdma_abi::uapi::{self, Export as ExportArg, Unexport, ACCESS_READ, ACCESS_WRITE};

use super::Connection;
use crate::{Region, Rrdma};

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

/// An export of a local region. Revoked on drop.
#[derive(Debug)]
pub struct Export<'a> {
    dev: &'a Rrdma,
    token: u64,
}

impl Rrdma {
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
