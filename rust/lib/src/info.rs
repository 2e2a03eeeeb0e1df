// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RRDMA_IOCTL_GET_INFO`: ABI version, features and RDMA devices.

use std::io;

use rrdma_abi::uapi::{self, DeviceInfo, Info};
use serde::Serialize;

use crate::Rrdma;

/// One RDMA device as the module sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceEntry {
    /// Device name (e.g. `siw0`).
    pub name: String,
    /// Kernel device index.
    pub index: u32,
    /// `uapi::node_type::*`.
    pub node_type: u32,
    /// Number of ports.
    pub port_count: u32,
    /// `uapi::port_state::*` of the first port.
    pub port_state: u32,
    /// `uapi::link_layer::*` of the first port.
    pub link_layer: u32,
    /// rrdma built its per-device context and can use the device.
    pub usable: bool,
    /// Node GUID (as the kernel keeps it: network byte order).
    pub node_guid: u64,
}

impl DeviceEntry {
    fn from_abi(d: &DeviceInfo) -> Self {
        Self {
            name: String::from_utf8_lossy(d.name_bytes()).into_owned(),
            index: d.index,
            node_type: d.node_type,
            port_count: d.port_count,
            port_state: d.port_state,
            link_layer: d.link_layer,
            usable: d.flags & uapi::DEVICE_F_USABLE != 0,
            node_guid: d.node_guid,
        }
    }

    /// Human name of the node type.
    pub fn node_type_name(&self) -> &'static str {
        match self.node_type {
            uapi::node_type::IB_CA => "IB_CA",
            uapi::node_type::IB_SWITCH => "IB_SWITCH",
            uapi::node_type::IB_ROUTER => "IB_ROUTER",
            uapi::node_type::RNIC => "RNIC",
            uapi::node_type::USNIC => "USNIC",
            uapi::node_type::USNIC_UDP => "USNIC_UDP",
            _ => "UNSPECIFIED",
        }
    }

    /// Human name of the first port's state.
    pub fn port_state_name(&self) -> &'static str {
        match self.port_state {
            uapi::port_state::DOWN => "DOWN",
            uapi::port_state::INIT => "INIT",
            uapi::port_state::ARMED => "ARMED",
            uapi::port_state::ACTIVE => "ACTIVE",
            uapi::port_state::ACTIVE_DEFER => "ACTIVE_DEFER",
            _ => "UNKNOWN",
        }
    }

    /// Human name of the first port's link layer.
    pub fn link_layer_name(&self) -> &'static str {
        match self.link_layer {
            uapi::link_layer::INFINIBAND => "InfiniBand",
            uapi::link_layer::ETHERNET => "Ethernet",
            _ => "unspecified",
        }
    }
}

/// What `GET_INFO` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InfoReport {
    /// ABI version of the running module.
    pub abi_version: u32,
    /// Feature bits.
    pub features: u64,
    /// Known RDMA devices.
    pub devices: Vec<DeviceEntry>,
}

impl Rrdma {
    /// Issues `GET_INFO` with `info` as the argument, returning the kernel's answer.
    pub fn get_info_raw(&self, info: &Info) -> io::Result<Info> {
        let mut bytes = info.encode();
        self.ioctl_bytes(uapi::IOCTL_GET_INFO, &mut bytes)?;
        Ok(Info::decode(&bytes))
    }

    /// ABI version, features and every known device.
    pub fn info(&self) -> io::Result<InfoReport> {
        let mut capacity = 8u32;
        loop {
            let mut entries = vec![[0u8; DeviceInfo::SIZE]; capacity as usize];
            let req = Info {
                devices: entries.as_mut_ptr() as u64,
                device_entry_size: DeviceInfo::SIZE as u32,
                device_capacity: capacity,
                ..Info::zeroed()
            };
            let out = self.get_info_raw(&req)?;
            if out.device_count > capacity {
                // Devices appeared in between: ask again with room for all.
                capacity = out.device_count + 4;
                continue;
            }
            let devices = entries[..out.device_count as usize]
                .iter()
                .map(|b| DeviceEntry::from_abi(&DeviceInfo::decode(b)))
                .collect();
            return Ok(InfoReport {
                abi_version: out.abi_version,
                features: out.features,
                devices,
            });
        }
    }
}
