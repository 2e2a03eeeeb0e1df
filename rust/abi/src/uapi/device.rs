// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RRDMA_IOCTL_GET_INFO` and the device records it lists (the mirror of
//! their part of `include/uapi/rrdma.h`).

use super::super::ioctl::{iowr, IoctlCmd};
use super::IOCTL_MAGIC;

/// RDMA device name length, NUL included (`RRDMA_DEVICE_NAME_MAX`).
pub const DEVICE_NAME_MAX: usize = 64;
/// Largest device entry stride accepted (`RRDMA_DEVICE_ENTRY_SIZE_MAX`).
pub const DEVICE_ENTRY_SIZE_MAX: u32 = 4096;

/// `RRDMA_NODE_*`: the kernel's `enum rdma_node_type`.
pub mod node_type {
    /// InfiniBand or RoCE channel adapter (rxe, mlx5).
    pub const IB_CA: u32 = 1;
    /// InfiniBand switch.
    pub const IB_SWITCH: u32 = 2;
    /// InfiniBand router.
    pub const IB_ROUTER: u32 = 3;
    /// iWARP RNIC (siw).
    pub const RNIC: u32 = 4;
    /// Cisco usNIC.
    pub const USNIC: u32 = 5;
    /// Cisco usNIC over UDP.
    pub const USNIC_UDP: u32 = 6;
    /// Unspecified.
    pub const UNSPECIFIED: u32 = 7;
}

/// `RRDMA_PORT_*`: the kernel's `enum ib_port_state`.
pub mod port_state {
    /// No state change.
    pub const NOP: u32 = 0;
    /// Link down.
    pub const DOWN: u32 = 1;
    /// Initializing.
    pub const INIT: u32 = 2;
    /// Armed.
    pub const ARMED: u32 = 3;
    /// Active: the port can carry traffic.
    pub const ACTIVE: u32 = 4;
    /// Active, deferred.
    pub const ACTIVE_DEFER: u32 = 5;
}

/// `RRDMA_LINK_LAYER_*`.
pub mod link_layer {
    /// Unspecified.
    pub const UNSPECIFIED: u32 = 0;
    /// InfiniBand.
    pub const INFINIBAND: u32 = 1;
    /// Ethernet (RoCE, iWARP).
    pub const ETHERNET: u32 = 2;
}

/// `RRDMA_DEVICE_F_USABLE`: rrdma built its per-device context.
pub const DEVICE_F_USABLE: u32 = 1 << 0;

abi_struct! {
    /// `struct rrdma_device_info`: one RDMA device as GET_INFO lists it.
    pub struct DeviceInfo (size = 112) {
        /// Device name, NUL-terminated.
        name: [u8; DEVICE_NAME_MAX] = 0,
        /// Kernel device index.
        index: u32 = 64,
        /// `node_type::*`.
        node_type: u32 = 68,
        /// Number of ports.
        port_count: u32 = 72,
        /// `port_state::*` of the first port.
        port_state: u32 = 76,
        /// `link_layer::*` of the first port.
        link_layer: u32 = 80,
        /// `DEVICE_F_*`.
        flags: u32 = 84,
        /// Node GUID (network byte order).
        node_guid: u64 = 88,
        /// Written as zero.
        reserved: [u64; 2] = 96,
    }
}

/// First published size of `struct rrdma_device_info`.
pub const DEVICE_INFO_SIZE_VER0: u32 = 112;

impl DeviceInfo {
    /// Sets `name` from `src`, truncated so that a NUL always ends it.
    pub fn set_name(&mut self, src: &[u8]) {
        self.name = [0; DEVICE_NAME_MAX];
        let n = src.iter().position(|&c| c == 0).unwrap_or(src.len());
        let n = n.min(DEVICE_NAME_MAX - 1);
        self.name[..n].copy_from_slice(&src[..n]);
    }

    /// The name up to its NUL.
    pub fn name_bytes(&self) -> &[u8] {
        let n = self
            .name
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(DEVICE_NAME_MAX);
        &self.name[..n]
    }
}

abi_struct! {
    /// `struct rrdma_info`: argument of `RRDMA_IOCTL_GET_INFO`.
    pub struct Info (size = 40) {
        /// Out: ABI version of the running module.
        abi_version: u32 = 0,
        /// In: must be zero.
        flags: u32 = 4,
        /// Out: supported feature bits.
        features: u64 = 8,
        /// In: user pointer to the device array, or 0.
        devices: u64 = 16,
        /// In: the caller's `sizeof(struct rrdma_device_info)`.
        device_entry_size: u32 = 24,
        /// In: number of entries at `devices`.
        device_capacity: u32 = 28,
        /// Out: number of devices known.
        device_count: u32 = 32,
        /// In: must be zero.
        reserved: u32 = 36,
    }
}

/// First published size of `struct rrdma_info`.
pub const INFO_SIZE_VER0: usize = 40;

/// `RRDMA_IOCTL_GET_INFO`.
pub const IOCTL_GET_INFO: IoctlCmd = iowr(IOCTL_MAGIC, 0x00, Info::SIZE);
