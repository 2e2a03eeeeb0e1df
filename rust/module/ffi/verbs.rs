// SPDX-License-Identifier: GPL-2.0

//! Devices and protection domains (`shim/verbs.c`): a device's
//! attributes and limits as the shim reports them.

use kernel::ffi::c_int;

use super::layout::{c, u32_of, usize_of};

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

/// Name length in [`DeviceAttr`] (`RRDMA_SHIM_NAME_MAX`).
pub(crate) const NAME_MAX: usize = usize_of(c::RRDMA_SHIM_NAME_MAX);

/// `RRDMA_SHIM_CAP_MEM_MGT_EXT`: the device supports fast registration.
pub(crate) const CAP_MEM_MGT_EXT: u32 = u32_of(c::RRDMA_SHIM_CAP_MEM_MGT_EXT);

/// `struct rrdma_shim_device_attr` (layout checked in `layout.rs`).
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

/// `struct rrdma_shim_device_limits` (the pure type is `repr(C)` with the
/// same fields in the same order; checked in `layout.rs`).
pub(crate) use crate::abi::limits::DeviceLimits;

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
    /// Fills `dev_limits` with `dev`'s limits and `clamp` with the
    /// module's clamps of them (0: none).
    pub(crate) fn rrdma_shim_device_limits(
        dev: *mut IbDevice,
        dev_limits: *mut DeviceLimits,
        clamp: *mut DeviceLimits,
    );
    /// `ib_alloc_pd(dev, 0)`.
    pub(crate) fn rrdma_shim_alloc_pd(dev: *mut IbDevice, pd: *mut *mut IbPd) -> c_int;
    /// `ib_dealloc_pd(pd)`.
    pub(crate) fn rrdma_shim_dealloc_pd(pd: *mut IbPd);
}
