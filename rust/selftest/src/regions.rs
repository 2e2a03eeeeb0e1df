// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest regions`: region creation, destruction and mapping,
//! against the bad inputs of the brief (geometry, handles, mmap variants,
//! fork, destroy or close while mapped, RLIMIT_MEMLOCK), and the cap on
//! exports per file.

use std::io;

use rrdma::abi::errno::{E2BIG, EINVAL, ENOENT, ENOMEM, ENOSPC, ENXIO, EOVERFLOW, EPERM};
use rrdma::abi::ioctl::{iow, iowr};
use rrdma::abi::uapi::{Export as ExportArg, RegionCreate, ACCESS_READ, IOCTL_MAGIC};
use rrdma::{page_size, Rrdma};

use crate::{ensure, expect_errno, expect_ok, Tap};

fn create(dev: &Rrdma, block_size: u32, nblocks: u64) -> io::Result<RegionCreate> {
    dev.region_create_raw(&RegionCreate {
        block_size,
        nblocks,
        ..RegionCreate::zeroed()
    })
}

fn map(dev: &Rrdma, off: u64, len: usize, prot: i32, flags: i32) -> io::Result<*mut u8> {
    dev.map_raw(off, len, prot, flags).map(|p| p.as_ptr())
}

fn unmap(p: *mut u8, len: usize) {
    // SAFETY: a mapping this test made.
    unsafe { libc::munmap(p.cast(), len) };
}

fn rw() -> i32 {
    libc::PROT_READ | libc::PROT_WRITE
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap) {
    let page = page_size() as usize;

    t.check(
        "create 4 KiB x 4 returns handle, offset, size",
        (|| {
            let r = expect_ok(create(dev, 4096, 4))?;
            ensure(
                r.handle != 0 && r.size == 16384 && r.mmap_offset % page as u64 == 0,
                format!("{r:?}"),
            )?;
            expect_ok(dev.region_destroy_raw(r.handle, 0))
        })(),
    );
    for bs in [512u32, 1024, 4096, 65536, 1 << 20] {
        t.check(
            &format!("block size {bs} is accepted"),
            (|| {
                let r = expect_ok(create(dev, bs, 3))?;
                ensure(r.size == 3 * u64::from(bs), format!("size {}", r.size))?;
                expect_ok(dev.region_destroy_raw(r.handle, 0))
            })(),
        );
    }
    for bs in [0u32, 1, 256, 1000, 3072, 2 << 20, u32::MAX] {
        t.check(
            &format!("block size {bs} is EINVAL"),
            expect_errno(create(dev, bs, 1), EINVAL),
        );
    }
    t.check(
        "zero blocks is EINVAL",
        expect_errno(create(dev, 4096, 0), EINVAL),
    );
    t.check(
        "u64::MAX blocks is EOVERFLOW",
        expect_errno(create(dev, 4096, u64::MAX), EOVERFLOW),
    );
    t.check(
        "size past max_region_mb is EOVERFLOW",
        expect_errno(create(dev, 1 << 20, 1 << 20), EOVERFLOW),
    );
    t.check(
        "create flags bit is EINVAL",
        expect_errno(
            dev.region_create_raw(&RegionCreate {
                block_size: 4096,
                nblocks: 1,
                flags: 1,
                ..RegionCreate::zeroed()
            }),
            EINVAL,
        ),
    );
    t.check(
        "create reserved field is EINVAL",
        expect_errno(
            dev.region_create_raw(&RegionCreate {
                block_size: 4096,
                nblocks: 1,
                reserved: 1,
                ..RegionCreate::zeroed()
            }),
            EINVAL,
        ),
    );
    t.check("create struct shorter than version 1 is EINVAL", {
        let mut b = [0u8; 64];
        expect_errno(dev.ioctl_bytes(iowr(IOCTL_MAGIC, 1, 32), &mut b), EINVAL)
    });
    t.check("create longer struct with non-zero tail is E2BIG", {
        let mut b = [0u8; 48];
        b[..RegionCreate::SIZE].copy_from_slice(
            &RegionCreate {
                block_size: 4096,
                nblocks: 1,
                ..RegionCreate::zeroed()
            }
            .encode(),
        );
        b[47] = 1;
        expect_errno(dev.ioctl_bytes(iowr(IOCTL_MAGIC, 1, 48), &mut b), E2BIG)
    });
    t.check(
        "create with read-only argument leaves no region behind",
        (|| {
            let ro = crate::map_anon(page, libc::PROT_READ | libc::PROT_WRITE) as *mut u8;
            let req = RegionCreate {
                block_size: 4096,
                nblocks: 1,
                ..RegionCreate::zeroed()
            }
            .encode();
            // SAFETY: `ro` is our page; made read-only after the argument is written.
            unsafe {
                std::ptr::copy_nonoverlapping(req.as_ptr(), ro, req.len());
                libc::mprotect(ro.cast(), page, libc::PROT_READ);
            }
            // SAFETY: the kernel may only read the argument; its write back fails.
            let res = unsafe { dev.ioctl_raw(rrdma::abi::uapi::IOCTL_REGION_CREATE, ro as u64) };
            unmap(ro, page);
            expect_errno(res, libc::EFAULT)?;
            ensure(
                dev.fdinfo_value("rrdma-regions").unwrap_or(99) == 0,
                "a region leaked",
            )
        })(),
    );

    // Handles.
    t.check(
        "destroy handle 0 is ENOENT",
        expect_errno(dev.region_destroy_raw(0, 0), ENOENT),
    );
    t.check(
        "destroy unknown handle is ENOENT",
        expect_errno(dev.region_destroy_raw(0x00ff_ffff, 0), ENOENT),
    );
    t.check(
        "destroy twice is ENOENT",
        (|| {
            let r = expect_ok(create(dev, 4096, 1))?;
            expect_ok(dev.region_destroy_raw(r.handle, 0))?;
            expect_errno(dev.region_destroy_raw(r.handle, 0), ENOENT)
        })(),
    );
    t.check(
        "destroy flags bit is EINVAL and keeps the region",
        (|| {
            let r = expect_ok(create(dev, 4096, 1))?;
            expect_errno(dev.region_destroy_raw(r.handle, 1), EINVAL)?;
            expect_ok(dev.region_destroy_raw(r.handle, 0))
        })(),
    );
    t.check(
        "stale handle does not name the slot's next region",
        (|| {
            let a = expect_ok(create(dev, 4096, 1))?;
            expect_ok(dev.region_destroy_raw(a.handle, 0))?;
            let b = expect_ok(create(dev, 4096, 1))?;
            ensure(a.handle != b.handle, "handle reused as is")?;
            expect_errno(dev.region_destroy_raw(a.handle, 0), ENOENT)?;
            expect_ok(dev.region_destroy_raw(b.handle, 0))
        })(),
    );
    t.check(
        "handle from another open file is ENOENT",
        (|| {
            let other = expect_ok(Rrdma::open())?;
            let r = expect_ok(create(&other, 4096, 1))?;
            expect_errno(dev.region_destroy_raw(r.handle, 0), ENOENT)?;
            expect_ok(other.region_destroy_raw(r.handle, 0))
        })(),
    );
    t.check("destroy as _IOWR is ENOTTY", {
        let mut b = [0u8; 8];
        expect_errno(
            dev.ioctl_bytes(iowr(IOCTL_MAGIC, 2, 8), &mut b),
            libc::ENOTTY,
        )
    });
    t.check("destroy struct shorter than version 1 is EINVAL", {
        let mut b = [0u8; 8];
        expect_errno(dev.ioctl_bytes(iow(IOCTL_MAGIC, 2, 4), &mut b), EINVAL)
    });

    // Mappings.
    let r = match create(dev, 4096, 4) {
        Ok(r) => r,
        Err(e) => {
            t.check("region for mmap tests", Err(e.to_string()));
            return;
        }
    };
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
    t.check(
        "many regions: 200 created and destroyed, counts back to zero",
        (|| {
            let mut hs = Vec::new();
            for i in 0..200u64 {
                hs.push(expect_ok(create(dev, 512 << (i % 5), 1 + i % 3))?.handle);
            }
            ensure(
                expect_ok(dev.fdinfo_value("rrdma-regions"))? == 200,
                "not 200",
            )?;
            for h in hs {
                expect_ok(dev.region_destroy_raw(h, 0))?;
            }
            ensure(
                expect_ok(dev.fdinfo_value("rrdma-regions"))? == 0,
                "regions left",
            )?;
            ensure(
                expect_ok(dev.fdinfo_value("rrdma-region-bytes"))? == 0,
                "bytes left",
            )
        })(),
    );
    t.check(
        "RLIMIT_MEMLOCK is enforced without CAP_IPC_LOCK",
        memlock_check(),
    );
    t.check(
        "RLIMIT_MEMLOCK: a destroyed region's charge lasts while it is mapped",
        memlock_mapped_check(),
    );
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
    t.check(
        "handles are never reused: 300 create/destroy cycles, then a stale destroy is ENOENT",
        (|| {
            let mut seen = std::collections::HashSet::new();
            let first = expect_ok(create(dev, 4096, 1))?.handle;
            expect_ok(dev.region_destroy_raw(first, 0))?;
            seen.insert(first);
            for _ in 0..300 {
                let h = expect_ok(create(dev, 4096, 1))?.handle;
                ensure(seen.insert(h), format!("handle {h:#x} given twice"))?;
                expect_ok(dev.region_destroy_raw(h, 0))?;
            }
            let live = expect_ok(create(dev, 4096, 1))?.handle;
            ensure(seen.insert(live), "live handle reused")?;
            let stale = expect_errno(dev.region_destroy_raw(first, 0), ENOENT);
            let regions = expect_ok(dev.fdinfo_value("rrdma-regions"))?;
            expect_ok(dev.region_destroy_raw(live, 0))?;
            stale?;
            ensure(
                regions == 1,
                format!("{regions} regions after the stale destroy"),
            )
        })(),
    );
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
    // SAFETY: the child runs only system calls and ioctls, then exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let lim = libc::rlimit {
            rlim_cur: 65536,
            rlim_max: 65536,
        };
        let code = match Rrdma::open() {
            Err(_) => 9,
            // SAFETY: plain system calls in the child.
            Ok(dev) => unsafe {
                if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    10
                } else {
                    match create(&dev, 4096, 8) {
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
                    }
                }
            },
        };
        // SAFETY: exit the child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    ensure(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        format!("child exit status {status:#x}"),
    )
}

/// In an unprivileged child with a 1 MiB memlock limit: a 768 KiB region
/// mapped and then destroyed still counts against the limit (a second one
/// is ENOMEM) until the mapping goes.
fn memlock_mapped_check() -> Result<(), String> {
    const LEN: usize = 768 << 10;
    // SAFETY: the child runs only system calls and ioctls, then exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let lim = libc::rlimit {
            rlim_cur: 1 << 20,
            rlim_max: 1 << 20,
        };
        let code = match Rrdma::open() {
            Err(_) => 9,
            // SAFETY: plain system calls in the child.
            Ok(dev) => unsafe {
                if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    10
                } else {
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
                        *p = 1;
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
                }
            },
        };
        // SAFETY: exit the child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    ensure(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        format!("child exit status {status:#x}"),
    )
}
