// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest regions`: region creation, destruction and mapping,
//! against the bad inputs of the brief (geometry, handles, mmap variants,
//! fork, destroy or close while mapped, RLIMIT_MEMLOCK), and the cap on
//! exports per file.
//!
//! Here the order of the checks and the helpers they share; creation,
//! destruction and handles are in `create.rs`, mappings in `mmap.rs`,
//! RLIMIT_MEMLOCK and the exports cap in `limits.rs`, the caller's own
//! memory as a region (REGION_REGISTER) in `register.rs`.

mod create;
mod limits;
mod mmap;
mod register;

use std::io;

use rrdma::abi::uapi::RegionCreate;
use rrdma::{page_size, Rrdma};

use crate::Tap;

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

/// The kernel's counts of pages pinned and unpinned (`/proc/vmstat`),
/// which the checks of registered memory compare before and after.
pub(crate) fn pins() -> Result<(u64, u64), String> {
    // The counts are per CPU and folded into the totals now and then;
    // `vm.stat_refresh` folds them at once.
    std::fs::write("/proc/sys/vm/stat_refresh", "1")
        .map_err(|e| format!("vm.stat_refresh: {e}"))?;
    let s = std::fs::read_to_string("/proc/vmstat").map_err(|e| e.to_string())?;
    let get = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.parse().ok())
            .ok_or(format!("no {k} in /proc/vmstat"))
    };
    Ok((get("nr_foll_pin_acquired")?, get("nr_foll_pin_released")?))
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

    create::create_checks(dev, t, page);
    create::handle_checks(dev, t);

    // Mappings.
    let r = match create(dev, 4096, 4) {
        Ok(r) => r,
        Err(e) => {
            t.check("region for mmap tests", Err(e.to_string()));
            return;
        }
    };
    mmap::mapping_checks(dev, t, r, page);
    create::many_regions_check(dev, t);
    limits::memlock_checks(t);
    mmap::dofork_check(dev, t);
    create::handle_reuse_check(dev, t);
    mmap::library_region_check(dev, t);
    limits::export_cap_check(t);
    register::checks(dev, t);
}
