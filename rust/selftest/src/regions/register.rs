// SPDX-License-Identifier: GPL-2.0 OR MIT

//! REGION_REGISTER on one host: the memory kinds it takes (anonymous,
//! shared anonymous, memfd) and refuses (unmapped, read-only, file-backed
//! other than shmem, VM_IO/VM_PFNMAP), its argument rules, RLIMIT_MEMLOCK,
//! that every page it pins is unpinned by REGION_DESTROY (the kernel's
//! own pin counters), also after the process unmapped or discarded the
//! memory, and that a registered region exports like a created one.

use std::io;

use rrdma::abi::errno::{EACCES, EFAULT, EINVAL, ENOMEM, EOPNOTSUPP};
use rrdma::abi::uapi::{self, Export as ExportArg, RegionRegister, ACCESS_READ};
use rrdma::{page_size, PageBuf, Rrdma};

use super::{pins, unmap};
use crate::child::unprivileged;
use crate::{ensure, expect_errno, expect_ok, map_anon, Tap};

/// REGION_REGISTER of `pages` pages at `addr` in 4 KiB blocks.
fn register(dev: &Rrdma, addr: u64, pages: u64) -> io::Result<RegionRegister> {
    dev.region_register_raw(&RegionRegister {
        addr,
        block_size: 4096,
        nblocks: pages * page_size() / 4096,
        ..RegionRegister::zeroed()
    })
}

/// Registers and destroys `pages` pages at `addr`.
fn register_destroy(dev: &Rrdma, addr: u64, pages: u64) -> Result<(), String> {
    let r = expect_ok(register(dev, addr, pages))?;
    ensure(
        r.size == pages * page_size(),
        format!("size {} for {pages} pages", r.size),
    )?;
    expect_ok(dev.region_destroy_raw(r.handle, 0))
}

/// Runs `f` and checks that the pins it took were all released when it
/// returned (none are while a test's region exists: it is destroyed).
fn balanced(want_pins: u64, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let (a0, r0) = pins()?;
    f()?;
    let (a1, r1) = pins()?;
    println!("# pins: {} acquired, {} released", a1 - a0, r1 - r0);
    // Other pins of the system (there are none in the guest's idle
    // userspace) would show as a surplus on both sides.
    ensure(
        a1 - a0 >= want_pins && a1 - a0 == r1 - r0,
        format!(
            "{} pages pinned and {} unpinned, want {want_pins} pinned and as many unpinned",
            a1 - a0,
            r1 - r0
        ),
    )
}

fn mmap(len: usize, prot: i32, flags: i32, fd: i32) -> io::Result<u64> {
    // SAFETY: a fresh mapping chosen by the kernel.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as u64)
}

pub(super) fn checks(dev: &Rrdma, t: &mut Tap) {
    let page = page_size();
    let len = 4 * page as usize;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    t.check(
        "GET_INFO reports REGION_REGISTER",
        dev.info().map_err(|e| e.to_string()).and_then(|i| {
            ensure(
                i.features & uapi::FEATURE_REGISTER != 0,
                format!("features {:#x}", i.features),
            )
        }),
    );

    // Accepted kinds; each region's pins released at its destroy.
    let anon = map_anon(len, rw);
    t.check(
        "anonymous private memory registers; destroy unpins every page",
        balanced(4, || register_destroy(dev, anon, 4)),
    );
    t.check(
        "shared anonymous memory (shmem) registers",
        mmap(len, rw, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                let r = balanced(4, || register_destroy(dev, p, 4));
                unmap(p as *mut u8, len);
                r
            }),
    );
    t.check("memfd memory registers", memfd_check(dev, len));
    hugetlb_check(dev, t);
    t.check(
        "a registered region exports like a created one",
        (|| {
            let r = expect_ok(register(dev, anon, 4))?;
            let e = dev.export_raw(&ExportArg {
                region: r.handle,
                access: ACCESS_READ,
                ..ExportArg::zeroed()
            });
            let e = expect_ok(e)?;
            expect_ok(dev.unexport_raw(e.token, 0))?;
            expect_ok(dev.region_destroy_raw(r.handle, 0))
        })(),
    );

    // The process's mapping changes under a registered region.
    t.check(
        "munmap of registered memory: the region keeps its pages until destroyed",
        balanced(4, || {
            let p = map_anon(len, rw);
            let r = expect_ok(register(dev, p, 4))?;
            unmap(p as *mut u8, len);
            let (a, rel) = pins()?;
            ensure(a > rel, format!("{a} pinned, {rel} unpinned after munmap"))?;
            expect_ok(dev.region_destroy_raw(r.handle, 0))
        }),
    );
    t.check(
        "MADV_DONTNEED of registered memory, then destroy",
        balanced(4, || {
            let p = map_anon(len, rw);
            let r = expect_ok(register(dev, p, 4))?;
            // SAFETY: our own mapping.
            unsafe { libc::madvise(p as *mut _, len, libc::MADV_DONTNEED) };
            let res = expect_ok(dev.region_destroy_raw(r.handle, 0));
            unmap(p as *mut u8, len);
            res
        }),
    );

    // Refused memory: one errno each.
    t.check(
        "unmapped memory (address 0): EFAULT",
        expect_errno(register(dev, 0, 1), EFAULT),
    );
    t.check(
        "a kernel address: EFAULT",
        expect_errno(register(dev, 0xffff_8880_0000_0000, 1), EFAULT),
    );
    t.check("a range running into a hole: EFAULT", {
        let p = map_anon(2 * page as usize, rw);
        unmap((p + page) as *mut u8, page as usize);
        let r = balanced(0, || expect_errno(register(dev, p, 2), EFAULT));
        unmap(p as *mut u8, page as usize);
        r
    });
    t.check("read-only memory: EACCES", {
        let p = map_anon(len, libc::PROT_READ);
        let r = expect_errno(register(dev, p, 4), EACCES);
        unmap(p as *mut u8, len);
        r
    });
    t.check(
        "file-backed memory other than shmem (ramfs): EOPNOTSUPP",
        ramfs_check(dev),
    );
    t.check(
        "[vvar] (VM_IO/VM_PFNMAP, not file-backed): EOPNOTSUPP",
        vvar_check(dev),
    );

    // Arguments.
    let bad = RegionRegister {
        addr: anon,
        block_size: 4096,
        nblocks: 4 * page / 4096,
        ..RegionRegister::zeroed()
    };
    for (name, req) in [
        ("flags", RegionRegister { flags: 1, ..bad }),
        ("reserved", RegionRegister { reserved: 1, ..bad }),
        (
            "an address inside a page",
            RegionRegister {
                addr: anon + 512,
                ..bad
            },
        ),
        ("0 blocks", RegionRegister { nblocks: 0, ..bad }),
        (
            "block size 1000",
            RegionRegister {
                block_size: 1000,
                ..bad
            },
        ),
        (
            "a size that is not whole pages (7 blocks of 512)",
            RegionRegister {
                block_size: 512,
                nblocks: 7,
                ..bad
            },
        ),
    ] {
        t.check(
            &format!("REGION_REGISTER with {name}: EINVAL"),
            expect_errno(dev.region_register_raw(&req), EINVAL),
        );
    }
    framing_checks(dev, t, anon);
    t.check(
        "RLIMIT_MEMLOCK applies to registered memory",
        memlock_check(),
    );
    unmap(anon as *mut u8, len);
}

/// The argument's size rules: a version-1 struct with 8 more bytes is
/// accepted when they are zero and E2BIG otherwise; 8 bytes short, EINVAL.
fn framing_checks(dev: &Rrdma, t: &mut Tap, anon: u64) {
    use rrdma::abi::errno::E2BIG;
    use rrdma::abi::ioctl::iowr;
    let req = RegionRegister {
        addr: anon,
        block_size: 4096,
        nblocks: page_size() / 4096,
        ..RegionRegister::zeroed()
    };
    let mut long = [0u8; RegionRegister::SIZE + 8];
    long[..RegionRegister::SIZE].copy_from_slice(&req.encode());
    let cmd = |size| iowr(uapi::IOCTL_MAGIC, 0x0e, size);
    // SAFETY: `long` is a valid buffer of the size the command says.
    let zero_tail = unsafe { dev.ioctl_raw(cmd(long.len()), long.as_mut_ptr() as u64) };
    t.check(
        "REGION_REGISTER: a longer struct with a zero tail is accepted",
        expect_ok(zero_tail).and_then(|()| {
            let out = RegionRegister::decode(&long[..RegionRegister::SIZE].try_into().unwrap());
            expect_ok(dev.region_destroy_raw(out.handle, 0))
        }),
    );
    long[..RegionRegister::SIZE].copy_from_slice(&req.encode());
    long[RegionRegister::SIZE] = 1;
    t.check(
        "REGION_REGISTER: a longer struct with a non-zero tail is E2BIG",
        // SAFETY: as above.
        expect_errno(
            unsafe { dev.ioctl_raw(cmd(long.len()), long.as_mut_ptr() as u64) },
            E2BIG,
        ),
    );
    t.check(
        "REGION_REGISTER: a struct shorter than version 1 is EINVAL",
        // SAFETY: the kernel reads at most the size the command says.
        expect_errno(
            unsafe { dev.ioctl_raw(cmd(RegionRegister::SIZE - 8), long.as_mut_ptr() as u64) },
            EINVAL,
        ),
    );
}

/// Two huge pages (`MAP_HUGETLB`), where the kernel has hugetlbfs and
/// gives them (`vm.nr_hugepages` is raised for it).
fn hugetlb_check(dev: &Rrdma, t: &mut Tap) {
    let name = "hugetlb memory registers";
    let _ = std::fs::write("/proc/sys/vm/nr_hugepages", "2");
    let huge = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines().find_map(|l| {
            l.strip_prefix("Hugepagesize:")?
                .trim()
                .strip_suffix(" kB")?
                .parse::<u64>()
                .ok()
        })
    });
    let Some(kb) = huge else {
        return t.skip(
            name,
            "the kernel has no hugetlbfs (no Hugepagesize in /proc/meminfo)",
        );
    };
    let len = 2 * kb as usize * 1024;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB;
    match mmap(len, rw, flags, -1) {
        Err(e) => t.skip(name, &format!("no huge pages to map: {e}")),
        Ok(p) => {
            let pages = len as u64 / page_size();
            t.check(name, balanced(pages, || register_destroy(dev, p, pages)));
            unmap(p as *mut u8, len);
        }
    }
}

fn memfd_check(dev: &Rrdma, len: usize) -> Result<(), String> {
    let mut buf = PageBuf::memfd(len).map_err(|e| format!("memfd: {e}"))?;
    let p = buf.as_mut_slice().as_mut_ptr() as u64;
    // The mapping outlives the region: `buf` is dropped after.
    balanced(4, || register_destroy(dev, p, 4))
}

/// A file on a fresh ramfs (page cache that is not shmem), mapped shared
/// and writable.
fn ramfs_check(dev: &Rrdma) -> Result<(), String> {
    let dir = "/tmp/rrdma-ramfs";
    let _ = std::fs::create_dir_all(dir);
    // SAFETY: NUL-terminated strings; a fresh mount on our own directory.
    let m = unsafe {
        libc::mount(
            c"none".as_ptr(),
            c"/tmp/rrdma-ramfs".as_ptr(),
            c"ramfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if m != 0 {
        return Err(format!("mount ramfs: {}", io::Error::last_os_error()));
    }
    let page = page_size() as usize;
    let res = (|| {
        let path = format!("{dir}/f");
        std::fs::write(&path, vec![0u8; page]).map_err(|e| e.to_string())?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| e.to_string())?;
        use std::os::fd::AsRawFd;
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let p = mmap(page, rw, libc::MAP_SHARED, f.as_raw_fd()).map_err(|e| e.to_string())?;
        let r = expect_errno(register(dev, p, 1), EOPNOTSUPP);
        unmap(p as *mut u8, page);
        r
    })();
    // SAFETY: the mount made above.
    unsafe { libc::umount(c"/tmp/rrdma-ramfs".as_ptr()) };
    res
}

/// The vDSO's data page, `[vvar]`: a VM_IO/VM_PFNMAP mapping of every
/// process.
fn vvar_check(dev: &Rrdma) -> Result<(), String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vvar]"))
        .ok_or("no [vvar] mapping")?;
    let start = line.split('-').next().unwrap_or("");
    let addr = u64::from_str_radix(start, 16).map_err(|e| e.to_string())?;
    expect_errno(register(dev, addr, 1), EOPNOTSUPP)
}

/// In a child that opened its own file and dropped to an unprivileged
/// user with a 64 KiB memlock limit: 32 KiB registers, 1 MiB is ENOMEM.
/// The child's objects die with its file when it exits.
fn memlock_check() -> Result<(), String> {
    let small = map_anon(32 << 10, libc::PROT_READ | libc::PROT_WRITE);
    let big = map_anon(1 << 20, libc::PROT_READ | libc::PROT_WRITE);
    let page = page_size();
    let res = unprivileged(
        64 << 10,
        || Rrdma::open().ok(),
        |dev| {
            if register(&dev, small, (32 << 10) / page).is_err() {
                return 11;
            }
            match register(&dev, big, (1 << 20) / page) {
                Ok(_) => 12,
                Err(e) if e.raw_os_error() == Some(ENOMEM.get()) => 0,
                Err(_) => 13,
            }
        },
        "11: 32 KiB refused; 12: 1 MiB accepted; 13: 1 MiB not ENOMEM",
    );
    unmap(small as *mut u8, 32 << 10);
    unmap(big as *mut u8, 1 << 20);
    res
}
