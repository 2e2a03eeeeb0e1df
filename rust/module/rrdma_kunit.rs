// SPDX-License-Identifier: GPL-2.0

//! KUnit cases for rrdma's logic, run inside the kernel by `rrdma_kunit.ko`.
//!
//! 6.12 has no `#[kunit_tests]`, so the suite is registered through the KUnit
//! C API (`shim/kunit_suite.c`) and each case is an `extern "C"` function
//! here. The cases exercise the same `abi` files the module is built from,
//! compiled by the kernel's own Rust toolchain and run on the kernel's
//! target, plus the glue that turns their errnos into kernel errors and the
//! release signal device removal waits on (`release.rs`, the same file).

use kernel::error::code;
use kernel::ffi::{c_char, c_int, c_void};

mod abi;
// Not every item is exercised by the suite.
#[allow(dead_code)]
mod release;

use abi::errno::{E2BIG, EINVAL, ENOTTY, EOVERFLOW};
use abi::info::{validate_request, EntrySlot};
use abi::ioctl::{self, decode, ext_copy, iowr, Command};
use abi::uapi::{self, DeviceInfo, Info};

extern "C" {
    fn rrdma_kunit_fail(test: *mut c_void, file: *const c_char, line: c_int, expr: *const c_char);
}

/// Defines a KUnit case: an `unsafe extern "C"` function KUnit calls with
/// the running test's `struct kunit`, documented for its safety contract.
macro_rules! kunit_case {
    ($(#[$m:meta])* pub unsafe extern "C" fn $name:ident($t:ident: *mut c_void) $body:block) => {
        $(#[$m])*
        ///
        /// # Safety
        ///
        /// Called only by KUnit, with the running test's `struct kunit`.
        pub unsafe extern "C" fn $name($t: *mut c_void) $body
    };
}

/// Marks the running case failed, naming the expectation, unless `$cond`.
macro_rules! kexpect {
    ($test:expr, $cond:expr) => {
        if !$cond {
            // SAFETY: `$test` is the `struct kunit *` KUnit passed to the
            // case, and both strings are NUL-terminated literals.
            unsafe {
                rrdma_kunit_fail(
                    $test,
                    concat!(file!(), "\0").as_ptr().cast(),
                    line!() as c_int,
                    concat!(stringify!($cond), "\0").as_ptr().cast(),
                )
            }
        }
    };
}

kunit_case! {
/// GET_INFO is recognised; foreign, unknown or wrongly directed commands
/// are `ENOTTY`; a struct shorter than version 1 is `EINVAL`.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_ioctl_decode(t: *mut c_void) {
    let d = decode(uapi::IOCTL_GET_INFO);
    kexpect!(
        t,
        d.is_ok_and(|d| d.cmd == Command::GetInfo && d.user_size == Info::SIZE)
    );
    kexpect!(t, decode(iowr(0x12, 0, Info::SIZE)) == Err(ENOTTY));
    kexpect!(
        t,
        decode(iowr(uapi::IOCTL_MAGIC, 0x55, Info::SIZE)) == Err(ENOTTY)
    );
    kexpect!(
        t,
        decode(ioctl::ioc(
            ioctl::IOC_WRITE,
            uapi::IOCTL_MAGIC,
            0,
            Info::SIZE
        )) == Err(ENOTTY)
    );
    kexpect!(
        t,
        decode(iowr(uapi::IOCTL_MAGIC, 0, Info::SIZE - 8)) == Err(EINVAL)
    );
    kexpect!(
        t,
        decode(iowr(uapi::IOCTL_MAGIC, 0, Info::SIZE + 64)).is_ok()
    );
}
}

kunit_case! {
/// Size-extensible copies: zero-extend shorter, check the tail of longer.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_ext_copy(t: *mut c_void) {
    kexpect!(
        t,
        ext_copy(40, 40).copy_len == 40 && ext_copy(40, 40).unknown_tail.is_none()
    );
    kexpect!(t, ext_copy(64, 40).unknown_tail == Some((40, 64)));
    kexpect!(t, ext_copy(24, 40).copy_len == 24);
    kexpect!(t, ioctl::check_unknown_tail(&[0; 16]).is_ok());
    kexpect!(t, ioctl::check_unknown_tail(&[0, 0, 0, 1]) == Err(E2BIG));
}
}

kunit_case! {
/// GET_INFO input validation: reserved fields, strides, overflow.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_info_validate(t: *mut c_void) {
    let base = Info::zeroed();
    kexpect!(t, validate_request(&base).is_ok());
    kexpect!(
        t,
        validate_request(&Info {
            flags: 1 << 31,
            ..base
        }) == Err(EINVAL)
    );
    kexpect!(
        t,
        validate_request(&Info {
            reserved: 1,
            ..base
        }) == Err(EINVAL)
    );
    let arr = Info {
        devices: 0x10000,
        device_entry_size: 112,
        device_capacity: 2,
        ..base
    };
    kexpect!(t, validate_request(&arr).is_ok());
    kexpect!(
        t,
        validate_request(&Info { devices: 0, ..arr }) == Err(EINVAL)
    );
    kexpect!(
        t,
        validate_request(&Info {
            device_entry_size: 8,
            ..arr
        }) == Err(EINVAL)
    );
    kexpect!(
        t,
        validate_request(&Info {
            devices: u64::MAX - 8,
            ..arr
        }) == Err(EOVERFLOW)
    );
}
}

kunit_case! {
/// Device entries land at the caller's stride, zero-filled past ours.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_info_slots(t: *mut c_void) {
    let req = Info {
        devices: 0x10000,
        device_entry_size: 160,
        device_capacity: 2,
        ..Info::zeroed()
    };
    let Ok(req) = validate_request(&req) else {
        kexpect!(t, false);
        return;
    };
    let s = req.slot(1, DeviceInfo::SIZE);
    kexpect!(
        t,
        s == Some(EntrySlot {
            addr: 0x10000 + 160,
            copy_len: 112,
            zero_len: 48
        })
    );
    kexpect!(t, req.slot(2, DeviceInfo::SIZE).is_none());
}
}

kunit_case! {
/// Struct codec: round trip, and names always NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_codec(t: *mut c_void) {
    let mut d = DeviceInfo::zeroed();
    d.set_name(&[b'x'; 100]);
    kexpect!(t, d.name[63] == 0 && d.name_bytes().len() == 63);
    d.set_name(b"siw0\0junk");
    kexpect!(t, d.name_bytes() == b"siw0");
    d.node_guid = 0x0102_0304_0506_0708;
    d.port_state = uapi::port_state::ACTIVE;
    kexpect!(t, DeviceInfo::decode(&d.encode()) == d);
    let i = Info {
        abi_version: 1,
        devices: u64::MAX,
        ..Info::zeroed()
    };
    kexpect!(t, Info::decode(&i.encode()) == i);
}
}

kunit_case! {
/// The pure errnos become the kernel errors userspace will see.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_errno_mapping(t: *mut c_void) {
    kexpect!(t, EINVAL.to_errno() == code::EINVAL.to_errno());
    kexpect!(t, ENOTTY.to_errno() == -25);
    kexpect!(t, E2BIG.to_errno() == code::E2BIG.to_errno());
}
}

kunit_case! {
/// A release is signalled exactly when the last holder of the guarded
/// object lets go, so `wait()` returns instead of blocking device removal.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_release_guard(t: *mut c_void) {
    use kernel::sync::Arc;
    use release::{Release, ReleaseGuard};

    let Ok(rel) = Release::new() else {
        kexpect!(t, false);
        return;
    };
    let Ok(obj) = Arc::new(
        ReleaseGuard::new(rel.clone()),
        kernel::alloc::flags::GFP_KERNEL,
    ) else {
        kexpect!(t, false);
        return;
    };
    let other = obj.clone();
    drop(obj);
    kexpect!(t, !rel.is_released());
    drop(other);
    kexpect!(t, rel.is_released());
    // Returns at once: the guard has dropped.
    rel.wait();
}
}

kunit_case! {
/// Region geometry and block spans: checked arithmetic, clear errnos.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_block_spans(t: *mut c_void) {
    use abi::blocks::Geometry;
    use abi::errno::ERANGE;
    let Ok(g) = Geometry::new(4096, 8, u64::MAX) else {
        kexpect!(t, false);
        return;
    };
    kexpect!(t, g.span(7, 1) == Ok((7 * 4096, 4096)));
    kexpect!(t, g.span(8, 1) == Err(ERANGE));
    kexpect!(t, g.span(u64::MAX, 2) == Err(EOVERFLOW));
    kexpect!(t, g.span(0, 0) == Err(EINVAL));
    kexpect!(t, Geometry::new(1000, 1, u64::MAX) == Err(EINVAL));
    kexpect!(t, Geometry::new(1 << 20, u64::MAX, u64::MAX) == Err(EOVERFLOW));
}
}

kunit_case! {
/// Handles are never 0, skip live ones, and a destroyed one is not handed
/// out again soon (300 reuses of a slot made the old 8-bit scheme wrap).
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_handles(t: *mut c_void) {
    use abi::handle::HandleCounter;
    let mut c = HandleCounter::new();
    let first = c.allocate(|_| false);
    kexpect!(t, first == Some(1));
    let mut reused = false;
    for _ in 0..300 {
        reused |= c.allocate(|_| false) == first;
    }
    kexpect!(t, !reused);
    let mut w = HandleCounter::starting_at(u32::MAX);
    kexpect!(t, w.allocate(|_| false) == Some(u32::MAX));
    kexpect!(t, w.allocate(|h| h == 1) == Some(2));
}
}

kunit_case! {
/// Region mappings: exact offset and length, shared, never executable.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_map_rules(t: *mut c_void) {
    use abi::errno::{ENXIO, EPERM};
    use abi::region::{check_map, MapRequest};
    let m = MapRequest { offset: 8192, len: 4096, shared: true, exec: false };
    kexpect!(t, check_map(&m, 8192, 4096).is_ok());
    kexpect!(t, check_map(&MapRequest { offset: 0, ..m }, 8192, 4096) == Err(ENXIO));
    kexpect!(t, check_map(&MapRequest { shared: false, ..m }, 8192, 4096) == Err(EINVAL));
    kexpect!(t, check_map(&MapRequest { exec: true, ..m }, 8192, 4096) == Err(EPERM));
}
}

kunit_case! {
/// Wire format: round trips, and malformed peer input is EPROTO.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_wire(t: *mut c_void) {
    use abi::errno::EPROTO;
    use abi::wire::{Ctrl, Hello, CTRL_LEN};
    use abi::wire::{CTRL_RECV_MIN, VERSION};
    let h = Hello {
        version: VERSION,
        ctrl_credits: CTRL_RECV_MIN,
        qps: 1,
        nonce: 42,
        replaces: None,
        lane: None,
    };
    let r = Hello { replaces: Some(7), ..h };
    kexpect!(t, Hello::decode(&r.encode()) == Ok(r));
    kexpect!(t, Hello::decode(&h.encode()) == Ok(h));
    kexpect!(t, Hello::decode(&h.encode()[..10]) == Err(EPROTO));
    let m = Ctrl::Revoke { req_id: 9, token: 7, generation: 3 };
    kexpect!(t, Ctrl::decode(&Ctrl::RevokeAck { req_id: 9 }.encode(VERSION)).is_ok());
    let mut b = m.encode(VERSION);
    kexpect!(t, Ctrl::decode(&b) == Ok(m));
    b[CTRL_LEN - 1] = 1;
    kexpect!(t, Ctrl::decode(&b) == Err(EPROTO));
    let ping = Ctrl::Ping { seq: 5 };
    kexpect!(t, Ctrl::decode(&ping.encode(VERSION)) == Ok(ping));
    kexpect!(t, Ctrl::decode(&ping.encode(2)) == Err(EPROTO));
}
}

kunit_case! {
/// Connection machine: establishment; a device removal asks for the
/// teardown once and ends with ENODEV when the teardown reports.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_conn_machine(t: *mut c_void) {
    use abi::conn::{step, Action, Event, State};
    use abi::errno::ENODEV;
    let (s, a) = step(State::Connecting, Event::Established);
    kexpect!(t, s == State::Connected && a == Action::Ready);
    let (s, a) = step(s, Event::DeviceRemoval);
    kexpect!(t, s == State::Closing { error: Some(ENODEV), retry: false } && a == Action::Teardown);
    kexpect!(t, step(s, Event::Disconnected) == (s, Action::None));
    let (s, a) = step(s, Event::TornDown);
    kexpect!(t, s == State::Closed { error: Some(ENODEV) } && a == Action::None);
}
}

kunit_case! {
/// Block operations: every check runs before posting, with the right errno.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_op_checks(t: *mut c_void) {
    use abi::blocks::Geometry;
    use abi::errno::{EKEYREVOKED, EPERM, ERANGE};
    use abi::ops::{check_op, RemoteView};
    use abi::uapi::{Op, OP_READ, OP_WRITE};
    let local = Geometry::new(4096, 8, u64::MAX).unwrap();
    let view = RemoteView {
        geometry: Geometry::new(4096, 16, u64::MAX).unwrap(),
        writable: false,
        revoked: false,
        max_blocks: 8,
    };
    let op = Op { opcode: OP_READ, count: 2, remote_block: 14, ..Op::zeroed() };
    kexpect!(t, check_op(&op, &local, &view).map(|c| c.remote_off) == Ok(14 * 4096));
    kexpect!(t, check_op(&Op { remote_block: 15, ..op }, &local, &view) == Err(ERANGE));
    kexpect!(t, check_op(&Op { remote_block: u64::MAX, ..op }, &local, &view) == Err(EOVERFLOW));
    kexpect!(t, check_op(&Op { opcode: OP_WRITE, ..op }, &local, &view) == Err(EPERM));
    kexpect!(t, check_op(&Op { reserved: 1, ..op }, &local, &view) == Err(EINVAL));
    let revoked = RemoteView { revoked: true, ..view };
    kexpect!(t, check_op(&op, &local, &revoked) == Err(EKEYREVOKED));
    let small = RemoteView { max_blocks: 1, ..view };
    kexpect!(t, check_op(&op, &local, &small) == Err(E2BIG));
}
}

kunit_case! {
/// Work requests never cross a registration chunk on either side.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_segments(t: *mut c_void) {
    use abi::ops::{chunk_shift, segment_count, segments, Checked, Dir};
    let c = Checked { dir: Dir::Write, local_off: 3 << 20, remote_off: (1 << 20) - 4096, len: 3 << 20, sent: false };
    let mut total = 0u64;
    let mut n = 0;
    for s in segments(&c, 20, 20) {
        kexpect!(t, s.local_off >> 20 == (s.local_off + u64::from(s.len) - 1) >> 20);
        kexpect!(t, s.remote_off >> 20 == (s.remote_off + u64::from(s.len) - 1) >> 20);
        total += u64::from(s.len);
        n += 1;
    }
    kexpect!(t, total == 3 << 20);
    kexpect!(t, n == 6);
    kexpect!(t, segment_count(&c, 20, 20) == 6);
    // Offsets that differ below the finer chunk: no boundary is shared.
    let c = Checked { dir: Dir::Read, local_off: 4096, remote_off: 8192 + 512, len: 1 << 21, sent: false };
    kexpect!(t, segment_count(&c, 12, 20) == segments(&c, 12, 20).count() as u64);
    kexpect!(t, chunk_shift(256, 12) == 20);
    kexpect!(t, chunk_shift(512, 12) == 20);
}
}

kunit_case! {
/// Work completion statuses map to the errnos userspace sees.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_wc_errno(t: *mut c_void) {
    use abi::errno::{EACCES, ECANCELED, ECONNRESET};
    use abi::wc;
    kexpect!(t, wc::to_errno(wc::SUCCESS).is_none());
    kexpect!(t, wc::to_errno(wc::REM_ACCESS_ERR) == Some(EACCES));
    kexpect!(t, wc::to_errno(wc::WR_FLUSH_ERR) == Some(ECANCELED));
    kexpect!(t, wc::to_errno(wc::RETRY_EXC_ERR) == Some(ECONNRESET));
    kexpect!(t, wc::to_errno(wc::BAD_RESP_ERR) == Some(ECONNRESET));
}
}

kunit_case! {
/// The completion ring: reservations bound it; a record a reader could
/// not deliver goes back to the front.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_ring(t: *mut c_void) {
    use abi::ring::RingIndex;
    let mut r = RingIndex::new(4);
    kexpect!(t, r.reserve(9) == 4);
    kexpect!(t, r.push() == Some(0) && r.push() == Some(1));
    kexpect!(t, r.lend(4) == (0, 2));
    kexpect!(t, r.settle(2, 1) == 1);
    kexpect!(t, r.len() == 1 && r.lent() == 0 && r.reserved() == 2);
}
}

kunit_case! {
/// An operation of the largest size an import allows fits the send queue.
#[no_mangle]
pub unsafe extern "C" fn rrdma_kt_op_limits(t: *mut c_void) {
    use abi::ops::{max_op_blocks, max_wrs};
    let max = max_op_blocks(4096, 20, 20, 256, true);
    kexpect!(t, max > 0 && max_wrs(u64::from(max) * 4096, 20, 20, true) <= 256);
    kexpect!(t, max_wrs(u64::from(max + 1) * 4096, 20, 20, true) > 256);
}
}
