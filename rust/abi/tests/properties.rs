// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the ABI rules: whatever userspace passes, the rules
//! never panic, never accept what they must refuse, and the struct codec is
//! lossless.
//!
//! Inputs are built, not drawn at random: a random ioctl number, GET_INFO
//! argument or control message is almost never one the rules accept, and a
//! property whose accepting branch never runs passes without testing
//! anything. So generators start from valid inputs and break some of them
//! in one way, and the properties count their branches ([`Branches`]) and
//! fail when one is no longer reached often enough.

mod branches;

use branches::Branches;
use proptest::prelude::*;
use rrdma_abi::errno::{Errno, E2BIG, EINVAL, ENOTTY, EOVERFLOW};
use rrdma_abi::info::validate_request;
use rrdma_abi::ioctl::{self, decode, ext_copy, Command, Decoded, IoctlCmd};
use rrdma_abi::uapi::{self, DeviceInfo, Info, DEVICE_ENTRY_SIZE_MAX, DEVICE_INFO_SIZE_VER0};

/// Cases of the properties that count their branches: enough for the
/// shares to be stable, few enough to stay well under a second.
const COUNTED_CASES: u32 = 1000;

fn any_info() -> impl Strategy<Value = Info> {
    (any::<[u64; 5]>(), any::<bool>(), any::<bool>()).prop_map(|(w, zero_flags, zero_res)| {
        let mut i = Info::decode(&{
            let mut b = [0u8; Info::SIZE];
            for (k, v) in w.iter().enumerate() {
                b[k * 8..k * 8 + 8].copy_from_slice(&v.to_ne_bytes());
            }
            b
        });
        if zero_flags {
            i.flags = 0;
        }
        if zero_res {
            i.reserved = 0;
        }
        i
    })
}

/// The published commands, what each decodes to and the first published
/// size of its argument: the table `decode` is checked against.
const OUR_COMMANDS: [(IoctlCmd, Command, usize); 14] = [
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

    #[test]
    fn info_codec_round_trips(i in any_info()) {
        prop_assert_eq!(Info::decode(&i.encode()), i);
    }

    #[test]
    fn device_info_codec_round_trips(name in proptest::collection::vec(any::<u8>(), 0..100),
                                     words in any::<[u32; 6]>(), guid in any::<u64>()) {
        let mut d = DeviceInfo::zeroed();
        d.set_name(&name);
        prop_assert_eq!(d.name[uapi::DEVICE_NAME_MAX - 1], 0);
        d.index = words[0];
        d.node_type = words[1];
        d.port_count = words[2];
        d.port_state = words[3];
        d.link_layer = words[4];
        d.flags = words[5];
        d.node_guid = guid;
        prop_assert_eq!(DeviceInfo::decode(&d.encode()), d);
    }
}

/// Where a GET_INFO request puts its device array.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// A user address as x86-64 and arm64 hand them out (under 2^47).
    User(u64),
    /// Ending `k` bytes under the top of the address space (at or past it
    /// for `k <= 0`).
    UnderTop(i8),
    /// Anywhere.
    Anywhere(u64),
}

/// How a GET_INFO request is broken, if it is.
#[derive(Clone, Copy, Debug)]
enum InfoFault {
    None,
    Flags(u32),
    Reserved(u32),
    NoArray,
    StrideShort(u32),
    StrideLong(u32),
}

/// A GET_INFO argument as a caller fills it in: output fields left with
/// anything in them, a stride the ABI allows, room for no entry, a few or
/// very many, the array at a user address or ending at or just under the
/// top of the address space; then perhaps broken in one way.
fn info_request() -> impl Strategy<Value = Info> {
    let stride = prop_oneof![
        3 => Just(DEVICE_INFO_SIZE_VER0),
        2 => DEVICE_INFO_SIZE_VER0..=DEVICE_ENTRY_SIZE_MAX,
        1 => Just(DEVICE_ENTRY_SIZE_MAX),
    ];
    let capacity = prop_oneof![1 => Just(0u32), 4 => 1u32..=16, 2 => any::<u32>()];
    let placement = prop_oneof![
        4 => (0x1000u64..1 << 47).prop_map(Placement::User),
        2 => (-3i8..=3).prop_map(Placement::UnderTop),
        1 => any::<u64>().prop_map(Placement::Anywhere),
    ];
    let fault = prop_oneof![
        16 => Just(InfoFault::None),
        1 => (1u32..).prop_map(InfoFault::Flags),
        1 => (1u32..).prop_map(InfoFault::Reserved),
        1 => Just(InfoFault::NoArray),
        1 => (0..DEVICE_INFO_SIZE_VER0).prop_map(InfoFault::StrideShort),
        1 => (DEVICE_ENTRY_SIZE_MAX + 1..).prop_map(InfoFault::StrideLong),
    ];
    let output = (any::<u32>(), any::<u64>(), any::<u32>());
    (output, stride, capacity, placement, fault).prop_map(
        |((abi_version, features, device_count), stride, capacity, placement, fault)| {
            let mut i = Info {
                abi_version,
                features,
                device_count,
                device_entry_size: stride,
                device_capacity: capacity,
                ..Info::zeroed()
            };
            match fault {
                InfoFault::None | InfoFault::NoArray => {}
                InfoFault::Flags(f) => i.flags = f,
                InfoFault::Reserved(r) => i.reserved = r,
                InfoFault::StrideShort(s) | InfoFault::StrideLong(s) => i.device_entry_size = s,
            }
            let bytes = i128::from(i.device_capacity) * i128::from(i.device_entry_size);
            i.devices = match placement {
                Placement::User(a) | Placement::Anywhere(a) => a,
                Placement::UnderTop(k) => {
                    let end = (1i128 << 64) - i128::from(k);
                    u64::try_from((end - bytes).clamp(1, i128::from(u64::MAX))).unwrap()
                }
            };
            if let InfoFault::NoArray = fault {
                i.devices = 0;
            }
            i
        },
    )
}

/// Why `validate_request` must refuse `i`, if it must: the rules of
/// `struct rrdma_info`, with the array's end computed without overflow.
fn expected_refusal(i: &Info) -> Option<Errno> {
    if i.flags != 0 || i.reserved != 0 {
        return Some(EINVAL);
    }
    if i.device_capacity == 0 {
        return None;
    }
    if i.devices == 0
        || !(DEVICE_INFO_SIZE_VER0..=DEVICE_ENTRY_SIZE_MAX).contains(&i.device_entry_size)
    {
        return Some(EINVAL);
    }
    let end =
        u128::from(i.devices) + u128::from(i.device_capacity) * u128::from(i.device_entry_size);
    (end > u128::from(u64::MAX)).then_some(EOVERFLOW)
}

#[test]
fn accepted_requests_are_in_bounds() {
    let branches = Branches::new(
        "accepted_requests_are_in_bounds",
        &["accepted with entries", "count only", "EINVAL", "EOVERFLOW"],
    );
    proptest!(ProptestConfig::with_cases(COUNTED_CASES), |(i in info_request())| {
        let got = validate_request(&i);
        prop_assert_eq!(got.err(), expected_refusal(&i));
        match got {
            Ok(r) if r.capacity > 0 => {
                branches.took("accepted with entries");
                prop_assert_eq!(i.flags, 0);
                prop_assert_eq!(i.reserved, 0);
                prop_assert!(r.devices != 0);
                prop_assert!((DEVICE_INFO_SIZE_VER0..=DEVICE_ENTRY_SIZE_MAX).contains(&r.entry_size));
                // Every slot lies inside the validated, non-wrapping range.
                let last = r.slot(r.capacity - 1, DeviceInfo::SIZE).unwrap();
                let end = last.addr.checked_add(u64::from(r.entry_size));
                prop_assert!(end.is_some());
                prop_assert_eq!(last.copy_len + last.zero_len, r.entry_size as usize);
                prop_assert!(r.slot(r.capacity, DeviceInfo::SIZE).is_none());
            }
            Ok(_) => branches.took("count only"),
            Err(e) if e == EINVAL => branches.took("EINVAL"),
            Err(_) => branches.took("EOVERFLOW"),
        }
    });
    branches.require(&[
        ("accepted with entries", 30),
        ("EINVAL", 3),
        ("EOVERFLOW", 3),
    ]);
}

mod wire_and_blocks {
    use std::ops::Range;

    use proptest::prelude::*;
    use proptest::sample::Index;
    use rrdma_abi::blocks::Geometry;
    use rrdma_abi::errno::{Errno, EINVAL, EOVERFLOW, EPROTO, EPROTONOSUPPORT, ERANGE, MAX_ERRNO};
    use rrdma_abi::wire::{
        Ctrl, Grant, Hello, CHUNK_SHIFT_MAX, CHUNK_SHIFT_MIN, CTRL_LEN, GRANT_KEYS_MAX, HELLO_LEN,
        HELLO_V3_LEN, KEEPALIVE_VERSION, LANES_VERSION, MIN_VERSION, QPS_MAX, REPLACES_VERSION,
        VERSION,
    };

    use super::{Branches, COUNTED_CASES};

    /// A grant as an exporter sends it, with from none to all the rkeys a
    /// message holds.
    fn grant() -> impl Strategy<Value = Grant> {
        let keys = proptest::collection::vec(any::<u32>(), 0..=GRANT_KEYS_MAX);
        (
            any::<(u32, u64, u32, bool, u32)>(),
            CHUNK_SHIFT_MIN..=CHUNK_SHIFT_MAX,
            keys,
        )
            .prop_map(
                |((block_size, nblocks, generation, writable, first_chunk), chunk_shift, keys)| {
                    let mut rkeys = [0; GRANT_KEYS_MAX];
                    rkeys[..keys.len()].copy_from_slice(&keys);
                    Grant {
                        block_size,
                        nblocks,
                        generation,
                        writable,
                        chunk_shift,
                        first_chunk,
                        nkeys: keys.len() as u16,
                        rkeys,
                    }
                },
            )
    }

    /// Every kind of control message, as a peer sends it.
    fn ctrl() -> impl Strategy<Value = Ctrl> {
        prop_oneof![
            any::<(u64, u64, u32)>().prop_map(|(req_id, token, first_chunk)| Ctrl::ImportReq {
                req_id,
                token,
                first_chunk
            }),
            (any::<u64>(), grant()).prop_map(|(req_id, g)| Ctrl::ImportResp {
                req_id,
                result: Ok(g)
            }),
            (any::<u64>(), 1..=MAX_ERRNO).prop_map(|(req_id, e)| Ctrl::ImportResp {
                req_id,
                result: Err(Errno::new(e).unwrap())
            }),
            (1u64.., any::<u64>(), any::<u32>()).prop_map(|(req_id, token, generation)| {
                Ctrl::Revoke {
                    req_id,
                    token,
                    generation,
                }
            }),
            (1u64..).prop_map(|req_id| Ctrl::RevokeAck { req_id }),
            (1u64..).prop_map(|seq| Ctrl::Ping { seq }),
            (1u64..).prop_map(|seq| Ctrl::Pong { seq }),
        ]
    }

    /// Bytes changed in a message of `len` bytes (none in half the
    /// cases), most often in `fields`, where a changed byte can leave it
    /// valid, else in its first `header` bytes or anywhere.
    fn changes(
        fields: Range<usize>,
        header: usize,
        len: usize,
    ) -> impl Strategy<Value = Vec<(usize, u8)>> {
        let at = prop_oneof![3 => fields, 1 => 0..header, 1 => 0..len];
        prop_oneof![
            Just(Vec::new()),
            proptest::collection::vec((at, any::<u8>()), 1..3),
        ]
    }

    /// Sets the bytes of `changes` that fall inside `b`.
    fn apply(b: &mut [u8], changes: &[(usize, u8)]) {
        for &(i, v) in changes {
            if let Some(x) = b.get_mut(i) {
                *x = v;
            }
        }
    }

    /// A message decodes as it was encoded; a changed one is refused
    /// (`EPROTO`, never a panic) or encodes back to the same bytes.
    #[test]
    fn ctrl_decode_never_panics_and_round_trips() {
        let branches = Branches::new(
            "ctrl_decode_never_panics_and_round_trips",
            &["accepted as sent", "accepted after a change", "refused"],
        );
        let len = prop_oneof![6 => Just(CTRL_LEN), 1 => 0usize..CTRL_LEN + 8];
        proptest!(ProptestConfig::with_cases(COUNTED_CASES),
                  |(msg in ctrl(), version in MIN_VERSION..=VERSION,
                    changes in changes(8..24, 48, CTRL_LEN), len in len)| {
            let sent = msg.encode(version);
            let mut b = sent.to_vec();
            apply(&mut b, &changes);
            b.resize(len, 0);
            let changed = b[..] != sent[..];
            let speaks = version >= KEEPALIVE_VERSION || !matches!(msg, Ctrl::Ping { .. } | Ctrl::Pong { .. });
            match Ctrl::decode(&b) {
                Ok(m) => {
                    prop_assert_eq!(b.len(), CTRL_LEN);
                    // Encoded again in the version it carries: the same bytes.
                    prop_assert_eq!(&m.encode(u16::from_le_bytes([b[4], b[5]]))[..], &b[..]);
                    branches.took(if changed { "accepted after a change" } else { "accepted as sent" });
                }
                Err(e) => {
                    prop_assert_eq!(e, EPROTO);
                    branches.took("refused");
                }
            }
            if !changed && speaks {
                prop_assert_eq!(Ctrl::decode(&b), Ok(msg));
            }
        });
        branches.require(&[
            ("accepted as sent", 30),
            ("accepted after a change", 5),
            ("refused", 10),
        ]);
    }

    /// A valid hello of `version`: a reconnect's from version 4, a lane's
    /// from version 5.
    fn hello(version: impl Strategy<Value = u16>) -> impl Strategy<Value = Hello> {
        (
            version,
            26u16..,
            1u16..,
            any::<u64>(),
            proptest::option::of(any::<u64>()),
            proptest::option::of(1u16..QPS_MAX),
        )
            .prop_map(|(v, credits, qps, nonce, rep, lane)| {
                let replaces = if v >= REPLACES_VERSION { rep } else { None };
                // A lane's hello (version 5) replaces nothing.
                let lane = if v >= LANES_VERSION && replaces.is_none() {
                    lane
                } else {
                    None
                };
                Hello {
                    version: v,
                    ctrl_credits: credits,
                    qps,
                    nonce,
                    replaces,
                    lane,
                }
            })
    }

    /// Handshake bytes as a peer could send them: a hello of a version we
    /// speak or a newer one, with perhaps some bytes changed, cut short or
    /// padded; or any bytes at all.
    fn hello_bytes() -> impl Strategy<Value = Vec<u8>> {
        let len = prop_oneof![
            5 => Just(HELLO_LEN),
            1 => Just(HELLO_V3_LEN),
            1 => 0..HELLO_LEN + 16,
        ];
        prop_oneof![
            7 => (hello(MIN_VERSION..=VERSION + 2), len, changes(8..24, HELLO_LEN, HELLO_LEN + 16))
                .prop_map(|(h, len, changes)| {
                    let mut b = h.encode().to_vec();
                    b.resize(len, 0);
                    apply(&mut b, &changes);
                    b
                }),
            1 => proptest::collection::vec(any::<u8>(), 0..64),
        ]
    }

    #[test]
    fn hello_decode_never_panics() {
        let branches = Branches::new(
            "hello_decode_never_panics",
            &[
                "accepted, encodes back",
                "accepted from a newer version",
                "refused",
            ],
        );
        proptest!(ProptestConfig::with_cases(COUNTED_CASES), |(b in hello_bytes())| {
            match Hello::decode(&b) {
                Ok(h) => {
                    let v = u16::from_le_bytes([b[4], b[5]]);
                    prop_assert_eq!(h.version, v);
                    if v <= VERSION {
                        // What this version accepts it encodes back bit for
                        // bit, as long as that version's hello.
                        let n = if v >= REPLACES_VERSION { HELLO_LEN } else { HELLO_V3_LEN };
                        prop_assert_eq!(&h.encode()[..n], &b[..n]);
                        branches.took("accepted, encodes back");
                    } else {
                        branches.took("accepted from a newer version");
                    }
                }
                Err(e) => {
                    prop_assert!(e == EPROTO || e == EPROTONOSUPPORT);
                    branches.took("refused");
                }
            }
        });
        branches.require(&[("accepted, encodes back", 30), ("refused", 10)]);
    }

    proptest! {
        #[test]
        fn hellos_round_trip(h in hello(MIN_VERSION..=VERSION)) {
            prop_assert_eq!(Hello::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn grants_stay_within_offer_and_cap(offered in any::<u16>(), v in 2u16..=rrdma_abi::wire::VERSION,
                                            cap in any::<u16>()) {
            let g = rrdma_abi::wire::grant_qps(offered, v, cap);
            prop_assert!((1..=rrdma_abi::wire::QPS_MAX).contains(&g));
            prop_assert!(g == 1 || (g <= offered && g <= cap));
        }
    }

    /// Where a span starts.
    #[derive(Clone, Copy, Debug)]
    enum First {
        /// At a block of the region.
        Inside(Index),
        /// So that it ends `k` blocks past the region's end (inside it
        /// for `k < 0`).
        PastEnd(i8),
        /// Anywhere.
        At(u64),
    }

    #[test]
    fn spans_stay_inside_the_region() {
        let branches = Branches::new(
            "spans_stay_inside_the_region",
            &["accepted", "EINVAL", "EOVERFLOW", "ERANGE"],
        );
        let nblocks = prop_oneof![1 => 1u64..16, 3 => 1u64..1_000_000];
        let first = prop_oneof![
            4 => any::<Index>().prop_map(First::Inside),
            2 => (-2i8..=2).prop_map(First::PastEnd),
            1 => any::<u64>().prop_map(First::At),
            1 => (0u64..4).prop_map(|k| First::At(u64::MAX - k)),
        ];
        let count = prop_oneof![1 => Just(0u32), 6 => 1u32..64, 1 => any::<u32>()];
        proptest!(ProptestConfig::with_cases(COUNTED_CASES),
                  |(bs_shift in 9u32..=20, nblocks in nblocks, first in first, count in count)| {
            let g = Geometry::new(1 << bs_shift, nblocks, u64::MAX).unwrap();
            let first = match first {
                // A span that fits, if the region is large enough.
                First::Inside(i) => i.index((nblocks.saturating_sub(u64::from(count)) + 1) as usize) as u64,
                First::PastEnd(k) => {
                    let f = i128::from(nblocks) - i128::from(count) + i128::from(k);
                    u64::try_from(f.max(0)).unwrap()
                }
                First::At(f) => f,
            };
            let end = u128::from(first) + u128::from(count);
            let expected = if count == 0 {
                Err(EINVAL)
            } else if end > u128::from(u64::MAX) {
                Err(EOVERFLOW)
            } else if end > u128::from(nblocks) {
                Err(ERANGE)
            } else {
                Ok(())
            };
            let got = g.span(first, count);
            prop_assert_eq!(got.map(|_| ()), expected);
            match got {
                Ok((off, len)) => {
                    prop_assert_eq!(off, first * u64::from(g.block_size()));
                    prop_assert_eq!(len, u64::from(count) * u64::from(g.block_size()));
                    prop_assert!(off + len <= g.bytes());
                    branches.took("accepted");
                }
                Err(e) if e == EINVAL => branches.took("EINVAL"),
                Err(e) if e == EOVERFLOW => branches.took("EOVERFLOW"),
                Err(_) => branches.took("ERANGE"),
            }
        });
        branches.require(&[
            ("accepted", 30),
            ("EINVAL", 3),
            ("EOVERFLOW", 3),
            ("ERANGE", 5),
        ]);
    }
}

mod segments {
    use proptest::prelude::*;
    use rrdma_abi::ops::{segment_count, segments, Checked, Dir};

    proptest! {
        #[test]
        fn segments_tile_the_range_within_chunks(
            lo in 0u64..(1 << 30), ro in 0u64..(1 << 30), len in 1u64..(64 << 20),
            ls in 12u32..=20, rs in 12u32..=20,
        ) {
            let c = Checked { dir: Dir::Read, local_off: lo, remote_off: ro, len };
            let (mut l, mut r, mut total) = (lo, ro, 0u64);
            for s in segments(&c, ls, rs) {
                prop_assert!(s.len > 0);
                prop_assert_eq!((s.local_off, s.remote_off), (l, r));
                let n = u64::from(s.len);
                prop_assert_eq!(s.local_off >> ls, (s.local_off + n - 1) >> ls);
                prop_assert_eq!(s.remote_off >> rs, (s.remote_off + n - 1) >> rs);
                l += n;
                r += n;
                total += n;
            }
            prop_assert_eq!(total, len);
        }

        /// `segment_count` counts what `segments` cuts, without walking.
        #[test]
        fn segment_count_is_the_walk(
            lo in 0u64..(1 << 40), ro in 0u64..(1 << 40), len in 1u64..(64 << 20),
            ls in 12u32..=34, rs in 12u32..=34, aligned in any::<bool>(),
        ) {
            // Half the cases share their offsets below the finer chunk,
            // where both sides' boundaries coincide.
            let ro = if aligned { (ro & !((1 << ls.min(rs)) - 1)) | (lo & ((1 << ls.min(rs)) - 1)) } else { ro };
            let c = Checked { dir: Dir::Write, local_off: lo, remote_off: ro, len };
            prop_assert_eq!(segment_count(&c, ls, rs), segments(&c, ls, rs).count() as u64);
        }
    }
}

mod op_limits {
    use proptest::prelude::*;
    use rrdma_abi::ops::{max_op_blocks, max_wrs, op_sinks, op_wrs, segments, Checked, Dir};

    proptest! {
        /// An operation's real work requests (segments, a registration per
        /// local chunk it touches, a fence, iWARP's READ sinks) never
        /// exceed `max_wrs`, an operation of `max_op_blocks` blocks fits
        /// the budget wherever it starts, and its READ sinks never exceed
        /// half the budget (a queue pair has that many).
        #[test]
        fn operations_fit_their_bound(
            bs_shift in 9u32..=20, lblock in 0u64..(1 << 16), rblock in 0u64..(1 << 16),
            ls in 12u32..=20, rs in 12u32..=20, budget in 6u64..600, frac in 0.0f64..=1.0,
            read in any::<bool>(), iwarp in any::<bool>(),
        ) {
            let bs = 1u32 << bs_shift;
            let max = max_op_blocks(bs, ls, rs, budget, iwarp);
            prop_assume!(max >= 1);
            let count = ((f64::from(max) * frac) as u32).clamp(1, max);
            let len = u64::from(count) * u64::from(bs);
            let dir = if read { Dir::Read } else { Dir::Write };
            let c = Checked {
                dir,
                local_off: lblock * u64::from(bs),
                remote_off: rblock * u64::from(bs),
                len,
            };
            let segs = segments(&c, ls, rs).count() as u64;
            let first = c.local_off >> ls;
            let last = (c.local_off + len - 1) >> ls;
            let wrs = op_wrs(dir, segs, last - first + 1, iwarp);
            prop_assert!(wrs <= max_wrs(len, ls, rs, iwarp));
            prop_assert!(wrs <= budget);
            prop_assert!(op_sinks(dir, segs, iwarp) <= budget / 2);
            prop_assert!(max_wrs(u64::from(max) * u64::from(bs), ls, rs, iwarp) <= budget);
        }
    }
}

mod completion_ring {
    use std::collections::VecDeque;

    use proptest::prelude::*;
    use rrdma_abi::ring::RingIndex;

    #[derive(Clone, Debug)]
    enum Step {
        Reserve(usize),
        Unreserve(usize),
        Complete,
        Lend(usize),
        Settle(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0usize..6).prop_map(Step::Reserve),
            (0usize..3).prop_map(Step::Unreserve),
            Just(Step::Complete),
            Just(Step::Complete),
            (1usize..5).prop_map(Step::Lend),
            (0usize..5).prop_map(Step::Settle),
        ]
    }

    proptest! {
        /// Against a model: every completion that found a reservation is
        /// read exactly once (delivered, or given back and read later);
        /// nothing is lost or duplicated; records never share a slot; and
        /// reservations, ready and lent records never exceed the capacity.
        #[test]
        fn completions_are_read_exactly_once(
            cap in 1usize..9,
            steps in proptest::collection::vec(step(), 0..80),
        ) {
            let mut r = RingIndex::new(cap);
            let mut store: Vec<Option<u32>> = vec![None; cap];
            let mut model: VecDeque<u32> = VecDeque::new();
            let mut loans: Vec<Vec<u32>> = Vec::new();
            let mut next = 0u32;
            let mut delivered: Vec<u32> = Vec::new();
            for s in steps {
                match s {
                    Step::Reserve(n) => { r.reserve(n); }
                    Step::Unreserve(n) => r.unreserve(n),
                    Step::Complete => {
                        if let Some(slot) = r.push() {
                            next += 1;
                            store[slot] = Some(next);
                            model.push_back(next);
                        }
                    }
                    Step::Lend(max) => {
                        let (first, n) = r.lend(max);
                        let taken: Vec<u32> = (0..n)
                            .map(|i| store[r.slot(first, i)].take().expect("a record"))
                            .collect();
                        for v in &taken {
                            prop_assert_eq!(model.pop_front(), Some(*v));
                        }
                        loans.push(taken);
                    }
                    Step::Settle(ok) => {
                        if let Some(loan) = loans.pop() {
                            let ok = ok.min(loan.len());
                            delivered.extend_from_slice(&loan[..ok]);
                            let at = r.settle(loan.len(), ok);
                            for (i, v) in loan[ok..].iter().enumerate() {
                                let slot = r.slot(at, i);
                                prop_assert!(store[slot].is_none());
                                store[slot] = Some(*v);
                            }
                            for v in loan[ok..].iter().rev() {
                                model.push_front(*v);
                            }
                        }
                    }
                }
                prop_assert!(r.len() + r.reserved() + r.lent() <= cap);
                prop_assert_eq!(r.len(), model.len());
                prop_assert_eq!(store.iter().filter(|x| x.is_some()).count(), r.len());
            }
            // Settle what is still lent as failures, then read everything.
            while let Some(loan) = loans.pop() {
                let at = r.settle(loan.len(), 0);
                for (i, v) in loan.iter().enumerate() {
                    store[r.slot(at, i)] = Some(*v);
                }
                for v in loan.iter().rev() {
                    model.push_front(*v);
                }
            }
            let (first, n) = r.lend(cap);
            for i in 0..n {
                delivered.push(store[r.slot(first, i)].take().unwrap());
            }
            r.settle(n, n);
            delivered.sort_unstable();
            prop_assert_eq!(delivered, (1..=next).collect::<Vec<_>>());
        }
    }
}

mod conn_machine {
    use proptest::prelude::*;
    use rrdma_abi::conn::{step, step_with, Action, Event, State};
    use rrdma_abi::errno::{Errno, MAX_ERRNO};

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::AddrResolved),
            (-200i32..200).prop_map(Event::AddrError),
            Just(Event::RouteResolved),
            (-200i32..200).prop_map(Event::RouteError),
            Just(Event::Established),
            proptest::option::of(1i32..200).prop_map(|e| Event::Rejected(e.and_then(Errno::new))),
            Just(Event::Unreachable),
            (-200i32..200).prop_map(Event::ConnectError),
            Just(Event::Disconnected),
            Just(Event::DeviceRemoval),
            Just(Event::Timeout),
            Just(Event::QpFatal),
            Just(Event::Flushed),
            Just(Event::UserClose),
            Just(Event::TornDown),
            Just(Event::Retry),
        ]
    }

    proptest! {
        /// Whatever rdma_cm, the data path and userspace do: the teardown is
        /// asked for exactly once, on entering Closing; only its report
        /// (TornDown) leads from Closing to Closed; Closed is final; every
        /// close errno is a valid errno; and a user close always ends it.
        /// The teardown's report may arrive at any later point.
        #[test]
        fn teardown_exactly_once(
            start_active in any::<bool>(),
            events in proptest::collection::vec(event(), 0..40),
            report_after in 0usize..8,
        ) {
            let mut s = if start_active { State::Resolving } else { State::Accepting };
            let mut teardowns = 0;
            let mut pending_report: Option<usize> = None;
            let events: Vec<Event> = events.into_iter().chain([Event::UserClose]).collect();
            let mut feed: Vec<Event> = events;
            let mut i = 0;
            while i < feed.len() {
                let e = feed[i];
                let (next, action) = step(s, e);
                if action == Action::Teardown {
                    teardowns += 1;
                    let closing = next.is_finished() && !next.is_closed();
                    prop_assert!(closing);
                    prop_assert!(!s.is_finished());
                    // The teardown reports a few events later (or at the end).
                    let at = (i + 1 + report_after).min(feed.len());
                    feed.insert(at, Event::TornDown);
                    pending_report = Some(at);
                }
                if next.is_closed() && !s.is_closed() {
                    prop_assert_eq!(e, Event::TornDown);
                    let was_closing = s.is_finished() && !s.is_closed();
                    prop_assert!(was_closing);
                }
                if s.is_closed() {
                    prop_assert_eq!(next, s);
                }
                if let State::Closed { error: Some(errno) } | State::Closing { error: Some(errno), .. } = next {
                    prop_assert!(errno.get() > 0 && errno.get() <= MAX_ERRNO);
                }
                s = next;
                i += 1;
            }
            prop_assert!(pending_report.is_some());
            prop_assert!(s.is_closed());
            prop_assert_eq!(teardowns, 1);
        }
    }

    proptest! {
        /// A connection that reconnects (`retry` drawn at each step, as a
        /// budget that may run out): a teardown is asked for only when none
        /// is under way, and each is reported before the next; its report
        /// leads to `Waiting` (then only `Retry` or a close move on) or to
        /// `Closed`, which is final; operations flushed by a retrying
        /// teardown see `ECONNRESET`, new ones `EAGAIN`; and a user close
        /// always ends it for good.
        #[test]
        fn reconnects_tear_down_once_per_attempt(
            events in proptest::collection::vec((event(), any::<bool>()), 0..60),
        ) {
            let mut s = State::Connected;
            let mut tearing = false;
            let feed = events.into_iter().chain([(Event::UserClose, true)]);
            let run = |s: State, e: Event, retry: bool, tearing: &mut bool| -> Result<State, TestCaseError> {
                let (next, action) = step_with(s, e, retry);
                if s.is_closed() {
                    prop_assert_eq!(next, s);
                }
                if action == Action::Teardown {
                    prop_assert!(!*tearing);
                    let closing = matches!(next, State::Closing { .. });
                    prop_assert!(closing);
                    if next.is_waiting() {
                        prop_assert_eq!(next.flush_errno(), rrdma_abi::errno::ECONNRESET);
                        prop_assert_eq!(next.errno(true), rrdma_abi::errno::EAGAIN);
                    }
                    *tearing = true;
                }
                if let State::Waiting { .. } = s {
                    let allowed = next == s || matches!(e, Event::Retry | Event::UserClose);
                    prop_assert!(allowed);
                }
                Ok(next)
            };
            for (e, retry) in feed {
                if e == Event::TornDown {
                    continue;
                }
                s = run(s, e, retry, &mut tearing)?;
                if tearing {
                    // The teardown reports at once here; the other property
                    // covers late reports.
                    let (next, action) = step_with(s, Event::TornDown, retry);
                    let waiting = matches!(next, State::Waiting { .. });
                    prop_assert!(waiting || next.is_closed());
                    prop_assert_eq!(action == Action::Backoff, waiting);
                    tearing = false;
                    s = next;
                }
            }
            prop_assert!(s.is_closed());
        }
    }
}

mod reconnect_backoff {
    use proptest::prelude::*;
    use rrdma_abi::reconnect::{from_params, Budget};

    use super::{Branches, COUNTED_CASES};

    /// Whatever the parameters: each delay lies between half its step and
    /// its step, steps never shrink and never pass the cap, and no failure
    /// is followed by more attempts than the policy allows. The attempts
    /// are most often few, so that the budget runs out: the last check
    /// runs only then.
    #[test]
    fn delays_bounded_and_attempts_capped() {
        let branches = Branches::new(
            "delays_bounded_and_attempts_capped",
            &["budget ran out", "budget lasted"],
        );
        let attempts = prop_oneof![3 => 0u32..=16, 1 => any::<u32>()];
        proptest!(ProptestConfig::with_cases(COUNTED_CASES),
                  |(attempts in attempts, delay in any::<u32>(), cap in any::<u32>(),
                    randoms in proptest::collection::vec(any::<u64>(), 0..64),
                    establish_every in 1usize..64)| {
            let p = from_params(attempts, delay, cap);
            let mut b = Budget::new(p);
            b.established();
            let mut since = 0u32;
            let mut last_step = 0;
            let mut ran_out = false;
            for (i, r) in randoms.into_iter().enumerate() {
                if i % establish_every == 0 {
                    b.established();
                    since = 0;
                    last_step = 0;
                }
                if !b.may_retry() {
                    prop_assert_eq!(since, p.attempts);
                    ran_out = true;
                    continue;
                }
                let step = p.step_ms(b.tried());
                prop_assert!(step >= last_step && step <= p.max_delay_ms);
                let d = b.next_attempt(r);
                prop_assert!(d >= step / 2 && d <= step);
                since += 1;
                prop_assert!(since <= p.attempts);
                last_step = step;
            }
            branches.took(if ran_out { "budget ran out" } else { "budget lasted" });
        });
        branches.require(&[("budget ran out", 30), ("budget lasted", 10)]);
    }
}

mod limits {
    use proptest::prelude::*;
    use rrdma_abi::limits::{queue_sizes, DeviceLimits, OPS_MAX, OPS_MIN};
    use rrdma_abi::wire::CTRL_RECV_MIN;

    fn small_or_large() -> impl Strategy<Value = u32> {
        prop_oneof![0u32..600, any::<u32>()]
    }

    proptest! {
        /// Whatever the device's limits, the queues rrdma asks for fit
        /// them, or the device is refused; and the control messages always
        /// have what the wire protocol needs.
        #[test]
        fn queue_sizes_fit_the_device(
            qp_wr in small_or_large(),
            cqe in small_or_large(),
            sge in 0u32..3,
        ) {
            let l = DeviceLimits {
                max_qp_wr: qp_wr,
                max_cqe: cqe,
                max_send_sge: sge,
                max_recv_sge: sge,
                max_sge_rd: sge,
                ..DeviceLimits::UNLIMITED
            };
            match queue_sizes(&l) {
                Ok(q) => {
                    prop_assert!(sge >= 1);
                    prop_assert!(q.send_wrs() <= qp_wr && q.recv <= qp_wr);
                    prop_assert!(q.send_cqe() <= cqe && q.recv_cqe() <= cqe);
                    prop_assert!((OPS_MIN..=OPS_MAX).contains(&q.ops));
                    prop_assert!(q.grant_regs >= 1);
                    prop_assert!(q.ctrl_send >= u32::from(CTRL_RECV_MIN));
                    prop_assert!(q.recv >= u32::from(CTRL_RECV_MIN));
                }
                // Refused only when no sizing could fit (the bound is
                // exact: one entry more and it fits).
                Err(_) => prop_assert!(
                    sge == 0
                        || qp_wr.min(cqe.saturating_sub(1))
                            < u32::from(CTRL_RECV_MIN) + OPS_MIN + OPS_MIN / 4 + 1
                ),
            }
        }
    }
}
