// SPDX-License-Identifier: GPL-2.0

//! The C shim's interface (`shim/rrdma_shim.h`), seen from Rust.
//!
//! Kernel objects cross as opaque pointers; errors as negative errno. The
//! `rrdma_rust_*` entry points the shim calls are defined next to the code
//! they serve (`device.rs`, `file.rs`) and listed in the header.

use kernel::ffi::{c_char, c_int, c_ulong, c_void};

/// Opaque `struct ib_device`.
#[repr(C)]
pub(crate) struct IbDevice {
    _opaque: [u8; 0],
}

/// Opaque `struct ib_pd`.
#[repr(C)]
pub(crate) struct IbPd {
    _opaque: [u8; 0],
}

/// Opaque `struct ib_cq`.
#[repr(C)]
pub(crate) struct IbCq {
    _opaque: [u8; 0],
}

/// Opaque `struct vm_area_struct`.
#[repr(C)]
pub(crate) struct VmArea {
    _opaque: [u8; 0],
}

/// Opaque `struct seq_file`.
#[repr(C)]
pub(crate) struct SeqFile {
    _opaque: [u8; 0],
}

/// Opaque `struct user_struct`.
#[repr(C)]
pub(crate) struct UserStruct {
    _opaque: [u8; 0],
}

/// `struct rrdma_shim_vma_info`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct VmaInfo {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) shared: u32,
    pub(crate) exec: u32,
    pub(crate) page_shift: u32,
    pub(crate) pad: u32,
}

/// Name length in [`DeviceAttr`] (`RRDMA_SHIM_NAME_MAX`).
pub(crate) const NAME_MAX: usize = 64;

/// `RRDMA_SHIM_CAP_MEM_MGT_EXT`: the device supports fast registration.
pub(crate) const CAP_MEM_MGT_EXT: u32 = 1 << 0;

/// `struct rrdma_shim_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DeviceAttr {
    pub(crate) name: [u8; NAME_MAX],
    pub(crate) index: u32,
    pub(crate) node_type: u32,
    pub(crate) port_count: u32,
    pub(crate) port_state: u32,
    pub(crate) link_layer: u32,
    pub(crate) caps: u32,
    pub(crate) node_guid: u64,
}

// The shim asserts the same size on the C side.
const _: () = assert!(core::mem::size_of::<DeviceAttr>() == 96);

impl DeviceAttr {
    /// The all-zero value, filled in by [`rrdma_shim_device_query`].
    pub(crate) const fn zeroed() -> Self {
        Self {
            name: [0; NAME_MAX],
            index: 0,
            node_type: 0,
            port_count: 0,
            port_state: 0,
            link_layer: 0,
            caps: 0,
            node_guid: 0,
        }
    }

    /// The device name up to its NUL, for messages.
    pub(crate) fn name_str(&self) -> &str {
        let n = self.name.iter().position(|&c| c == 0).unwrap_or(NAME_MAX);
        core::str::from_utf8(&self.name[..n]).unwrap_or("?")
    }
}

extern "C" {
    /// Fills `attr` from `dev`; queries the first port's state live.
    pub(crate) fn rrdma_shim_device_query(dev: *mut IbDevice, attr: *mut DeviceAttr);
    /// `ib_alloc_pd(dev, 0)`.
    pub(crate) fn rrdma_shim_alloc_pd(dev: *mut IbDevice, pd: *mut *mut IbPd) -> c_int;
    /// `ib_dealloc_pd(pd)`.
    pub(crate) fn rrdma_shim_dealloc_pd(pd: *mut IbPd);
    /// `ib_alloc_cq_any(dev, NULL, nr_cqe, IB_POLL_SOFTIRQ)`.
    pub(crate) fn rrdma_shim_alloc_cq(
        dev: *mut IbDevice,
        nr_cqe: c_int,
        cq: *mut *mut IbCq,
    ) -> c_int;
    /// `ib_free_cq(cq)`.
    pub(crate) fn rrdma_shim_free_cq(cq: *mut IbCq);
    /// Registers the `ib_client`, then `/dev/rrdma`; `context` is handed to
    /// every callback until [`rrdma_shim_unregister`] returns.
    pub(crate) fn rrdma_shim_register(context: *mut c_void) -> c_int;
    /// Unregisters `/dev/rrdma`, then the `ib_client` (removing every device).
    pub(crate) fn rrdma_shim_unregister();
    /// Whether a user-triggered warning may be printed now (ratelimited).
    pub(crate) fn rrdma_shim_warn_ratelimit() -> bool;
    /// Reads the VMA's range, offset and flags.
    pub(crate) fn rrdma_shim_vma_info(vma: *mut VmArea, info: *mut VmaInfo);
    /// Sets the region VMA flags and inserts `npages` pages from its start.
    pub(crate) fn rrdma_shim_vma_map_pages(
        vma: *mut VmArea,
        pages: *mut *mut c_void,
        npages: c_ulong,
    ) -> c_int;
    /// Charges `npages` to the caller's RLIMIT_MEMLOCK; NULL and `*err` on failure.
    pub(crate) fn rrdma_shim_memlock_charge(npages: c_ulong, err: *mut c_int) -> *mut UserStruct;
    /// Undoes [`rrdma_shim_memlock_charge`].
    pub(crate) fn rrdma_shim_memlock_uncharge(user: *mut UserStruct, npages: c_ulong);
    /// `cond_resched()`, then whether a fatal signal is pending.
    pub(crate) fn rrdma_shim_should_stop() -> bool;
    /// `seq_printf(m, "%s:\t%llu\n", key, value)`.
    pub(crate) fn rrdma_shim_seq_u64(m: *mut SeqFile, key: *const c_char, value: u64);
    /// `PAGE_SIZE`.
    pub(crate) fn rrdma_shim_page_size() -> c_ulong;
    /// The `max_region_mb` module parameter, in bytes.
    pub(crate) fn rrdma_shim_max_region_bytes() -> u64;
}

/// `PAGE_SIZE` as `u64`.
pub(crate) fn page_size() -> u64 {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_page_size() as u64 }
}

/// `pr_warn!` for conditions userspace can trigger at will: ratelimited so
/// that a misbehaving program cannot flood the log.
macro_rules! warn_user {
    ($($arg:tt)*) => {
        // SAFETY: the shim function has no preconditions.
        if unsafe { $crate::ffi::rrdma_shim_warn_ratelimit() } {
            kernel::pr_warn!($($arg)*);
        }
    };
}
pub(crate) use warn_user;
