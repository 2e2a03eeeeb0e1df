// SPDX-License-Identifier: GPL-2.0

//! The documentation's liburing example (`csrc/uring_example.c`) on rings
//! of every kind the library does not build: blocks moved one at a time,
//! and rings closed with writes in flight.

use std::ffi::{c_int, c_uint};

use rrdma::abi::errno::EINVAL;
use rrdma::abi::uapi::{Op, OP_READ, OP_WRITE};
use rrdma::{Region, RemoteRegion, Rrdma};

use super::{intact, round_trip};
use crate::remote::pattern;
use crate::{ensure, expect_ok, Tap};

/// One `struct rrdma_op` as the UAPI header lays it out (8-byte aligned).
#[repr(C, align(8))]
struct RawOp([u8; Op::SIZE]);

extern "C" {
    /// The documentation's liburing example (`csrc/uring_example.c`).
    fn ux_run(
        fd: c_int,
        flags: c_uint,
        ops: *const RawOp,
        n: c_uint,
        res: *mut c_int,
        ns: *mut u64,
    ) -> c_int;
    /// Submits `n` operations on a fresh ring and closes it at once.
    fn ux_close_in_flight(fd: c_int, flags: c_uint, ops: *const RawOp, n: c_uint) -> c_int;
}

const IORING_SETUP_IOPOLL: u32 = 1;
const IORING_SETUP_SQPOLL: u32 = 1 << 1;
const IORING_SETUP_SINGLE_ISSUER: u32 = 1 << 12;
const IORING_SETUP_DEFER_TASKRUN: u32 = 1 << 13;
const IORING_SETUP_HYBRID_IOPOLL: u32 = 1 << 17;
/// Completions' task work runs only when the task waits for CQEs.
const DEFER: u32 = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;

/// Runs `ops` one at a time through the C example on a ring set up with
/// `flags`: each one's CQE res and time to its CQE (us), or the -errno.
fn liburing(dev: &Rrdma, flags: u32, ops: &[Op]) -> Result<Vec<(i32, f64)>, i32> {
    let raw: Vec<RawOp> = ops.iter().map(|o| RawOp(o.encode())).collect();
    let (mut res, mut ns) = (vec![0; ops.len()], vec![0; ops.len()]);
    // SAFETY: `raw` holds `ops.len()` operations laid out as the header's
    // `struct rrdma_op`; `res` and `ns` have room for as many results; the
    // C side keeps none of them after it returns.
    let ret = unsafe {
        ux_run(
            dev.raw_fd(),
            flags,
            raw.as_ptr(),
            ops.len() as c_uint,
            res.as_mut_ptr(),
            ns.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return Err(ret);
    }
    Ok(res
        .into_iter()
        .zip(ns.into_iter().map(|n| n as f64 / 1000.0))
        .collect())
}

/// Submits `ops` (at most 64) through the C example on a ring set up with
/// `flags` and closes the ring at once: how many it submitted, or the
/// -errno.
fn liburing_close(dev: &Rrdma, flags: u32, ops: &[Op]) -> Result<usize, i32> {
    let raw: Vec<RawOp> = ops.iter().map(|o| RawOp(o.encode())).collect();
    // SAFETY: `raw` holds `ops.len()` operations laid out as the header's
    // `struct rrdma_op`, which the C side only reads before it returns.
    let ret = unsafe { ux_close_in_flight(dev.raw_fd(), flags, raw.as_ptr(), ops.len() as c_uint) };
    usize::try_from(ret).map_err(|_| ret)
}

/// Whether this kernel has `IORING_SETUP_HYBRID_IOPOLL` (6.13 and later).
fn has_hybrid_iopoll() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    (v.next().unwrap_or(0), v.next().unwrap_or(0)) >= (6, 13)
}

/// The documentation's liburing example, on a plain ring, an IOPOLL ring,
/// a hybrid IOPOLL ring, SQPOLL rings (the kernel's SQ thread issues the
/// commands and, with IOPOLL, polls for them) and DEFER_TASKRUN rings
/// (completions wait for the task to ask for CQEs): 16 writes, then 16
/// reads back, one at a time; a kernel before 6.13 refuses the hybrid
/// ring with EINVAL.
pub(super) fn liburing_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    rw: &RemoteRegion<'_>,
    out: &mut Region,
) {
    let back = expect_ok(dev.create_region(4096, 16)).expect("region");
    let rings = [
        ("a plain ring", 0, 0x3bad),
        ("an IOPOLL ring", IORING_SETUP_IOPOLL, 0x4bad),
        (
            "a hybrid IOPOLL ring",
            IORING_SETUP_IOPOLL | IORING_SETUP_HYBRID_IOPOLL,
            0x5bad,
        ),
        ("an SQPOLL ring", IORING_SETUP_SQPOLL, 0x6bad),
        (
            "an SQPOLL IOPOLL ring",
            IORING_SETUP_SQPOLL | IORING_SETUP_IOPOLL,
            0x7bad,
        ),
        ("a DEFER_TASKRUN ring", DEFER, 0x8bad),
        (
            "a DEFER_TASKRUN IOPOLL ring",
            DEFER | IORING_SETUP_IOPOLL,
            0x9bad,
        ),
    ];
    for (what, flags, seed) in rings {
        if flags & IORING_SETUP_HYBRID_IOPOLL != 0 && !has_hybrid_iopoll() {
            let r = liburing(dev, flags, &[]);
            t.check(
                &format!("liburing example: {what} is refused with EINVAL before 6.13"),
                ensure(r == Err(-EINVAL.get()), format!("{r:?}")),
            );
            continue;
        }
        let res = (|| {
            pattern(out.as_mut_slice(), seed);
            let (writes, reads) = round_trip(rw, out, &back, 216, 5000);
            let mut p50 = Vec::new();
            for ops in [&writes, &reads] {
                let mut done = liburing(dev, flags, ops).map_err(|e| format!("errno {}", -e))?;
                ensure(
                    done.iter().all(|d| d.0 == 4096),
                    format!("res {:?}", done.iter().map(|d| d.0).collect::<Vec<_>>()),
                )?;
                done.sort_by(|a, b| a.1.total_cmp(&b.1));
                p50.push(done[done.len() / 2].1);
            }
            println!(
                "# liburing example on {what}: 4 KiB WRITE p50 {:.0} us, READ p50 {:.0} us",
                p50[0], p50[1]
            );
            intact(peer, out, &back, 216)
        })();
        t.check(
            &format!(
                "liburing example: on {what}, 16 writes and 16 reads one at a time, res 4096 and their user_data, bytes intact on both ends"
            ),
            res,
        );
    }
    // The rings the library cannot build, closed with 64 writes in
    // flight: io_uring's teardown waits for them (polls them from its
    // exit work or the SQ thread; runs deferred task work in its
    // fallback) until each completed; the connection goes on.
    let closed = [
        (
            "a hybrid IOPOLL ring",
            IORING_SETUP_IOPOLL | IORING_SETUP_HYBRID_IOPOLL,
        ),
        (
            "an SQPOLL IOPOLL ring",
            IORING_SETUP_SQPOLL | IORING_SETUP_IOPOLL,
        ),
        ("a DEFER_TASKRUN ring", DEFER),
        ("a DEFER_TASKRUN IOPOLL ring", DEFER | IORING_SETUP_IOPOLL),
    ];
    for (what, flags) in closed {
        if flags & IORING_SETUP_HYBRID_IOPOLL != 0 && !has_hybrid_iopoll() {
            continue;
        }
        let res = (|| {
            let ops: Vec<Op> = (0..64)
                .map(|i| rw.op(OP_WRITE, out, i % 16, i, 1, 7000 + i))
                .collect();
            let n = liburing_close(dev, flags, &ops).map_err(|e| format!("errno {}", -e))?;
            ensure(n == 64, format!("{n} submitted"))?;
            super::drained(dev)?;
            let next = liburing(dev, 0, &[rw.op(OP_READ, &back, 0, 0, 1, 7100)])
                .map_err(|e| format!("next read: errno {}", -e))?;
            ensure(next[0].0 == 4096, format!("next read: res {}", next[0].0))
        })();
        t.check(
            &format!(
                "liburing example: {what} closed with 64 writes in flight; they all end, the next works"
            ),
            res,
        );
    }
}
