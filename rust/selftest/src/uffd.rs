// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest hold-get-info RELEASE_FILE`: starts a `GET_INFO` whose
//! device array lies on a userfaultfd-registered page that is never
//! populated, so the kernel's copy-out stalls; prints `holding` once
//! userfaultfd reports the stalled access and keeps the fault unresolved
//! until `RELEASE_FILE` exists (at most 60 s), then resolves it and prints
//! `completed N` with the `GET_INFO` result (an error if `GET_INFO` had
//! returned before the release).
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
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
/// `_IOWR(0xAA, 0x06, struct uffdio_writeprotect)`: a range and a mode.
const UFFDIO_WRITEPROTECT: u32 = 0xc018_aa06;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1;
/// `struct uffd_msg`: 32 bytes; a page fault's event code at byte 0 and
/// its address at bytes 16..24.
const UFFD_MSG_SIZE: usize = 32;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

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
    if let Err(e) = stalled.wait_fault(0, Duration::from_secs(10)) {
        println!("error: GET_INFO: {e}");
        let _ = stalled.release(0);
        return 1;
    }
    println!("holding");
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    while !release.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let returned = worker.is_finished();
    if let Err(e) = stalled.release(0) {
        println!("error: {e}");
        return 1;
    }
    match worker.join() {
        Ok(_) if returned => {
            println!("error: GET_INFO returned before its page was released");
            1
        }
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
/// Or ([`Stalled::write_protected`]) one page with contents, write
/// protected: reads go on, a write stalls.
pub(crate) struct Stalled {
    uffd: i32,
    area: u64,
    page: u64,
    wp: bool,
}

impl Stalled {
    /// `npages` stalled pages, or an error message.
    pub(crate) fn new(npages: usize) -> Result<Self, String> {
        Self::make(npages, UFFDIO_REGISTER_MODE_MISSING)
    }

    /// One page holding `bytes` (at its start), readable, whose first
    /// write stalls until [`Stalled::release`].
    pub(crate) fn write_protected(bytes: &[u8]) -> Result<Self, String> {
        let mut s = Self::make(1, UFFDIO_REGISTER_MODE_WP)?;
        s.wp = true;
        // SAFETY: the page is ours, mapped and writable until protected.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.area as *mut u8, bytes.len()) };
        s.protect(UFFDIO_WRITEPROTECT_MODE_WP)?;
        Ok(s)
    }

    /// Write-protects the page (`mode` WP) or lifts it (0, which wakes a
    /// stalled write).
    fn protect(&self, mode: u64) -> Result<(), String> {
        #[repr(C)]
        struct UffdioWriteprotect {
            range: UffdioRange,
            mode: u64,
        }
        let mut wp = UffdioWriteprotect {
            range: UffdioRange {
                start: self.area,
                len: self.page,
            },
            mode,
        };
        // SAFETY: valid argument struct for UFFDIO_WRITEPROTECT.
        if unsafe { libc::ioctl(self.uffd, UFFDIO_WRITEPROTECT as _, &mut wp) } != 0 {
            return Err(format!(
                "UFFDIO_WRITEPROTECT: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    fn make(npages: usize, mode: u64) -> Result<Self, String> {
        let page = rrdma::page_size();
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // Non-blocking reads of its events; the stalled accesses block.
        // SAFETY: plain system call.
        let uffd =
            unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) }
                as i32;
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
            mode,
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
            wp: false,
        })
    }

    /// Address of stalled page `i`.
    pub(crate) fn addr(&self, i: usize) -> u64 {
        self.area + i as u64 * self.page
    }

    /// Waits at most `within` until userfaultfd reports an access to page
    /// `i` that stalled (the accessing thread now waits for
    /// [`Stalled::release`]); reports of other pages are passed over.
    pub(crate) fn wait_fault(&self, i: usize, within: Duration) -> Result<(), String> {
        let want = self.addr(i);
        let start = Instant::now();
        let mut others = Vec::new();
        loop {
            let left = within.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "no access to its page stalled within {} ms (stalls reported elsewhere: {others:x?})",
                    within.as_millis()
                ));
            }
            let mut pfd = libc::pollfd {
                fd: self.uffd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32) };
            let mut msg = [0u8; UFFD_MSG_SIZE];
            // SAFETY: reads at most `msg.len()` bytes into `msg`.
            let n = unsafe { libc::read(self.uffd, msg.as_mut_ptr().cast(), msg.len()) };
            if n != UFFD_MSG_SIZE as isize {
                continue;
            }
            let mut a = [0u8; 8];
            a.copy_from_slice(&msg[16..24]);
            let at = u64::from_ne_bytes(a) & !(self.page - 1);
            if msg[0] == UFFD_EVENT_PAGEFAULT && at == want {
                return Ok(());
            }
            others.push(at);
        }
    }

    /// Resolves the fault on page `i` with a zero page (a write-protected
    /// page: lifts the protection).
    pub(crate) fn release(&self, i: usize) -> Result<(), String> {
        if self.wp {
            return self.protect(0);
        }
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
