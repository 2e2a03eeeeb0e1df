// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Region creation and destruction: geometry, argument framing, handles
//! (stale, foreign, never reused) and the counts in fdinfo.

use rrdma::abi::errno::{E2BIG, EINVAL, ENOENT, EOVERFLOW};
use rrdma::abi::ioctl::{iow, iowr};
use rrdma::abi::uapi::{RegionCreate, IOCTL_MAGIC};
use rrdma::Rrdma;

use super::{create, unmap};
use crate::{ensure, expect_errno, expect_ok, Tap};

/// Creation: geometry, flags, reserved fields, struct sizes.
pub(super) fn create_checks(dev: &Rrdma, t: &mut Tap, page: usize) {
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
}

/// Destruction by handle: unknown, twice, stale, another file's.
pub(super) fn handle_checks(dev: &Rrdma, t: &mut Tap) {
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
}

/// 200 regions at once, and the counts back to zero.
pub(super) fn many_regions_check(dev: &Rrdma, t: &mut Tap) {
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
}

/// Handles are never given twice.
pub(super) fn handle_reuse_check(dev: &Rrdma, t: &mut Tap) {
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
}
