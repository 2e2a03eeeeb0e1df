// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the ABI rules: whatever userspace passes, the rules
//! never panic, never accept what they must refuse, and the struct codec is
//! lossless.

use proptest::prelude::*;
use rrdma_abi::errno::{E2BIG, EINVAL, ENOTTY, EOVERFLOW};
use rrdma_abi::info::validate_request;
use rrdma_abi::ioctl::{self, decode, ext_copy, Command};
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
    fn decode_accepts_only_our_commands(cmd in any::<u32>()) {
        match decode(cmd) {
            Ok(d) => {
                prop_assert_eq!(ioctl::ty(cmd), uapi::IOCTL_MAGIC);
                let (min, dir) = match d.cmd {
                    Command::GetInfo => (uapi::INFO_SIZE_VER0, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::RegionCreate => (uapi::REGION_CREATE_SIZE_VER0, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::RegionDestroy => (uapi::REGION_DESTROY_SIZE_VER0, ioctl::IOC_WRITE),
                    Command::Listen => (uapi::Listen::SIZE, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::Accept => (uapi::Accept::SIZE, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::Connect => (uapi::Connect::SIZE, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::Export => (uapi::Export::SIZE, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::Import => (uapi::Import::SIZE, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::Submit => (uapi::Submit::SIZE, ioctl::IOC_READ | ioctl::IOC_WRITE),
                    Command::Unexport => (uapi::Unexport::SIZE, ioctl::IOC_WRITE),
                    Command::RwSync => (uapi::Op::SIZE, ioctl::IOC_WRITE),
                    Command::Disconnect | Command::Unimport | Command::Unlisten => {
                        (uapi::HandleArg::SIZE, ioctl::IOC_WRITE)
                    }
                };
                prop_assert!(d.user_size >= min);
                prop_assert_eq!(ioctl::dir(cmd), dir);
            }
            Err(e) => prop_assert!(e == ENOTTY || e == EINVAL),
        }
    }

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
    fn unknown_tail_must_be_zero(tail in proptest::collection::vec(any::<u8>(), 0..256)) {
        let all_zero = tail.iter().all(|&b| b == 0);
        prop_assert_eq!(ioctl::check_unknown_tail(&tail).is_ok(), all_zero);
        if !all_zero {
            prop_assert_eq!(ioctl::check_unknown_tail(&tail), Err(E2BIG));
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

    #[test]
    fn accepted_requests_are_in_bounds(i in any_info()) {
        match validate_request(&i) {
            Ok(r) => {
                prop_assert_eq!(i.flags, 0);
                prop_assert_eq!(i.reserved, 0);
                if r.capacity > 0 {
                    prop_assert!(r.devices != 0);
                    prop_assert!((DEVICE_INFO_SIZE_VER0..=DEVICE_ENTRY_SIZE_MAX).contains(&r.entry_size));
                    // Every slot lies inside the validated, non-wrapping range.
                    let last = r.slot(r.capacity - 1, DeviceInfo::SIZE).unwrap();
                    let end = last.addr.checked_add(u64::from(r.entry_size));
                    prop_assert!(end.is_some());
                    prop_assert_eq!(last.copy_len + last.zero_len, r.entry_size as usize);
                    prop_assert!(r.slot(r.capacity, DeviceInfo::SIZE).is_none());
                }
            }
            Err(e) => prop_assert!(e == EINVAL || e == EOVERFLOW),
        }
    }
}

mod wire_and_blocks {
    use proptest::prelude::*;
    use rrdma_abi::blocks::Geometry;
    use rrdma_abi::errno::{EINVAL, EOVERFLOW, ERANGE};
    use rrdma_abi::wire::{Ctrl, Hello, CTRL_LEN};

    proptest! {
        #[test]
        fn ctrl_decode_never_panics_and_round_trips(
            token in any::<u64>(),
            first in any::<u32>(),
            flips in proptest::collection::vec((0usize..CTRL_LEN, any::<u8>()), 0..4),
            len in prop_oneof![Just(CTRL_LEN), 0usize..CTRL_LEN + 8],
        ) {
            let mut b = Ctrl::ImportReq { req_id: 1, token, first_chunk: first }.encode().to_vec();
            for (i, v) in flips {
                b[i] = v;
            }
            b.resize(len, 0);
            if let Ok(m) = Ctrl::decode(&b) {
                prop_assert_eq!(b.len(), CTRL_LEN);
                prop_assert_eq!(&m.encode()[..], &b[..]);
            }
        }

        #[test]
        fn hello_decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Hello::decode(&b);
        }

        #[test]
        fn spans_stay_inside_the_region(bs_shift in 9u32..=20, nblocks in 1u64..1_000_000,
                                        first in any::<u64>(), count in any::<u32>()) {
            let g = Geometry::new(1 << bs_shift, nblocks, u64::MAX).unwrap();
            match g.span(first, count) {
                Ok((off, len)) => {
                    prop_assert!(count > 0);
                    prop_assert_eq!(off, first * u64::from(g.block_size()));
                    prop_assert_eq!(len, u64::from(count) * u64::from(g.block_size()));
                    prop_assert!(off + len <= g.bytes());
                }
                Err(e) => prop_assert!(e == EINVAL || e == EOVERFLOW || e == ERANGE),
            }
        }
    }
}

mod segments {
    use proptest::prelude::*;
    use rrdma_abi::ops::{segments, Checked, Dir};

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
    }
}

mod conn_machine {
    use proptest::prelude::*;
    use rrdma_abi::conn::{step, Action, Event, State};

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::AddrResolved),
            (-200i32..200).prop_map(Event::AddrError),
            Just(Event::RouteResolved),
            (-200i32..200).prop_map(Event::RouteError),
            Just(Event::Established),
            proptest::option::of(1i32..200).prop_map(Event::Rejected),
            Just(Event::Unreachable),
            (-200i32..200).prop_map(Event::ConnectError),
            Just(Event::Disconnected),
            Just(Event::DeviceRemoval),
            Just(Event::Timeout),
            Just(Event::QpFatal),
            Just(Event::UserClose),
        ]
    }

    proptest! {
        /// Whatever rdma_cm and userspace do, teardown happens exactly once,
        /// only on entering Closed; Closed is final; every close errno is a
        /// valid errno; and a user close plus a timeout always ends it.
        #[test]
        fn teardown_exactly_once(start_active in any::<bool>(), events in proptest::collection::vec(event(), 0..40)) {
            let mut s = if start_active { State::Resolving } else { State::Accepting };
            let mut teardowns = 0;
            for e in events.into_iter().chain([Event::UserClose, Event::Timeout]) {
                let (next, action) = step(s, e);
                if action == Action::Teardown {
                    teardowns += 1;
                    prop_assert!(next.is_closed() && !s.is_closed());
                }
                if s.is_closed() {
                    prop_assert_eq!(next, s);
                }
                if let State::Closed { error: Some(errno) } | State::Closing { error: Some(errno) } = next {
                    prop_assert!(errno > 0 && errno < 4096);
                }
                s = next;
            }
            prop_assert!(s.is_closed());
            prop_assert_eq!(teardowns, 1);
        }
    }
}
