// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest hold-get-info RELEASE_FILE`: starts a `GET_INFO` whose
//! device array lies on a userfaultfd-registered page that is never
//! populated, so the kernel's copy-out stalls; prints `holding` and keeps
//! the fault unresolved until `RELEASE_FILE` exists (at most 60 s), then
//! resolves it and prints `completed N` with the `GET_INFO` result.
//!
//! The guest test removes a device meanwhile: rrdma must not hold device
//! references across user copies, or the removal would hang until release.
//!
//! [`Stalled`] (pages whose every access stalls until released) also
//! serves the `attack` checks of stalled copies.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::{DeviceInfo, Info};
use rrdma::Rrdma;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioZeropage {
    range: UffdioRange,
    mode: u64,
    zeropage: i64,
}

const UFFD_API: u64 = 0xAA;
const UFFDIO_API: u32 = 0xc018_aa3f;
const UFFDIO_REGISTER: u32 = 0xc020_aa00;
const UFFDIO_ZEROPAGE: u32 = 0xc020_aa04;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;

pub(crate) fn hold_get_info(release: &Path) -> i32 {
    let stalled = match Stalled::new(1) {
        Ok(s) => s,
        Err(e) => {
            println!("error: {e}");
            return 1;
        }
    };
    let dev = match Rrdma::open() {
        Ok(d) => d,
        Err(e) => {
            println!("error: open: {e}");
            return 1;
        }
    };
    let addr = stalled.addr(0);
    let worker = std::thread::spawn(move || {
        let req = Info {
            devices: addr,
            device_entry_size: DeviceInfo::SIZE as u32,
            device_capacity: 4,
            ..Info::zeroed()
        };
        dev.get_info_raw(&req).map(|i| i.device_count)
    });
    // Give the worker time to enter the kernel and stall on the page.
    std::thread::sleep(Duration::from_millis(500));
    println!("holding");
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    while !release.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Err(e) = stalled.release(0) {
        println!("error: {e}");
        return 1;
    }
    match worker.join() {
        Ok(Ok(n)) => {
            println!("completed {n}");
            0
        }
        Ok(Err(e)) => {
            println!("error: GET_INFO: {e}");
            1
        }
        Err(_) => 1,
    }
}

/// Pages registered with userfaultfd and never populated: any access to
/// them, the kernel's copies included, stalls until [`Stalled::release`].
pub(crate) struct Stalled {
    uffd: i32,
    area: u64,
    page: u64,
}

impl Stalled {
    /// `npages` stalled pages, or an error message.
    pub(crate) fn new(npages: usize) -> Result<Self, String> {
        let page = rrdma::page_size();
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // SAFETY: plain system call.
        let uffd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as i32;
        if uffd < 0 {
            return Err(err("userfaultfd"));
        }
        let mut api = UffdioApi {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        // SAFETY: valid argument struct for UFFDIO_API.
        if unsafe { libc::ioctl(uffd, UFFDIO_API as _, &mut api) } != 0 {
            return Err(err("UFFDIO_API"));
        }
        let len = npages * page as usize;
        // SAFETY: a fresh anonymous mapping.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(err("mmap"));
        }
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: area as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_MISSING,
            ioctls: 0,
        };
        // SAFETY: valid argument struct for UFFDIO_REGISTER.
        if unsafe { libc::ioctl(uffd, UFFDIO_REGISTER as _, &mut reg) } != 0 {
            return Err(err("UFFDIO_REGISTER"));
        }
        Ok(Self {
            uffd,
            area: area as u64,
            page,
        })
    }

    /// Address of stalled page `i`.
    pub(crate) fn addr(&self, i: usize) -> u64 {
        self.area + i as u64 * self.page
    }

    /// Resolves the fault on page `i` with a zero page.
    pub(crate) fn release(&self, i: usize) -> Result<(), String> {
        let mut zp = UffdioZeropage {
            range: UffdioRange {
                start: self.addr(i),
                len: self.page,
            },
            mode: 0,
            zeropage: 0,
        };
        // SAFETY: valid argument struct for UFFDIO_ZEROPAGE.
        if unsafe { libc::ioctl(self.uffd, UFFDIO_ZEROPAGE as _, &mut zp) } != 0 {
            return Err(format!(
                "UFFDIO_ZEROPAGE: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
}

impl Drop for Stalled {
    fn drop(&mut self) {
        // SAFETY: our descriptor; closing it wakes any stalled access.
        unsafe { libc::close(self.uffd) };
    }
}
