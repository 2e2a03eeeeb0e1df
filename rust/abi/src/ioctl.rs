// SPDX-License-Identifier: GPL-2.0 OR MIT

//! ioctl command numbers and the rules for size-extensible arguments.
//!
//! Commands are matched on type byte, number and direction; the argument
//! size is taken from the command (`_IOC_SIZE`) so that one command number
//! serves every version of its struct, as `copy_struct_from_user()` does.

use super::blkdev;
use super::errno::{Errno, E2BIG, EINVAL, ENOTTY};
use super::status;
use super::uapi;

/// An ioctl command number (`unsigned int cmd`).
pub type IoctlCmd = u32;

const NRBITS: u32 = 8;
const TYPEBITS: u32 = 8;
const SIZEBITS: u32 = 14;
const NRSHIFT: u32 = 0;
const TYPESHIFT: u32 = NRSHIFT + NRBITS;
const SIZESHIFT: u32 = TYPESHIFT + TYPEBITS;
const DIRSHIFT: u32 = SIZESHIFT + SIZEBITS;

/// `_IOC_WRITE`: userspace writes the argument.
pub const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: userspace reads the argument.
pub const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)`.
pub const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> IoctlCmd {
    assert!(size < (1 << SIZEBITS));
    (dir << DIRSHIFT)
        | ((ty as u32) << TYPESHIFT)
        | ((nr as u32) << NRSHIFT)
        | ((size as u32) << SIZESHIFT)
}

/// `_IOW(type, nr, size)`.
pub const fn iow(ty: u8, nr: u8, size: usize) -> IoctlCmd {
    ioc(IOC_WRITE, ty, nr, size)
}

/// `_IOWR(type, nr, size)`.
pub const fn iowr(ty: u8, nr: u8, size: usize) -> IoctlCmd {
    ioc(IOC_READ | IOC_WRITE, ty, nr, size)
}

/// `_IOC_DIR(cmd)`.
pub const fn dir(cmd: IoctlCmd) -> u32 {
    cmd >> DIRSHIFT
}

/// `_IOC_TYPE(cmd)`.
pub const fn ty(cmd: IoctlCmd) -> u8 {
    (cmd >> TYPESHIFT) as u8
}

/// `_IOC_NR(cmd)`.
pub const fn nr(cmd: IoctlCmd) -> u8 {
    (cmd >> NRSHIFT) as u8
}

/// `_IOC_SIZE(cmd)`.
pub const fn size(cmd: IoctlCmd) -> usize {
    ((cmd >> SIZESHIFT) & ((1 << SIZEBITS) - 1)) as usize
}

/// The commands of `/dev/rrdma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `RRDMA_IOCTL_GET_INFO`.
    GetInfo,
    /// `RRDMA_IOCTL_REGION_CREATE`.
    RegionCreate,
    /// `RRDMA_IOCTL_REGION_DESTROY`.
    RegionDestroy,
    /// `RRDMA_IOCTL_LISTEN`.
    Listen,
    /// `RRDMA_IOCTL_ACCEPT`.
    Accept,
    /// `RRDMA_IOCTL_CONNECT`.
    Connect,
    /// `RRDMA_IOCTL_DISCONNECT`.
    Disconnect,
    /// `RRDMA_IOCTL_EXPORT`.
    Export,
    /// `RRDMA_IOCTL_UNEXPORT`.
    Unexport,
    /// `RRDMA_IOCTL_IMPORT`.
    Import,
    /// `RRDMA_IOCTL_UNIMPORT`.
    Unimport,
    /// `RRDMA_IOCTL_UNLISTEN`.
    Unlisten,
    /// `RRDMA_IOCTL_SUBMIT`.
    Submit,
    /// `RRDMA_IOCTL_RW_SYNC`.
    RwSync,
    /// `RRDMA_IOCTL_REGION_REGISTER`.
    RegionRegister,
    /// `RRDMA_IOCTL_BLK_MAP`.
    BlkMap,
    /// `RRDMA_IOCTL_BLK_UNMAP`.
    BlkUnmap,
    /// `RRDMA_IOCTL_STATUS`.
    Status,
}

/// One row of the command table.
struct CommandSpec {
    nr: u8,
    dir: u32,
    /// First published size of the argument.
    min_size: usize,
    /// Size of the argument as this build knows it.
    size: usize,
    cmd: Command,
}

const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        nr: 0x00,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::INFO_SIZE_VER0,
        size: uapi::Info::SIZE,
        cmd: Command::GetInfo,
    },
    CommandSpec {
        nr: 0x01,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::REGION_CREATE_SIZE_VER0,
        size: uapi::RegionCreate::SIZE,
        cmd: Command::RegionCreate,
    },
    CommandSpec {
        nr: 0x02,
        dir: IOC_WRITE,
        min_size: uapi::REGION_DESTROY_SIZE_VER0,
        size: uapi::RegionDestroy::SIZE,
        cmd: Command::RegionDestroy,
    },
    CommandSpec {
        nr: 0x03,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::Listen::SIZE,
        size: uapi::Listen::SIZE,
        cmd: Command::Listen,
    },
    CommandSpec {
        nr: 0x04,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::Accept::SIZE,
        size: uapi::Accept::SIZE,
        cmd: Command::Accept,
    },
    CommandSpec {
        nr: 0x05,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::Connect::SIZE,
        size: uapi::Connect::SIZE,
        cmd: Command::Connect,
    },
    CommandSpec {
        nr: 0x06,
        dir: IOC_WRITE,
        min_size: uapi::HandleArg::SIZE,
        size: uapi::HandleArg::SIZE,
        cmd: Command::Disconnect,
    },
    CommandSpec {
        nr: 0x07,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::Export::SIZE,
        size: uapi::Export::SIZE,
        cmd: Command::Export,
    },
    CommandSpec {
        nr: 0x08,
        dir: IOC_WRITE,
        min_size: uapi::Unexport::SIZE,
        size: uapi::Unexport::SIZE,
        cmd: Command::Unexport,
    },
    CommandSpec {
        nr: 0x09,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::IMPORT_SIZE_VER0,
        size: uapi::Import::SIZE,
        cmd: Command::Import,
    },
    CommandSpec {
        nr: 0x0a,
        dir: IOC_WRITE,
        min_size: uapi::HandleArg::SIZE,
        size: uapi::HandleArg::SIZE,
        cmd: Command::Unimport,
    },
    CommandSpec {
        nr: 0x0b,
        dir: IOC_WRITE,
        min_size: uapi::HandleArg::SIZE,
        size: uapi::HandleArg::SIZE,
        cmd: Command::Unlisten,
    },
    CommandSpec {
        nr: 0x0c,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::Submit::SIZE,
        size: uapi::Submit::SIZE,
        cmd: Command::Submit,
    },
    CommandSpec {
        nr: 0x0d,
        dir: IOC_WRITE,
        min_size: uapi::Op::SIZE,
        size: uapi::Op::SIZE,
        cmd: Command::RwSync,
    },
    CommandSpec {
        nr: 0x0e,
        dir: IOC_READ | IOC_WRITE,
        min_size: uapi::REGION_REGISTER_SIZE_VER0,
        size: uapi::RegionRegister::SIZE,
        cmd: Command::RegionRegister,
    },
    CommandSpec {
        nr: 0x0f,
        dir: IOC_READ | IOC_WRITE,
        min_size: blkdev::BlkMap::SIZE,
        size: blkdev::BlkMap::SIZE,
        cmd: Command::BlkMap,
    },
    CommandSpec {
        nr: 0x10,
        dir: IOC_WRITE,
        min_size: blkdev::BlkUnmap::SIZE,
        size: blkdev::BlkUnmap::SIZE,
        cmd: Command::BlkUnmap,
    },
    CommandSpec {
        nr: 0x11,
        dir: IOC_READ | IOC_WRITE,
        min_size: status::Status::SIZE,
        size: status::Status::SIZE,
        cmd: Command::Status,
    },
];

/// A command recognised by [`decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Which command.
    pub cmd: Command,
    /// The caller's size of the argument (`_IOC_SIZE`).
    pub user_size: usize,
    /// This build's size of the argument.
    pub kernel_size: usize,
}

/// Recognises `cmd`.
///
/// A foreign type byte, an unknown number or a wrong direction is not one of
/// ours (`ENOTTY`, as the VFS expects); an argument shorter than its first
/// version is `EINVAL`.
pub fn decode(cmd: IoctlCmd) -> Result<Decoded, Errno> {
    if ty(cmd) != uapi::IOCTL_MAGIC {
        return Err(ENOTTY);
    }
    let spec = COMMANDS
        .iter()
        .find(|s| s.nr == nr(cmd) && s.dir == dir(cmd))
        .ok_or(ENOTTY)?;
    let user_size = size(cmd);
    if user_size < spec.min_size {
        return Err(EINVAL);
    }
    Ok(Decoded {
        cmd: spec.cmd,
        user_size,
        kernel_size: spec.size,
    })
}

/// How an extensible struct of `user_size` bytes is copied to and from a
/// kernel struct of `kernel_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtCopy {
    /// Bytes copied in both directions: the smaller size.
    pub copy_len: usize,
    /// The caller's bytes the kernel does not know, `[start, end)`; they
    /// must all be zero.
    pub unknown_tail: Option<(usize, usize)>,
}

/// `copy_struct_from_user()` semantics: a shorter struct is zero-extended, a
/// longer one is accepted if its extra tail is zero.
pub fn ext_copy(user_size: usize, kernel_size: usize) -> ExtCopy {
    ExtCopy {
        copy_len: user_size.min(kernel_size),
        unknown_tail: (user_size > kernel_size).then_some((kernel_size, user_size)),
    }
}

/// Checks the part of a caller's struct this kernel does not know.
pub fn check_unknown_tail(tail: &[u8]) -> Result<(), Errno> {
    if tail.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(E2BIG)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_info_matches_c_macro() {
        // _IOWR(0xE7, 0x00, 40) computed by hand: dir 3 << 30 | 40 << 16 | 0xE7 << 8.
        assert_eq!(uapi::IOCTL_GET_INFO, 0xC028_E700);
        let d = decode(uapi::IOCTL_GET_INFO).unwrap();
        assert_eq!(d.cmd, Command::GetInfo);
        assert_eq!(d.user_size, 40);
    }

    #[test]
    fn blk_commands_match_c_macros() {
        // _IOWR(0xE7, 0x0f, 16) and _IOW(0xE7, 0x10, 8) by hand.
        assert_eq!(blkdev::IOCTL_BLK_MAP, 0xC010_E70F);
        assert_eq!(blkdev::IOCTL_BLK_UNMAP, 0x4008_E710);
        assert_eq!(decode(blkdev::IOCTL_BLK_MAP).unwrap().cmd, Command::BlkMap);
        assert_eq!(
            decode(blkdev::IOCTL_BLK_UNMAP).unwrap().cmd,
            Command::BlkUnmap
        );
    }

    #[test]
    fn foreign_and_unknown_commands_are_enotty() {
        assert_eq!(decode(iowr(0x12, 0x00, 40)), Err(ENOTTY));
        assert_eq!(decode(iowr(uapi::IOCTL_MAGIC, 0x7f, 40)), Err(ENOTTY));
        assert_eq!(decode(ioc(IOC_READ, uapi::IOCTL_MAGIC, 0, 40)), Err(ENOTTY));
        assert_eq!(decode(ioc(0, uapi::IOCTL_MAGIC, 0, 0)), Err(ENOTTY));
    }

    #[test]
    fn short_struct_is_einval_longer_is_accepted() {
        assert_eq!(decode(iowr(uapi::IOCTL_MAGIC, 0, 39)), Err(EINVAL));
        assert_eq!(decode(iowr(uapi::IOCTL_MAGIC, 0, 0)), Err(EINVAL));
        let d = decode(iowr(uapi::IOCTL_MAGIC, 0, 48)).unwrap();
        assert_eq!(d.user_size, 48);
        assert_eq!(d.kernel_size, 40);
    }

    #[test]
    fn ext_copy_rules() {
        assert_eq!(
            ext_copy(40, 40),
            ExtCopy {
                copy_len: 40,
                unknown_tail: None
            }
        );
        assert_eq!(
            ext_copy(48, 40),
            ExtCopy {
                copy_len: 40,
                unknown_tail: Some((40, 48))
            }
        );
        assert_eq!(
            ext_copy(32, 40),
            ExtCopy {
                copy_len: 32,
                unknown_tail: None
            }
        );
        assert_eq!(check_unknown_tail(&[0; 8]), Ok(()));
        assert_eq!(check_unknown_tail(&[0, 0, 1]), Err(E2BIG));
        assert_eq!(check_unknown_tail(&[]), Ok(()));
    }
}
