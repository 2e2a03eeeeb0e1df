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
