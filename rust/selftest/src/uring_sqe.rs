// SPDX-License-Identifier: GPL-2.0

//! The io_uring command refuses every SQE field it does not use, so that
//! it can grow as the rest of the ABI does: an SQE with one byte of such a
//! field set (each byte alone, to 0x01 and to 0x80) gets one CQE, `-EINVAL`,
//! and posts nothing (the remote block it would have written is
//! untouched); a clean SQE right after works. The fields: `addr`, `len`,
//! `uring_cmd_flags` (`IORING_URING_CMD_FIXED` with a buffer registered,
//! so that io_uring's own checks pass), `buf_index`, `file_index` and the
//! command area after the `struct rrdma_op`; `ioprio` and `__pad1`, which
//! io_uring itself refuses, for completeness.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use io_uring::{cqueue, squeue, types, IoUring};
use rrdma::abi::errno::EINVAL;
use rrdma::abi::uapi::{Op, OP_READ, OP_WRITE, URING_CMD_OP};
use rrdma::{Region, RemoteRegion, Rrdma, UringEngine};

use crate::remote::pattern;
use crate::{ensure, expect_ok, Tap};

/// The remote block the refused SQEs would write.
const BLOCK: u64 = 248;

/// The SQE's unused fields: name, offset and size in the 128-byte SQE
/// (`struct io_uring_sqe` of 6.12 and 7.3; the command area starts at 48).
const FIELDS: [(&str, usize, usize); 8] = [
    ("ioprio", 2, 2),
    ("__pad1", 12, 4),
    ("addr", 16, 8),
    ("len", 24, 4),
    ("uring_cmd_flags", 28, 4),
    ("buf_index", 40, 2),
    ("file_index", 44, 4),
    ("cmd after the operation", 48 + Op::SIZE, 80 - Op::SIZE),
];

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

fn to_bytes(e: squeue::Entry128) -> [u8; 128] {
    // SAFETY: `Entry128` is `#[repr(C)]`: a `struct io_uring_sqe` (integers
    // and unions of them) and 64 bytes, 128 bytes with no padding.
    unsafe { core::mem::transmute::<squeue::Entry128, [u8; 128]>(e) }
}

fn from_bytes(b: [u8; 128]) -> squeue::Entry128 {
    // SAFETY: as in `to_bytes`; every bit pattern is a valid SQE.
    unsafe { core::mem::transmute::<[u8; 128], squeue::Entry128>(b) }
}

/// The field table matches the SQE the library builds: opcode
/// (`IORING_OP_URING_CMD`), fd, `cmd_op` and `user_data` where the table
/// says the other fields are not, the operation at the command area's
/// start, and every field of the table zero.
fn layout(fd: i32, op: &Op) -> Result<(), String> {
    let b = to_bytes(UringEngine::entry(fd, op));
    let le32 = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    ensure(b[0] == 46, format!("opcode {}", b[0]))?;
    ensure(le32(4) == fd as u32, "fd")?;
    ensure(le32(8) == URING_CMD_OP, "cmd_op")?;
    ensure(b[32..40] == op.user_data.to_le_bytes(), "user_data")?;
    ensure(b[48..48 + Op::SIZE] == op.encode(), "operation")?;
    let zero = FIELDS
        .iter()
        .all(|&(_, o, n)| b[o..o + n].iter().all(|&x| x == 0));
    ensure(zero, "a field of the table is not zero in a clean SQE")
}

/// Pushes `sqes`, submits them and waits until `want` CQEs came (5 s at
/// most), then 100 ms more for any other: all of them, by user_data.
fn run(ring: &mut Ring, sqes: &[squeue::Entry128], want: usize) -> Result<Vec<(u64, i32)>, String> {
    for e in sqes {
        // SAFETY: the SQEs refer to no user memory.
        unsafe { ring.submission().push(e) }.map_err(|_| "submission queue full")?;
    }
    let mut out = Vec::new();
    let start = Instant::now();
    let mut settle = None;
    loop {
        let ts = types::Timespec::from(Duration::from_millis(20));
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
            Err(e) => return Err(format!("io_uring_enter: {e}")),
        }
        out.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        if out.len() >= want && settle.is_none() {
            settle = Some(Instant::now());
        }
        if settle.is_some_and(|s| s.elapsed() > Duration::from_millis(100)) {
            return Ok(out);
        }
        if start.elapsed() > Duration::from_secs(5) {
            return Err(format!("{} of {want} CQEs in 5 s", out.len()));
        }
    }
}

/// One clean SQE of `op` on `ring`: its CQE's res.
fn clean(ring: &mut Ring, fd: i32, op: &Op) -> Result<i32, String> {
    let cs = run(ring, &[UringEngine::entry(fd, op)], 1)?;
    ensure(cs.len() == 1, format!("CQEs {cs:?}"))?;
    Ok(cs[0].1)
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let fd = dev.raw_fd();
    // Local blocks: 0 the remote block's contents, 1 what the refused
    // SQEs would write, 2 read back.
    let mut local = expect_ok(dev.create_region(4096, 3)).expect("region");
    pattern(&mut local.as_mut_slice()[..4096], 0x43_0001);
    pattern(&mut local.as_mut_slice()[4096..8192], 0x43_0002);
    let bad = rw.op(OP_WRITE, &local, 1, BLOCK, 1, 0);
    t.check(
        "io_uring SQE layout: the unused fields' offsets",
        layout(fd, &bad),
    );
    // A registered buffer, for IORING_URING_CMD_FIXED to pass io_uring's
    // prep (6.12 checks buf_index against the registered buffers there).
    // Declared before the ring: it outlives the registration.
    let mut buf = vec![0u8; 4096];
    let mut ring = match Ring::builder().build(128) {
        Ok(r) => r,
        Err(e) => return t.check("io_uring SQE fields: a ring", Err(e.to_string())),
    };
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `buf` lives until after the ring is dropped (declared first).
    if let Err(e) = unsafe { ring.submitter().register_buffers(&[iov]) } {
        return t.check("io_uring SQE fields: register a buffer", Err(e.to_string()));
    }
    let first = clean(&mut ring, fd, &rw.op(OP_WRITE, &local, 0, BLOCK, 1, 1));
    t.check(
        "io_uring SQE fields: a clean write first",
        first.and_then(|r| ensure(r == 4096, format!("res {r}"))),
    );
    // Every byte of every field alone, at 0x01 and at 0x80.
    let base = to_bytes(UringEngine::entry(fd, &bad));
    let mut what = Vec::new();
    let mut sqes = Vec::new();
    for (f, &(_, off, len)) in FIELDS.iter().enumerate() {
        for at in off..off + len {
            for val in [0x01u8, 0x80] {
                let mut b = base;
                b[at] = val;
                b[32..40].copy_from_slice(&(sqes.len() as u64).to_le_bytes());
                what.push((f, at, val));
                sqes.push(from_bytes(b));
            }
        }
    }
    let cqes = run(&mut ring, &sqes, sqes.len());
    let mut per_field: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut extra = Vec::new();
    match &cqes {
        Ok(cs) => {
            let mut seen = vec![0u32; sqes.len()];
            for &(ud, res) in cs {
                let Some(&(f, at, val)) = what.get(ud as usize) else {
                    extra.push(format!("user_data {ud}: res {res}"));
                    continue;
                };
                seen[ud as usize] += 1;
                if res != -EINVAL.get() || seen[ud as usize] > 1 {
                    let n = seen[ud as usize];
                    per_field
                        .entry(f)
                        .or_default()
                        .push(format!("byte {at} = {val:#x}: res {res} (CQE {n})"));
                }
            }
            for (ud, n) in seen.iter().enumerate().filter(|(_, &n)| n == 0) {
                let (f, at, val) = what[ud];
                per_field
                    .entry(f)
                    .or_default()
                    .push(format!("byte {at} = {val:#x}: {n} CQEs"));
            }
        }
        Err(e) => extra.push(e.clone()),
    }
    for (f, &(name, off, len)) in FIELDS.iter().enumerate() {
        let bad = per_field.remove(&f).unwrap_or_default();
        let why = format!(
            "{} of {} SQEs: {:?} {extra:?}",
            bad.len(),
            2 * len,
            &bad[..bad.len().min(4)]
        );
        t.check(
            &format!(
                "io_uring: a non-zero {name} (SQE bytes {off}..{}, each alone): one CQE, -EINVAL",
                off + len
            ),
            ensure(bad.is_empty() && extra.is_empty(), why),
        );
    }
    t.check(
        "io_uring: the refused SQEs posted nothing (the remote block is untouched)",
        readback(&mut ring, fd, rw, &local)
            .and_then(|b| ensure(b == local.as_slice()[..4096], "the remote block changed")),
    );
    t.check(
        "io_uring: a clean SQE after the refused ones works",
        clean(&mut ring, fd, &rw.op(OP_WRITE, &local, 1, BLOCK, 1, 2))
            .and_then(|r| ensure(r == 4096, format!("res {r}")))
            .and_then(|()| readback(&mut ring, fd, rw, &local))
            .and_then(|b| ensure(b == local.as_slice()[4096..8192], "read back differs")),
    );
}

/// The remote block, read into local block 2 through a clean SQE.
fn readback(
    ring: &mut Ring,
    fd: i32,
    rw: &RemoteRegion<'_>,
    local: &Region,
) -> Result<Vec<u8>, String> {
    let r = clean(ring, fd, &rw.op(OP_READ, local, 2, BLOCK, 1, 3))?;
    ensure(r == 4096, format!("read: res {r}"))?;
    Ok(local.as_slice()[8192..].to_vec())
}
