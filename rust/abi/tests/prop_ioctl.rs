// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the ioctl rules: `decode` accepts exactly the
//! published commands at a size at least their first version's, a struct's
//! unknown tail must be zero, and the extensible copy never exceeds either
//! side's size.

mod branches;

use branches::{Branches, COUNTED_CASES};
use proptest::prelude::*;
use rrdma_abi::errno::{Errno, E2BIG, EINVAL, ENOTTY};
use rrdma_abi::ioctl::{self, decode, ext_copy, Command, Decoded, IoctlCmd};
use rrdma_abi::{blkdev, status, uapi};

/// The published commands, what each decodes to and the first published
/// size of its argument: the table `decode` is checked against.
const OUR_COMMANDS: [(IoctlCmd, Command, usize); 18] = [
    (uapi::IOCTL_GET_INFO, Command::GetInfo, uapi::INFO_SIZE_VER0),
    (
        uapi::IOCTL_REGION_CREATE,
        Command::RegionCreate,
        uapi::REGION_CREATE_SIZE_VER0,
    ),
    (
        uapi::IOCTL_REGION_DESTROY,
        Command::RegionDestroy,
        uapi::REGION_DESTROY_SIZE_VER0,
    ),
    (uapi::IOCTL_LISTEN, Command::Listen, uapi::Listen::SIZE),
    (uapi::IOCTL_ACCEPT, Command::Accept, uapi::Accept::SIZE),
    (uapi::IOCTL_CONNECT, Command::Connect, uapi::Connect::SIZE),
    (
        uapi::IOCTL_DISCONNECT,
        Command::Disconnect,
        uapi::HandleArg::SIZE,
    ),
    (uapi::IOCTL_EXPORT, Command::Export, uapi::Export::SIZE),
    (
        uapi::IOCTL_UNEXPORT,
        Command::Unexport,
        uapi::Unexport::SIZE,
    ),
    (uapi::IOCTL_IMPORT, Command::Import, uapi::IMPORT_SIZE_VER0),
    (
        uapi::IOCTL_UNIMPORT,
        Command::Unimport,
        uapi::HandleArg::SIZE,
    ),
    (
        uapi::IOCTL_UNLISTEN,
        Command::Unlisten,
        uapi::HandleArg::SIZE,
    ),
    (uapi::IOCTL_SUBMIT, Command::Submit, uapi::Submit::SIZE),
    (uapi::IOCTL_RW_SYNC, Command::RwSync, uapi::Op::SIZE),
    (
        uapi::IOCTL_REGION_REGISTER,
        Command::RegionRegister,
        uapi::REGION_REGISTER_SIZE_VER0,
    ),
    (blkdev::IOCTL_BLK_MAP, Command::BlkMap, blkdev::BlkMap::SIZE),
    (
        blkdev::IOCTL_BLK_UNMAP,
        Command::BlkUnmap,
        blkdev::BlkUnmap::SIZE,
    ),
    (status::IOCTL_STATUS, Command::Status, status::Status::SIZE),
];

/// Largest `_IOC_SIZE` a command number can carry.
const IOC_SIZE_MAX: usize = (1 << 14) - 1;

/// What `decode` must answer, from the published table alone: a foreign
/// type byte, or a number and direction that are not one of ours, is
/// `ENOTTY`; a size under the first version's is `EINVAL`.
fn expected_decode(cmd: IoctlCmd) -> Result<Decoded, Errno> {
    if ioctl::ty(cmd) != uapi::IOCTL_MAGIC {
        return Err(ENOTTY);
    }
    let (published, command, min) = *OUR_COMMANDS
        .iter()
        .find(|(c, ..)| ioctl::nr(*c) == ioctl::nr(cmd) && ioctl::dir(*c) == ioctl::dir(cmd))
        .ok_or(ENOTTY)?;
    if ioctl::size(cmd) < min {
        return Err(EINVAL);
    }
    Ok(Decoded {
        cmd: command,
        user_size: ioctl::size(cmd),
        kernel_size: ioctl::size(published),
    })
}

/// An ioctl number as callers issue them: one of ours at its published
/// size, a size a little or anywhere above its first version's (a newer
/// caller); or one of ours broken in one way (shorter than its first
/// version, most often by one byte; another direction; another type
/// byte; a number that is not ours); or any number at all.
fn ioctl_command() -> impl Strategy<Value = IoctlCmd> {
    let ours = 0..OUR_COMMANDS.len();
    let rebuild = |i: usize, f: &dyn Fn(u32, u8, u8, usize) -> (u32, u8, u8, usize)| {
        let c = OUR_COMMANDS[i].0;
        let (dir, ty, nr, size) = f(ioctl::dir(c), ioctl::ty(c), ioctl::nr(c), ioctl::size(c));
        ioctl::ioc(dir, ty, nr, size)
    };
    let unknown_nrs: Vec<u8> = (0..=u8::MAX)
        .filter(|n| !OUR_COMMANDS.iter().any(|(c, ..)| ioctl::nr(*c) == *n))
        .collect();
    prop_oneof![
        2 => ours.clone().prop_map(|i| OUR_COMMANDS[i].0),
        2 => (ours.clone(), 0usize..64).prop_map(move |(i, extra)| {
            let min = OUR_COMMANDS[i].2;
            rebuild(i, &|d, t, n, _| (d, t, n, (min + extra).min(IOC_SIZE_MAX)))
        }),
        2 => (ours.clone(), 0..=IOC_SIZE_MAX).prop_map(move |(i, size)| {
            let min = OUR_COMMANDS[i].2;
            rebuild(i, &|d, t, n, _| (d, t, n, size.max(min)))
        }),
        1 => (ours.clone(), prop_oneof![Just(1usize), 1usize..64]).prop_map(move |(i, short)| {
            let min = OUR_COMMANDS[i].2;
            rebuild(i, &|d, t, n, _| (d, t, n, min - short.min(min)))
        }),
        1 => (ours.clone(), 1u32..4).prop_map(move |(i, turn)| {
            rebuild(i, &|d, t, n, s| ((d + turn) % 4, t, n, s))
        }),
        1 => (ours.clone(), any::<u8>()).prop_map(move |(i, ty)| {
            let ty = if ty == uapi::IOCTL_MAGIC { ty ^ 1 } else { ty };
            rebuild(i, &|d, _, n, s| (d, ty, n, s))
        }),
        1 => (ours, proptest::sample::select(unknown_nrs)).prop_map(move |(i, nr)| {
            rebuild(i, &|d, t, _, s| (d, t, nr, s))
        }),
        1 => any::<u32>(),
    ]
}

#[test]
fn decode_accepts_only_our_commands() {
    let branches = Branches::new(
        "decode_accepts_only_our_commands",
        &["accepted", "EINVAL", "ENOTTY"],
    );
    proptest!(ProptestConfig::with_cases(COUNTED_CASES), |(cmd in ioctl_command())| {
        let got = decode(cmd);
        prop_assert_eq!(got, expected_decode(cmd), "cmd {:#010x}", cmd);
        match got {
            Ok(_) => branches.took("accepted"),
            Err(e) if e == EINVAL => branches.took("EINVAL"),
            Err(_) => branches.took("ENOTTY"),
        }
    });
    branches.require(&[("accepted", 30), ("EINVAL", 3), ("ENOTTY", 10)]);
}

/// Where a byte of a struct's tail is set.
#[derive(Clone, Copy, Debug)]
enum TailByte {
    First,
    Last,
    At(proptest::sample::Index),
}

/// The tail of a caller's struct that this kernel does not know: zero, as
/// a caller that zeroes its struct leaves it, or with a byte or two set
/// (first, last or anywhere).
fn struct_tail() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        Just(TailByte::First),
        Just(TailByte::Last),
        any::<proptest::sample::Index>().prop_map(TailByte::At),
    ];
    let set = prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec((byte, 1u8..=u8::MAX), 1..3),
    ];
    (0usize..256, set).prop_map(|(len, set)| {
        let mut tail = vec![0u8; len];
        for (at, v) in set {
            if len > 0 {
                let i = match at {
                    TailByte::First => 0,
                    TailByte::Last => len - 1,
                    TailByte::At(x) => x.index(len),
                };
                tail[i] = v;
            }
        }
        tail
    })
}

#[test]
fn unknown_tail_must_be_zero() {
    let branches = Branches::new("unknown_tail_must_be_zero", &["zero", "E2BIG"]);
    proptest!(ProptestConfig::with_cases(COUNTED_CASES), |(tail in struct_tail())| {
        let all_zero = tail.iter().all(|&b| b == 0);
        let got = ioctl::check_unknown_tail(&tail);
        prop_assert_eq!(got, if all_zero { Ok(()) } else { Err(E2BIG) });
        branches.took(if all_zero { "zero" } else { "E2BIG" });
    });
    branches.require(&[("zero", 30), ("E2BIG", 30)]);
}

proptest! {
    #[test]
    fn ext_copy_never_exceeds_either_size(user in 0usize..20000, kernel in 1usize..4096) {
        let p = ext_copy(user, kernel);
        prop_assert!(p.copy_len <= user && p.copy_len <= kernel);
        match p.unknown_tail {
            Some((s, e)) => prop_assert!(s == kernel && e == user && user > kernel),
            None => prop_assert!(user <= kernel),
        }
    }
}
