// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of GET_INFO: the info structs' codec is lossless, and
//! `validate_request` accepts only requests whose device array lies
//! inside the address space.

mod branches;

use branches::{Branches, COUNTED_CASES};
use proptest::prelude::*;
use rrdma_abi::errno::{Errno, EINVAL, EOVERFLOW};
use rrdma_abi::info::validate_request;
use rrdma_abi::uapi::{self, DeviceInfo, Info, DEVICE_ENTRY_SIZE_MAX, DEVICE_INFO_SIZE_VER0};

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

proptest! {
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
