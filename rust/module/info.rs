// SPDX-License-Identifier: GPL-2.0

//! `RRDMA_IOCTL_GET_INFO`: ABI version, features and the known devices.

use kernel::prelude::*;

use crate::abi::Result;
use crate::abi::{
    self,
    info::validate_request,
    ioctl::Decoded,
    uapi::{
        DeviceInfo, Info, ABI_VERSION, DEVICE_F_USABLE, FEATURES_ALL, FEATURE_URING,
        FEATURE_URING_IOPOLL,
    },
};
use crate::compat::user_slice;
use crate::context::Context;
use crate::ffi::warn_user;
use crate::uarg;

/// Handles `GET_INFO` with the caller's argument at `arg`.
pub(crate) fn get_info(context: &Context, arg: u64, d: &Decoded) -> Result {
    let mut info = Info::decode(&uarg::read::<{ Info::SIZE }>(arg, d)?);
    let req = validate_request(&info).inspect_err(|e| {
        warn_user!(
            "GET_INFO: invalid argument (flags {:#x}, reserved {:#x}, entry size {}, capacity {}): errno {}\n",
            info.flags,
            info.reserved,
            info.device_entry_size,
            info.device_capacity,
            e.get()
        );
    })?;

    // Snapshot the entries first and let go of the devices before touching
    // user memory: a copy stalled on a fault (userfaultfd) must not hold up
    // a device's removal.
    let devices = context.devices()?;
    let count = u32::try_from(devices.len()).map_err(|_| abi::errno::EOVERFLOW)?;
    let mut entries = KVec::with_capacity(devices.len().min(req.capacity as usize), GFP_KERNEL)?;
    for dev in devices.iter().take(req.capacity as usize) {
        let attr = dev.attr();
        let mut entry = DeviceInfo::zeroed();
        entry.set_name(&attr.name);
        entry.index = attr.index;
        entry.node_type = attr.node_type;
        entry.port_count = attr.port_count;
        entry.port_state = attr.port_state;
        entry.link_layer = attr.link_layer;
        entry.node_guid = attr.node_guid;
        if dev.usable() {
            entry.flags |= DEVICE_F_USABLE;
        }
        entries.push(entry, GFP_KERNEL)?;
    }
    drop(devices);

    for (i, entry) in entries.iter().enumerate() {
        let Some(slot) = req.slot(i as u32, DeviceInfo::SIZE) else {
            break;
        };
        let bytes = entry.encode();
        user_slice(slot.addr, slot.copy_len)
            .writer()
            .write_slice(&bytes[..slot.copy_len])?;
        if slot.zero_len > 0 {
            uarg::clear(slot.addr + slot.copy_len as u64, slot.zero_len)?;
        }
    }

    info.abi_version = ABI_VERSION;
    info.features = if crate::ffi::uring_supported() {
        FEATURES_ALL
    } else {
        FEATURES_ALL & !(FEATURE_URING | FEATURE_URING_IOPOLL)
    };
    info.device_count = count;
    uarg::write(arg, d, &info.encode())
}
