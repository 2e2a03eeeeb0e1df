// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Refused calls do nothing (SUBMIT's argument in read-only memory, an
//! operation past max_op_blocks, a full send queue); large operations.

use std::time::Instant;

use rrdma::abi::errno::{E2BIG, EFAULT};
use rrdma::abi::uapi::{Op, Submit, IOCTL_SUBMIT, OP_READ, OP_WRITE};
use rrdma::{RemoteRegion, Rrdma};

use crate::remote::{control, expect_errno_any, fnv, pattern, quiet, reap};
use crate::{ensure, expect_errno, expect_ok, Tap};

const BS: u64 = 4096;

/// Items 2-4: refused calls do nothing; sizes past the send queue.
pub(super) fn refusal_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    rw: &RemoteRegion<'_>,
    quick: bool,
) {
    let page = rrdma::page_size() as usize;
    let local = dev.create_region(4096, 64).expect("region");
    let ops: Vec<u8> = (0..16)
        .flat_map(|i| rw.op(OP_READ, &local, i, i, 1, i).encode())
        .collect();
    let arg = crate::map_anon(page, libc::PROT_READ | libc::PROT_WRITE);
    let sub = Submit {
        ops: ops.as_ptr() as u64,
        count: 16,
        op_size: Op::SIZE as u32,
        ..Submit::zeroed()
    }
    .encode();
    // SAFETY: our page, then made read-only.
    unsafe {
        std::ptr::copy_nonoverlapping(sub.as_ptr(), arg as *mut u8, sub.len());
        libc::mprotect(arg as *mut libc::c_void, page, libc::PROT_READ);
    }
    // SAFETY: a read-only page: the kernel cannot write its answer back.
    t.check(
        "SUBMIT with its argument in read-only memory: EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(IOCTL_SUBMIT, arg) }, EFAULT),
    );
    t.check("... and posts nothing", quiet(dev, 500));

    let max = rw.max_op_blocks();
    t.check(
        "IMPORT reports the largest operation, below the region's size",
        ensure(
            max > 0 && u64::from(max) < rw.nblocks(),
            format!("max_op_blocks {max} of {}", rw.nblocks()),
        ),
    );
    let n = (rw.nblocks() - 8) as u32;
    let mut big = match dev.create_region(4096, u64::from(n) + 8) {
        Ok(r) => r,
        Err(e) => return t.check("a local region as large as the peer's", Err(e.to_string())),
    };
    let over = rw.op(OP_WRITE, &big, 3, 5, max + 1, 1);
    t.check(
        "an operation of max_op_blocks + 1 blocks: E2BIG",
        expect_errno_any(dev.submit(&[over]), E2BIG),
    );
    t.check("... and posts nothing", quiet(dev, 300));
    t.check(
        "... and the registration it touched first still works",
        expect_ok(rw.write(&big, 3, 5, 1)),
    );
    // Quick mode (debug kernels, where siw moves about 220 KB/s under TCG
    // and KASAN: 37 s for 8 MiB): transfers of 2 MiB instead of the whole
    // region.
    let (exact, n) = if quick {
        (max.min(512), n.min(512))
    } else {
        (max, n)
    };
    t.check(
        &format!("an operation of {exact} blocks (max_op_blocks {max})"),
        expect_ok(dev.rw_sync(&rw.op(OP_WRITE, &big, 3, 5, exact, 0))),
    );
    // Fill the send queue: SUBMIT posts what fits and says how many.
    let res = (|| -> Result<(), String> {
        let mut posted = 0usize;
        let mut refused = false;
        for round in 0..64u64 {
            let ops: Vec<Op> = (0..64)
                .map(|i| rw.op(OP_READ, &local, i % 64, i, 1, round * 64 + i))
                .collect();
            match dev.submit(&ops) {
                Ok(k) if k == ops.len() => posted += k,
                Ok(k) => {
                    posted += k;
                    refused = true;
                    break;
                }
                Err(e) if rrdma::errno(&e) == Some(libc::EAGAIN) => {
                    refused = true;
                    break;
                }
                Err(e) => return Err(format!("SUBMIT: {e}")),
            }
        }
        let got = reap(dev, posted).map_err(|e| e.to_string())?;
        ensure(
            got.len() == posted && got.iter().all(|c| c.status == 0),
            format!("{} of {posted} completed", got.len()),
        )?;
        ensure(refused, "the queue never filled")?;
        rw.read(&local, 0, 0, 1).map_err(|e| format!("after: {e}"))
    })();
    t.check(
        "a full send queue refuses with EAGAIN; all posted complete; nothing is poisoned",
        res,
    );
    // A large misaligned write, split by the library, lands bit-exact.
    pattern(big.as_mut_slice(), 7);
    let res = (|| -> Result<(), String> {
        let start = Instant::now();
        rw.write(&big, 3, 5, n).map_err(|e| format!("write: {e}"))?;
        let el = start.elapsed();
        let theirs = control(peer, &format!("checksum 5 {n}")).map_err(|e| e.to_string())?;
        let ours = format!(
            "{:#x}",
            fnv(&big.as_slice()[3 * BS as usize..(3 + u64::from(n)) as usize * BS as usize])
        );
        println!("# {} MiB write in {el:?}", (u64::from(n) * BS) >> 20);
        ensure(theirs == ours, format!("peer {theirs}, ours {ours}"))
    })();
    t.check(
        &format!(
            "a {} MiB misaligned write (split if over max_op_blocks) lands bit-exact in the peer's memory",
            (u64::from(n) * BS) >> 20
        ),
        res,
    );
}
