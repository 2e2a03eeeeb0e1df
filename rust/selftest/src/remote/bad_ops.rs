// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Bad operations through RW_SYNC and io_uring (the same errno from
//! each), and SUBMIT's framing: counts, sizes, flags, unreadable arrays.

use rrdma::abi::errno::{EFAULT, EINVAL, ENOENT, EOVERFLOW, EPERM, ERANGE};
use rrdma::abi::uapi::{Op, Submit, OP_READ, OP_WRITE};
use rrdma::{RemoteRegion, Rrdma};

use super::common::{expect_errno_any, op, quiet};
use crate::{ensure, expect_errno, expect_ok, map_anon, Tap};

pub(super) fn bad_op_checks(
    dev: &Rrdma,
    t: &mut Tap,
    rw: &RemoteRegion<'_>,
    ro: &RemoteRegion<'_>,
) {
    let local = expect_ok(dev.create_region(4096, 8)).expect("region");
    let small = expect_ok(dev.create_region(512, 8)).expect("region");
    let good = op(rw, &local, OP_READ, 0, 0, 1, 0);
    let cases: Vec<(&str, Op, i32)> = vec![
        (
            "remote block == nblocks: ERANGE",
            Op {
                remote_block: 256,
                ..good
            },
            ERANGE.get(),
        ),
        (
            "remote range crossing the end: ERANGE",
            Op {
                remote_block: 250,
                count: 7,
                ..good
            },
            ERANGE.get(),
        ),
        (
            "local range crossing the end: ERANGE",
            Op {
                local_block: 7,
                count: 2,
                ..good
            },
            ERANGE.get(),
        ),
        ("count 0: EINVAL", Op { count: 0, ..good }, EINVAL.get()),
        (
            "remote block u64::MAX: EOVERFLOW",
            Op {
                remote_block: u64::MAX,
                ..good
            },
            EOVERFLOW.get(),
        ),
        (
            "unknown opcode: EINVAL",
            Op { opcode: 3, ..good },
            EINVAL.get(),
        ),
        ("a flag set: EINVAL", Op { flags: 1, ..good }, EINVAL.get()),
        (
            "the reserved field set: EINVAL",
            Op {
                reserved: 1,
                ..good
            },
            EINVAL.get(),
        ),
        (
            "a region handle as the remote: EINVAL",
            Op {
                remote: local.handle(),
                ..good
            },
            EINVAL.get(),
        ),
        (
            "an import handle as the local: EINVAL",
            Op {
                local: rw.handle(),
                ..good
            },
            EINVAL.get(),
        ),
        (
            "remote handle 0: ENOENT",
            Op { remote: 0, ..good },
            ENOENT.get(),
        ),
        (
            "local region of another block size: EINVAL",
            Op {
                local: small.handle(),
                ..good
            },
            EINVAL.get(),
        ),
        (
            "write to a read-only export: EPERM",
            op(ro, &local, OP_WRITE, 0, 0, 1, 0),
            EPERM.get(),
        ),
    ];
    // The same operations as io_uring commands: the same errno, in the CQE.
    let mut eng = rrdma::UringEngine::new(dev, 8).ok();
    for (name, o, e) in cases {
        t.check(&format!("RW_SYNC {name}"), expect_errno(dev.rw_sync(&o), e));
        if let Some(eng) = eng.as_mut() {
            t.check(
                &format!("io_uring {name}"),
                crate::uring::one(eng, &o)
                    .and_then(|r| ensure(r == -e, format!("res {r}, want {}", -e))),
            );
        }
    }
    t.check(
        "read of a read-only export works",
        expect_ok(dev.rw_sync(&op(ro, &local, OP_READ, 0, 0, 8, 0))).map(|_| ()),
    );
    // SUBMIT framing.
    let bytes: Vec<u8> = [good, Op { count: 0, ..good }]
        .iter()
        .flat_map(|o| o.encode())
        .collect();
    let base = Submit {
        ops: bytes.as_ptr() as u64,
        count: 1,
        op_size: Op::SIZE as u32,
        ..Submit::zeroed()
    };
    t.check(
        "SUBMIT of 0 ops: EINVAL",
        expect_errno_any(dev.submit_raw(&Submit { count: 0, ..base }), EINVAL),
    );
    t.check(
        "SUBMIT of 1025 ops: EINVAL",
        expect_errno_any(
            dev.submit_raw(&Submit {
                count: 1025,
                ..base
            }),
            EINVAL,
        ),
    );
    t.check(
        "SUBMIT with op_size 40: EINVAL",
        expect_errno_any(
            dev.submit_raw(&Submit {
                op_size: 40,
                ..base
            }),
            EINVAL,
        ),
    );
    t.check(
        "SUBMIT with a flag set: EINVAL",
        expect_errno_any(dev.submit_raw(&Submit { flags: 1, ..base }), EINVAL),
    );
    t.check(
        "SUBMIT of a NULL op array: EFAULT",
        expect_errno_any(dev.submit_raw(&Submit { ops: 0, ..base }), EFAULT),
    );
    let res = dev.submit_raw(&Submit { count: 2, ..base });
    t.check(
        "SUBMIT whose 2nd op is bad fails with its errno and index 1",
        match &res {
            Err(e) => match e
                .get_ref()
                .and_then(|x| x.downcast_ref::<rrdma::SubmitError>())
            {
                Some(s) if s.index == 1 && s.err.raw_os_error() == Some(EINVAL.get()) => Ok(()),
                other => Err(format!("{other:?}")),
            },
            Ok(s) => Err(format!("succeeded with {}", s.submitted)),
        },
    );
    t.check("... and posts nothing", quiet(dev, 300));
    // An op array running into an unmapped page half way.
    let page = rrdma::page_size() as usize;
    let map = map_anon(2 * page, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: unmapping the second page of our own mapping.
    unsafe { libc::munmap((map as usize + page) as *mut libc::c_void, page) };
    let first = map + page as u64 - Op::SIZE as u64;
    // SAFETY: `first` is inside the mapped first page.
    unsafe { std::ptr::copy_nonoverlapping(good.encode().as_ptr(), first as *mut u8, Op::SIZE) };
    t.check(
        "SUBMIT of ops running into an unmapped page: EFAULT",
        expect_errno_any(
            dev.submit_raw(&Submit {
                ops: first,
                count: 2,
                ..base
            }),
            EFAULT,
        ),
    );
    t.check("... and posts nothing", quiet(dev, 300));
}
