// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Mappings of a region: the region itself, zeroed; offsets, lengths and
//! protections refused; fork; destroy or close while mapped.

use std::io;

use rrdma::abi::errno::{EINVAL, ENXIO, EPERM};
use rrdma::abi::uapi::RegionCreate;
use rrdma::Rrdma;

use super::{create, map, rw, unmap};
use crate::{ensure, expect_errno, expect_ok, Tap};

/// The mappings of region `r`, which the last checks destroy.
pub(super) fn mapping_checks(dev: &Rrdma, t: &mut Tap, r: RegionCreate, page: usize) {
    let len = r.size as usize;
    t.check(
        "fdinfo counts the region",
        (|| {
            ensure(
                expect_ok(dev.fdinfo_value("rrdma-regions"))? == 1,
                "rrdma-regions != 1",
            )?;
            ensure(
                expect_ok(dev.fdinfo_value("rrdma-region-bytes"))? == r.size,
                "rrdma-region-bytes wrong",
            )
        })(),
    );
    t.check(
        "mmap is zeroed, and is the region itself: a second mapping sees writes",
        (|| {
            let a = expect_ok(map(dev, r.mmap_offset, len, rw(), libc::MAP_SHARED))?;
            let b = expect_ok(map(
                dev,
                r.mmap_offset,
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
            ))?;
            // SAFETY: both mappings are `len` bytes.
            let res = unsafe {
                let zero = (0..len).all(|i| *a.add(i) == 0);
                for i in 0..len {
                    *a.add(i) = (i % 251) as u8;
                }
                let same = (0..len).all(|i| *b.add(i) == (i % 251) as u8);
                ensure(zero, "not zeroed").and(ensure(same, "second mapping differs"))
            };
            unmap(a, len);
            unmap(b, len);
            res
        })(),
    );
    t.check(
        "data survives unmap and remap",
        (|| {
            let a = expect_ok(map(
                dev,
                r.mmap_offset,
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
            ))?;
            // SAFETY: `len` bytes mapped.
            let ok = unsafe { (0..len).all(|i| *a.add(i) == (i % 251) as u8) };
            unmap(a, len);
            ensure(ok, "data lost")
        })(),
    );
    t.check(
        "mmap at an unknown offset is ENXIO",
        expect_errno(
            map(dev, r.mmap_offset + (1 << 30), len, rw(), libc::MAP_SHARED),
            ENXIO,
        ),
    );
    t.check(
        "mmap one page into the region is ENXIO",
        expect_errno(
            map(
                dev,
                r.mmap_offset + page as u64,
                len - page,
                rw(),
                libc::MAP_SHARED,
            ),
            ENXIO,
        ),
    );
    t.check(
        "mmap at an unaligned offset is EINVAL",
        expect_errno(
            map(dev, r.mmap_offset + 1, len, rw(), libc::MAP_SHARED),
            EINVAL,
        ),
    );
    t.check(
        "mmap shorter than the region is EINVAL",
        expect_errno(
            map(dev, r.mmap_offset, len - page, rw(), libc::MAP_SHARED),
            EINVAL,
        ),
    );
    t.check(
        "mmap longer than the region is EINVAL",
        expect_errno(
            map(dev, r.mmap_offset, len + page, rw(), libc::MAP_SHARED),
            EINVAL,
        ),
    );
    t.check(
        "MAP_PRIVATE is EINVAL",
        expect_errno(
            map(dev, r.mmap_offset, len, rw(), libc::MAP_PRIVATE),
            EINVAL,
        ),
    );
    t.check(
        "PROT_EXEC is EPERM",
        expect_errno(
            map(
                dev,
                r.mmap_offset,
                len,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_SHARED,
            ),
            EPERM,
        ),
    );
    t.check(
        "mprotect to PROT_EXEC later is refused",
        (|| {
            let a = expect_ok(map(
                dev,
                r.mmap_offset,
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
            ))?;
            // SAFETY: our mapping.
            let rc = unsafe { libc::mprotect(a.cast(), len, libc::PROT_READ | libc::PROT_EXEC) };
            let err = io::Error::last_os_error();
            unmap(a, len);
            ensure(rc != 0, "mprotect succeeded").and(ensure(
                err.raw_os_error() == Some(libc::EACCES),
                format!("{err}"),
            ))
        })(),
    );
    t.check(
        "mremap to grow is refused",
        (|| {
            let a = expect_ok(map(dev, r.mmap_offset, len, rw(), libc::MAP_SHARED))?;
            // SAFETY: our mapping; a failed mremap leaves it alone.
            let p = unsafe { libc::mremap(a.cast(), len, len * 2, libc::MREMAP_MAYMOVE) };
            let refused = p == libc::MAP_FAILED;
            if refused {
                unmap(a, len)
            } else {
                unmap(p.cast(), len * 2)
            }
            ensure(refused, "mremap grew the mapping")
        })(),
    );
    t.check(
        "partial munmap keeps the rest valid",
        (|| {
            let a = expect_ok(map(dev, r.mmap_offset, len, rw(), libc::MAP_SHARED))?;
            // SAFETY: unmap the first page, read the rest of our mapping.
            let ok = unsafe {
                libc::munmap(a.cast(), page);
                (page..len).all(|i| *a.add(i) == (i % 251) as u8)
            };
            // SAFETY: the rest of our mapping.
            unsafe { libc::munmap(a.add(page).cast(), len - page) };
            ensure(ok, "data lost")
        })(),
    );
    t.check(
        "fork: the child does not inherit the mapping",
        (|| {
            let a = expect_ok(map(dev, r.mmap_offset, len, rw(), libc::MAP_SHARED))?;
            // SAFETY: the child only touches the address and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: reading an address that must not be mapped here.
                let v = unsafe { std::ptr::read_volatile(a) };
                // SAFETY: exit without running the parent's destructors.
                unsafe { libc::_exit(i32::from(v)) };
            }
            let mut status = 0;
            // SAFETY: waiting for our child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            unmap(a, len);
            ensure(
                libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV,
                format!("child status {status:#x}"),
            )
        })(),
    );
    t.check(
        "destroy while mapped: the mapping stays valid",
        (|| {
            let a = expect_ok(map(dev, r.mmap_offset, len, rw(), libc::MAP_SHARED))?;
            expect_ok(dev.region_destroy_raw(r.handle, 0))?;
            // SAFETY: the mapping holds its pages.
            let ok = unsafe {
                *a.add(len - 1) = 0x5a;
                (0..len - 1).all(|i| *a.add(i) == (i % 251) as u8) && *a.add(len - 1) == 0x5a
            };
            unmap(a, len);
            ensure(ok, "data lost").and(expect_errno(
                map(dev, r.mmap_offset, len, rw(), libc::MAP_SHARED),
                ENXIO,
            ))
        })(),
    );
    t.check(
        "close while mapped: the mapping stays valid",
        (|| {
            let other = expect_ok(Rrdma::open())?;
            let r2 = expect_ok(create(&other, 4096, 2))?;
            let a = expect_ok(map(&other, r2.mmap_offset, 8192, rw(), libc::MAP_SHARED))?;
            drop(other);
            // SAFETY: the mapping holds its pages.
            let ok = unsafe {
                *a.add(8191) = 7;
                *a.add(8191) == 7 && *a == 0
            };
            unmap(a, 8192);
            ensure(ok, "mapping broken")
        })(),
    );
}

/// A mapping forked after MADV_DOFORK holds nothing for the child.
pub(super) fn dofork_check(dev: &Rrdma, t: &mut Tap) {
    t.check(
        "fork after MADV_DOFORK: the child cannot read the region",
        (|| {
            let r = expect_ok(create(dev, 4096, 2))?;
            let a = expect_ok(map(dev, r.mmap_offset, 8192, rw(), libc::MAP_SHARED))?;
            // SAFETY: our mapping.
            unsafe { *a = 42 };
            // SAFETY: our mapping; DOFORK clears VM_DONTCOPY.
            let adv = unsafe { libc::madvise(a.cast(), 8192, libc::MADV_DOFORK) };
            // SAFETY: the child only reads and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: reading an address the child may not use.
                let v = unsafe { std::ptr::read_volatile(a.add(4096)) };
                // SAFETY: exit without the parent's destructors.
                unsafe { libc::_exit(100 + i32::from(v)) };
            }
            let mut status = 0;
            // SAFETY: waiting for our child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            // SAFETY: our mapping, still valid in the parent.
            let still = unsafe { *a };
            unmap(a, 8192);
            expect_ok(dev.region_destroy_raw(r.handle, 0))?;
            ensure(still == 42, "parent's mapping changed")?;
            // Kernels that refuse MADV_DOFORK on the mapping (7.3: VM_SPECIAL)
            // leave it out of the child (SIGSEGV); where it is copied, the
            // copy holds nothing (SIGBUS).
            let want = if adv == 0 {
                libc::SIGBUS
            } else {
                libc::SIGSEGV
            };
            ensure(
                libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == want,
                format!("child status {status:#x} (madvise {adv})"),
            )
        })(),
    );
}

/// The library's `Region`, mapped.
pub(super) fn library_region_check(dev: &Rrdma, t: &mut Tap) {
    t.check(
        "the library's Region maps, writes and reads back",
        (|| {
            let mut reg = expect_ok(dev.create_region(4096, 8))?;
            reg.as_mut_slice()
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = (i * 7) as u8);
            ensure(
                reg.as_slice()
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == (i * 7) as u8),
                "readback differs",
            )?;
            drop(reg);
            ensure(
                expect_ok(dev.fdinfo_value("rrdma-regions"))? == 0,
                "Region leaked",
            )
        })(),
    );
}
