// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Limits on what a file holds: RLIMIT_MEMLOCK without CAP_IPC_LOCK,
//! also after a mapped region's destroy, and the cap on exports.

use rrdma::abi::errno::{ENOMEM, ENOSPC};
use rrdma::abi::uapi::{Export as ExportArg, ACCESS_READ};
use rrdma::Rrdma;

use super::{create, map, rw, unmap};
use crate::child::unprivileged;
use crate::{expect_errno, expect_ok, Tap};

/// RLIMIT_MEMLOCK, in unprivileged children.
pub(super) fn memlock_checks(t: &mut Tap) {
    t.check(
        "RLIMIT_MEMLOCK is enforced without CAP_IPC_LOCK",
        memlock_check(),
    );
    t.check(
        "RLIMIT_MEMLOCK: a destroyed region's charge lasts while it is mapped",
        memlock_mapped_check(),
    );
}

/// The cap on exports per file.
pub(super) fn export_cap_check(t: &mut Tap) {
    // Found by the fuzzer: the cap on exports per file, and its errno.
    t.check(
        "EXPORT beyond 4096 exports in a file is ENOSPC; UNEXPORT makes room",
        (|| {
            let dev = expect_ok(Rrdma::open())?;
            let r = expect_ok(create(&dev, 4096, 1))?;
            let export = |dev: &Rrdma| {
                dev.export_raw(&ExportArg {
                    region: r.handle,
                    access: ACCESS_READ,
                    ..ExportArg::zeroed()
                })
            };
            let mut tokens = Vec::new();
            for _ in 0..4096 {
                tokens.push(expect_ok(export(&dev))?.token);
            }
            expect_errno(export(&dev), ENOSPC)?;
            expect_ok(dev.unexport_raw(tokens[0], 0))?;
            expect_ok(export(&dev)).map(|_| ())
        })(),
    );
}

/// In a child that opened its own file and then dropped to an unprivileged
/// user with a 64 KiB memlock limit: 32 KiB fits, 1 MiB does not (ENOMEM),
/// and after freeing the first the budget is back. The child's objects die
/// with its file when it exits.
fn memlock_check() -> Result<(), String> {
    unprivileged(
        65536,
        || Rrdma::open().ok(),
        |dev| match create(&dev, 4096, 8) {
            Err(_) => 11,
            Ok(small) => match create(&dev, 4096, 256) {
                Ok(_) => 12,
                Err(e) if e.raw_os_error() != Some(ENOMEM.get()) => 13,
                Err(_) => {
                    if dev.region_destroy_raw(small.handle, 0).is_err() {
                        14
                    } else if create(&dev, 4096, 16).is_err() {
                        15
                    } else {
                        0
                    }
                }
            },
        },
        "11: 32 KiB refused; 12: 1 MiB accepted; 13: not ENOMEM; 14: destroy; 15: the budget not back",
    )
}

/// In an unprivileged child with a 1 MiB memlock limit: a 768 KiB region
/// mapped and then destroyed still counts against the limit (a second one
/// is ENOMEM) until the mapping goes.
fn memlock_mapped_check() -> Result<(), String> {
    const LEN: usize = 768 << 10;
    unprivileged(
        1 << 20,
        || Rrdma::open().ok(),
        |dev| {
        let mut code = 0;
        for round in 0..4 {
            let Ok(a) = create(&dev, 4096, (LEN / 4096) as u64) else {
                code = 20 + round;
                break;
            };
            let Ok(p) = map(&dev, a.mmap_offset, LEN, rw(), libc::MAP_SHARED) else {
                code = 30 + round;
                break;
            };
            // SAFETY: the first byte of the mapping just made.
            unsafe { *p = 1 };
            if dev.region_destroy_raw(a.handle, 0).is_err() {
                code = 40 + round;
                break;
            }
            match create(&dev, 4096, (LEN / 4096) as u64) {
                Err(e) if e.raw_os_error() == Some(ENOMEM.get()) => {}
                _ => {
                    code = 50 + round;
                    break;
                }
            }
            unmap(p, LEN);
        }
        code
        },
        "20 + round: create; 30 + round: map; 40 + round: destroy; 50 + round: a second region not ENOMEM",
    )
}
