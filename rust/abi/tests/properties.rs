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
    use rrdma_abi::errno::{EINVAL, ENOENT, EOVERFLOW, ERANGE};
    use rrdma_abi::wire::{Ctrl, Hello, CTRL_LEN, MIN_VERSION, VERSION};

    proptest! {
        #[test]
        fn ctrl_decode_never_panics_and_round_trips(
            kind in 0u8..6,
            version in prop_oneof![Just(VERSION), Just(MIN_VERSION)],
            token in any::<u64>(),
            first in any::<u32>(),
            flips in proptest::collection::vec((0usize..CTRL_LEN, any::<u8>()), 0..4),
            len in prop_oneof![Just(CTRL_LEN), 0usize..CTRL_LEN + 8],
        ) {
            let base = match kind {
                0 => Ctrl::ImportReq { req_id: 1, token, first_chunk: first },
                1 => Ctrl::ImportResp { req_id: token, result: Err(ENOENT) },
                2 => Ctrl::Revoke { req_id: token | 1, token, generation: first },
                3 => Ctrl::RevokeAck { req_id: token | 1 },
                4 => Ctrl::Ping { seq: token | 1 },
                _ => Ctrl::Pong { seq: token | 1 },
            };
            let mut b = base.encode(version).to_vec();
            for (i, v) in flips {
                b[i] = v;
            }
            b.resize(len, 0);
            if let Ok(m) = Ctrl::decode(&b) {
                prop_assert_eq!(b.len(), CTRL_LEN);
                // Encoded again in the version it carries: the same bytes.
                prop_assert_eq!(&m.encode(u16::from_le_bytes([b[4], b[5]]))[..], &b[..]);
            }
        }

        #[test]
        fn hello_decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(h) = Hello::decode(&b) {
                // What this version accepts it encodes back bit for bit.
                let v = u16::from_le_bytes([b[4], b[5]]);
                if (4..=rrdma_abi::wire::VERSION).contains(&v) {
                    prop_assert_eq!(&h.encode()[..], &b[..rrdma_abi::wire::HELLO_LEN]);
                }
            }
        }

        #[test]
        fn hellos_round_trip(v in 2u16..=rrdma_abi::wire::VERSION, credits in 26u16.., qps in 1u16..,
                             nonce in any::<u64>(), rep in proptest::option::of(any::<u64>()),
                             lane in proptest::option::of(1u16..rrdma_abi::wire::QPS_MAX)) {
            let replaces = if v >= rrdma_abi::wire::REPLACES_VERSION { rep } else { None };
            // A lane's hello (version 5) replaces nothing.
            let lane = if v >= rrdma_abi::wire::LANES_VERSION && replaces.is_none() { lane } else { None };
            let h = Hello { version: v, ctrl_credits: credits, qps, nonce, replaces, lane };
            prop_assert_eq!(Hello::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn grants_stay_within_offer_and_cap(offered in any::<u16>(), v in 2u16..=rrdma_abi::wire::VERSION,
                                            cap in any::<u16>()) {
            let g = rrdma_abi::wire::grant_qps(offered, v, cap);
            prop_assert!((1..=rrdma_abi::wire::QPS_MAX).contains(&g));
            prop_assert!(g == 1 || (g <= offered && g <= cap));
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

    proptest! {
        /// Whatever the parameters: each delay lies between half its step
        /// and its step, steps never shrink and never pass the cap, and no
        /// failure is followed by more attempts than the policy allows.
        #[test]
        fn delays_bounded_and_attempts_capped(
            attempts in any::<u32>(),
            delay in any::<u32>(),
            cap in any::<u32>(),
            randoms in proptest::collection::vec(any::<u64>(), 0..64),
            establish_every in 1usize..20,
        ) {
            let p = from_params(attempts, delay, cap);
            let mut b = Budget::new(p);
            b.established();
            let mut since = 0u32;
            let mut last_step = 0;
            for (i, r) in randoms.into_iter().enumerate() {
                if i % establish_every == 0 {
                    b.established();
                    since = 0;
                    last_step = 0;
                }
                if !b.may_retry() {
                    prop_assert_eq!(since, p.attempts);
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
        }
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
