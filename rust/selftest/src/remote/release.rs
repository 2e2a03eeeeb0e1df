// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A destroyed region that moved blocks gives its memory back while its
//! connection lives on: its registrations cached on the connection go
//! once no operation uses them (the cache's leases are all given back),
//! and with them the last reference to its pages and its RLIMIT_MEMLOCK
//! charge.

use rrdma::abi::uapi::{Op, RegionCreate, OP_READ};
use rrdma::{RemoteRegion, Rrdma};

use crate::child::unprivileged;
use crate::Tap;

/// Region size: two do not fit under the child's memlock limit.
const BLOCKS: u64 = 192;
const LIMIT: u64 = 1 << 20;

pub(super) fn checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    t.check(
        "a destroyed region that moved blocks gives back its RLIMIT_MEMLOCK charge (4 rounds)",
        child(dev, rw),
    );
}

/// In a child that drops to an unprivileged user with a 1 MiB memlock
/// limit: four rounds of a 768 KiB region (unmapped) that reads a remote
/// block into each of its chunks and is destroyed. Each round's region
/// fits only if the one before gave its charge back.
fn child(dev: &Rrdma, rw: &RemoteRegion<'_>) -> Result<(), String> {
    let template = Op {
        opcode: OP_READ,
        remote: rw.handle(),
        count: 1,
        ..Op::zeroed()
    };
    unprivileged(
        LIMIT,
        || Some(()),
        |()| rounds(dev, &template),
        "20 + round: create refused; 30 + round: read failed; 40 + round: destroy failed",
    )
}

/// The child's rounds; its exit code.
fn rounds(dev: &Rrdma, template: &Op) -> i32 {
    for round in 0..4 {
        let Ok(region) = dev.region_create_raw(&RegionCreate {
            block_size: 4096,
            nblocks: BLOCKS,
            ..RegionCreate::zeroed()
        }) else {
            return 20 + round;
        };
        // A block into every 64 KiB, so every chunk is registered.
        for lb in (0..BLOCKS).step_by(16) {
            let op = Op {
                local: region.handle,
                local_block: lb,
                ..*template
            };
            if dev.rw_sync(&op).is_err() {
                return 30 + round;
            }
        }
        if dev.region_destroy_raw(region.handle, 0).is_err() {
            return 40 + round;
        }
    }
    0
}
