// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Checks of what a caller asks for before anything is posted: addresses,
//! export access modes, block operations and fences.

use super::super::blocks::Geometry;
use super::super::errno::{Errno, E2BIG, EAFNOSUPPORT, EINVAL, EKEYREVOKED, EPERM};
use super::super::uapi::{
    Addr, Op, ACCESS_READ, ACCESS_WRITE, AF_INET, AF_INET6, OP_FENCE, OP_F_SENT, OP_READ, OP_WRITE,
};

/// Checks an address for LISTEN or CONNECT: a known family, a port, and
/// zeros where the family has none.
pub fn check_addr(a: &Addr) -> Result<(), Errno> {
    match a.family {
        AF_INET if a.scope_id != 0 || a.addr[4..].iter().any(|&b| b != 0) => Err(EINVAL),
        AF_INET | AF_INET6 if a.port == 0 => Err(EINVAL),
        AF_INET | AF_INET6 => Ok(()),
        _ => Err(EAFNOSUPPORT),
    }
}

/// Checks an `EXPORT` access mode; returns whether peers may write.
pub fn export_access(access: u32) -> Result<bool, Errno> {
    match access {
        ACCESS_READ => Ok(false),
        a if a == ACCESS_READ | ACCESS_WRITE => Ok(true),
        _ => Err(EINVAL),
    }
}

/// Direction of a block operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Remote → local (RDMA READ).
    Read,
    /// Local → remote (RDMA WRITE).
    Write,
}

/// A checked block operation: byte offsets into both regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    /// Direction.
    pub dir: Dir,
    /// Offset in the local region.
    pub local_off: u64,
    /// Offset in the remote region.
    pub remote_off: u64,
    /// Bytes.
    pub len: u64,
    /// A write that completes once sent ([`OP_F_SENT`]), not once placed.
    pub sent: bool,
}

/// What the initiator knows of an imported region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteView {
    /// The remote region's geometry.
    pub geometry: Geometry,
    /// Whether the export allows writes.
    pub writable: bool,
    /// Whether the exporter revoked it.
    pub revoked: bool,
    /// The largest block count of one operation (see [`max_op_blocks`]).
    pub max_blocks: u32,
}

/// Checks `op` (already resolved to its local region and remote view).
///
/// Reserved fields and flags (`OP_F_SENT` on anything but a write):
/// `EINVAL`; different block sizes: `EINVAL`;
/// a range outside either region: `ERANGE` (or `EOVERFLOW` / `EINVAL` from
/// [`Geometry::span`]); more blocks than one operation on the import may
/// move: `E2BIG`; a write to a read-only export: `EPERM`; a revoked
/// export: `EKEYREVOKED`.
pub fn check_op(op: &Op, local: &Geometry, remote: &RemoteView) -> Result<Checked, Errno> {
    let dir = match op.opcode {
        OP_READ => Dir::Read,
        OP_WRITE => Dir::Write,
        _ => return Err(EINVAL),
    };
    let flags_ok = match dir {
        Dir::Read => 0,
        Dir::Write => OP_F_SENT,
    };
    if op.flags & !flags_ok != 0 || op.reserved != 0 {
        return Err(EINVAL);
    }
    if local.block_size() != remote.geometry.block_size() {
        return Err(EINVAL);
    }
    let (local_off, len) = local.span(op.local_block, op.count)?;
    let (remote_off, _) = remote.geometry.span(op.remote_block, op.count)?;
    if op.count > remote.max_blocks {
        return Err(E2BIG);
    }
    if remote.revoked {
        return Err(EKEYREVOKED);
    }
    if dir == Dir::Write && !remote.writable {
        return Err(EPERM);
    }
    Ok(Checked {
        dir,
        local_off,
        remote_off,
        len,
        sent: op.flags & OP_F_SENT != 0,
    })
}

/// Checks a fence ([`OP_FENCE`]) on an import of view `remote`: it names
/// its import only, so every other field but `user_data` must be zero
/// (`EINVAL`); a revoked export: `EKEYREVOKED`.
pub fn check_fence(op: &Op, remote: &RemoteView) -> Result<(), Errno> {
    if op.opcode != OP_FENCE
        || op.flags != 0
        || op.reserved != 0
        || op.local != 0
        || op.remote_block != 0
        || op.local_block != 0
        || op.count != 0
    {
        return Err(EINVAL);
    }
    if remote.revoked {
        return Err(EKEYREVOKED);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::{EOVERFLOW, ERANGE};

    fn op(opcode: u32, local: u64, remote: u64, count: u32) -> Op {
        Op {
            opcode,
            local_block: local,
            remote_block: remote,
            count,
            ..Op::zeroed()
        }
    }

    fn view(nblocks: u64, writable: bool) -> RemoteView {
        RemoteView {
            geometry: Geometry::new(4096, nblocks, u64::MAX).unwrap(),
            writable,
            revoked: false,
            max_blocks: 64,
        }
    }

    #[test]
    fn addresses() {
        let mut a = Addr {
            family: AF_INET,
            port: 7471,
            ..Addr::zeroed()
        };
        a.addr[..4].copy_from_slice(&[10, 99, 0, 1]);
        assert_eq!(check_addr(&a), Ok(()));
        assert_eq!(check_addr(&Addr { port: 0, ..a }), Err(EINVAL));
        assert_eq!(check_addr(&Addr { scope_id: 1, ..a }), Err(EINVAL));
        let mut tail = a;
        tail.addr[4] = 1;
        assert_eq!(check_addr(&tail), Err(EINVAL));
        assert_eq!(
            check_addr(&Addr {
                family: AF_INET6,
                ..tail
            }),
            Ok(())
        );
        assert_eq!(check_addr(&Addr { family: 1, ..a }), Err(EAFNOSUPPORT));
    }

    #[test]
    fn access_modes() {
        assert_eq!(export_access(ACCESS_READ), Ok(false));
        assert_eq!(export_access(ACCESS_READ | ACCESS_WRITE), Ok(true));
        assert_eq!(export_access(ACCESS_WRITE), Err(EINVAL));
        assert_eq!(export_access(0), Err(EINVAL));
        assert_eq!(export_access(4 | ACCESS_READ), Err(EINVAL));
    }

    #[test]
    fn ops_are_checked_before_posting() {
        let local = Geometry::new(4096, 8, u64::MAX).unwrap();
        let rw = view(16, true);
        let c = check_op(&op(OP_WRITE, 1, 2, 3), &local, &rw).unwrap();
        assert_eq!((c.local_off, c.remote_off, c.len), (4096, 8192, 3 * 4096));
        assert_eq!(check_op(&op(OP_READ, 8, 0, 1), &local, &rw), Err(ERANGE));
        assert_eq!(check_op(&op(OP_READ, 0, 16, 1), &local, &rw), Err(ERANGE));
        assert_eq!(check_op(&op(OP_READ, 0, 15, 2), &local, &rw), Err(ERANGE));
        assert_eq!(check_op(&op(OP_READ, 0, 0, 0), &local, &rw), Err(EINVAL));
        let big = Geometry::new(4096, 1000, u64::MAX).unwrap();
        let wide = view(1000, true);
        assert!(check_op(&op(OP_READ, 0, 0, 64), &big, &wide).is_ok());
        assert_eq!(check_op(&op(OP_READ, 0, 0, 65), &big, &wide), Err(E2BIG));
        assert_eq!(
            check_op(&op(OP_READ, 0, u64::MAX, 1), &local, &rw),
            Err(EOVERFLOW)
        );
        assert_eq!(check_op(&op(3, 0, 0, 1), &local, &rw), Err(EINVAL));
        assert_eq!(
            check_op(
                &Op {
                    flags: 1,
                    ..op(OP_READ, 0, 0, 1)
                },
                &local,
                &rw
            ),
            Err(EINVAL)
        );
        assert_eq!(
            check_op(
                &Op {
                    reserved: 1,
                    ..op(OP_READ, 0, 0, 1)
                },
                &local,
                &rw
            ),
            Err(EINVAL)
        );
        assert_eq!(
            check_op(&op(OP_WRITE, 0, 0, 1), &local, &view(16, false)),
            Err(EPERM)
        );
        assert!(check_op(&op(OP_READ, 0, 0, 1), &local, &view(16, false)).is_ok());
        let revoked = RemoteView {
            revoked: true,
            ..rw
        };
        assert_eq!(
            check_op(&op(OP_READ, 0, 0, 1), &local, &revoked),
            Err(EKEYREVOKED)
        );
        let other = RemoteView {
            geometry: Geometry::new(512, 64, u64::MAX).unwrap(),
            ..rw
        };
        assert_eq!(check_op(&op(OP_READ, 0, 0, 1), &local, &other), Err(EINVAL));
    }

    #[test]
    fn sent_is_a_write_flag() {
        let local = Geometry::new(4096, 8, u64::MAX).unwrap();
        let rw = view(16, true);
        let sent = |opcode, flags| Op {
            flags,
            ..op(opcode, 0, 0, 1)
        };
        assert!(
            check_op(&sent(OP_WRITE, OP_F_SENT), &local, &rw)
                .unwrap()
                .sent
        );
        assert!(!check_op(&sent(OP_WRITE, 0), &local, &rw).unwrap().sent);
        assert_eq!(
            check_op(&sent(OP_READ, OP_F_SENT), &local, &rw),
            Err(EINVAL)
        );
        assert_eq!(check_op(&sent(OP_WRITE, 2), &local, &rw), Err(EINVAL));
        assert_eq!(check_op(&sent(OP_FENCE, 0), &local, &rw), Err(EINVAL));
    }

    #[test]
    fn a_fence_names_its_import_only() {
        let rw = view(16, true);
        let fence = Op {
            remote: 7,
            user_data: 9,
            ..op(OP_FENCE, 0, 0, 0)
        };
        assert_eq!(check_fence(&fence, &rw), Ok(()));
        assert_eq!(check_fence(&fence, &view(16, false)), Ok(()));
        for bad in [
            Op {
                flags: OP_F_SENT,
                ..fence
            },
            Op { local: 1, ..fence },
            Op {
                remote_block: 1,
                ..fence
            },
            Op {
                local_block: 1,
                ..fence
            },
            Op { count: 1, ..fence },
            Op {
                reserved: 1,
                ..fence
            },
            Op {
                opcode: OP_WRITE,
                ..fence
            },
        ] {
            assert_eq!(check_fence(&bad, &rw), Err(EINVAL));
        }
        let revoked = RemoteView {
            revoked: true,
            ..rw
        };
        assert_eq!(check_fence(&fence, &revoked), Err(EKEYREVOKED));
    }
}
