// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The C header `include/uapi/rrdma.h` compiles in userspace on its own and
//! agrees with the Rust mirror on every size, offset and constant.

use std::path::PathBuf;
use std::process::Command;

use rrdma_abi::blkdev;
use rrdma_abi::uapi::{
    self, Connect, DeviceInfo, Import, Info, RegionCreate, RegionDestroy, RegionRegister,
};

const PROBE: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include "uapi/rrdma.h"
#define F(s, f) printf(#s "." #f " %zu\n", offsetof(struct s, f))
int main(void)
{
	printf("rrdma_info %zu\n", sizeof(struct rrdma_info));
	F(rrdma_info, abi_version); F(rrdma_info, flags); F(rrdma_info, features);
	F(rrdma_info, devices); F(rrdma_info, device_entry_size);
	F(rrdma_info, device_capacity); F(rrdma_info, device_count); F(rrdma_info, reserved);
	printf("rrdma_device_info %zu\n", sizeof(struct rrdma_device_info));
	F(rrdma_device_info, name); F(rrdma_device_info, index); F(rrdma_device_info, node_type);
	F(rrdma_device_info, port_count); F(rrdma_device_info, port_state);
	F(rrdma_device_info, link_layer); F(rrdma_device_info, flags);
	F(rrdma_device_info, node_guid); F(rrdma_device_info, reserved);
	printf("rrdma_region_create %zu\n", sizeof(struct rrdma_region_create));
	F(rrdma_region_create, block_size); F(rrdma_region_create, flags);
	F(rrdma_region_create, nblocks); F(rrdma_region_create, handle);
	F(rrdma_region_create, reserved); F(rrdma_region_create, mmap_offset);
	F(rrdma_region_create, size);
	printf("rrdma_region_destroy %zu\n", sizeof(struct rrdma_region_destroy));
	F(rrdma_region_destroy, handle); F(rrdma_region_destroy, flags);
	printf("rrdma_region_register %zu\n", sizeof(struct rrdma_region_register));
	F(rrdma_region_register, addr); F(rrdma_region_register, block_size);
	F(rrdma_region_register, flags); F(rrdma_region_register, nblocks);
	F(rrdma_region_register, handle); F(rrdma_region_register, reserved);
	F(rrdma_region_register, size);
	printf("RRDMA_REGION_REGISTER_SIZE_VER0 %u\n", (unsigned)RRDMA_REGION_REGISTER_SIZE_VER0);
	printf("RRDMA_IOCTL_REGION_REGISTER %u\n", (unsigned)RRDMA_IOCTL_REGION_REGISTER);
	printf("RRDMA_FEATURE_REGISTER %llu\n", (unsigned long long)RRDMA_FEATURE_REGISTER);
	printf("rrdma_blk_map %zu\n", sizeof(struct rrdma_blk_map));
	F(rrdma_blk_map, import); F(rrdma_blk_map, flags); F(rrdma_blk_map, index);
	F(rrdma_blk_map, reserved);
	printf("rrdma_blk_unmap %zu\n", sizeof(struct rrdma_blk_unmap));
	F(rrdma_blk_unmap, index); F(rrdma_blk_unmap, flags);
	printf("RRDMA_IOCTL_BLK_MAP %u\n", (unsigned)RRDMA_IOCTL_BLK_MAP);
	printf("RRDMA_IOCTL_BLK_UNMAP %u\n", (unsigned)RRDMA_IOCTL_BLK_UNMAP);
	printf("RRDMA_BLK_MAP_RO %u\n", (unsigned)RRDMA_BLK_MAP_RO);
	printf("RRDMA_BLK_UNMAP_FORCE %u\n", (unsigned)RRDMA_BLK_UNMAP_FORCE);
	printf("RRDMA_FEATURE_BLK %llu\n", (unsigned long long)RRDMA_FEATURE_BLK);
	printf("rrdma_import %zu\n", sizeof(struct rrdma_import));
	F(rrdma_import, conn); F(rrdma_import, flags); F(rrdma_import, token);
	F(rrdma_import, timeout_ms); F(rrdma_import, handle); F(rrdma_import, block_size);
	F(rrdma_import, access); F(rrdma_import, nblocks); F(rrdma_import, max_op_blocks);
	F(rrdma_import, reserved);
	printf("RRDMA_IMPORT_SIZE_VER0 %u\n", (unsigned)RRDMA_IMPORT_SIZE_VER0);
	printf("RRDMA_IOCTL_IMPORT %u\n", (unsigned)RRDMA_IOCTL_IMPORT);
	printf("RRDMA_IOCTL_REGION_CREATE %u\n", (unsigned)RRDMA_IOCTL_REGION_CREATE);
	printf("RRDMA_IOCTL_REGION_DESTROY %u\n", (unsigned)RRDMA_IOCTL_REGION_DESTROY);
	printf("rrdma_connect %zu\n", sizeof(struct rrdma_connect));
	F(rrdma_connect, addr); F(rrdma_connect, timeout_ms); F(rrdma_connect, flags);
	F(rrdma_connect, handle); F(rrdma_connect, keepalive_ms);
	F(rrdma_connect, keepalive_misses);
	printf("RRDMA_CONNECT_NO_KEEPALIVE %u\n", (unsigned)RRDMA_CONNECT_NO_KEEPALIVE);
	printf("RRDMA_CONNECT_RECONNECT %u\n", (unsigned)RRDMA_CONNECT_RECONNECT);
	printf("RRDMA_FEATURE_RECONNECT %llu\n", (unsigned long long)RRDMA_FEATURE_RECONNECT);
	printf("RRDMA_FEATURE_URING %llu\n", (unsigned long long)RRDMA_FEATURE_URING);
	printf("RRDMA_FEATURE_URING_IOPOLL %llu\n", (unsigned long long)RRDMA_FEATURE_URING_IOPOLL);
	printf("RRDMA_URING_CMD_OP %u\n", (unsigned)RRDMA_URING_CMD_OP);
	printf("RRDMA_FEATURES_ALL %llu\n", (unsigned long long)RRDMA_FEATURES_ALL);
	printf("RRDMA_IOCTL_GET_INFO %u\n", (unsigned)RRDMA_IOCTL_GET_INFO);
	printf("RRDMA_ABI_VERSION %u\n", (unsigned)RRDMA_ABI_VERSION);
	printf("RRDMA_INFO_SIZE_VER0 %u\n", (unsigned)RRDMA_INFO_SIZE_VER0);
	printf("RRDMA_DEVICE_INFO_SIZE_VER0 %u\n", (unsigned)RRDMA_DEVICE_INFO_SIZE_VER0);
	printf("RRDMA_DEVICE_ENTRY_SIZE_MAX %u\n", (unsigned)RRDMA_DEVICE_ENTRY_SIZE_MAX);
	printf("RRDMA_DEVICE_F_USABLE %u\n", (unsigned)RRDMA_DEVICE_F_USABLE);
	printf("RRDMA_NODE_RNIC %u\n", (unsigned)RRDMA_NODE_RNIC);
	printf("RRDMA_NODE_IB_CA %u\n", (unsigned)RRDMA_NODE_IB_CA);
	printf("RRDMA_PORT_ACTIVE %u\n", (unsigned)RRDMA_PORT_ACTIVE);
	printf("RRDMA_LINK_LAYER_ETHERNET %u\n", (unsigned)RRDMA_LINK_LAYER_ETHERNET);
	return 0;
}
"#;

#[test]
fn c_header_matches_rust_mirror() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("rrdma-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, PROBE).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args(["-std=c99", "-Wall", "-Werror", "-pedantic", "-I"])
        .arg(repo.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run the C compiler");
    assert!(
        st.success(),
        "the UAPI header does not compile in userspace"
    );
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let got: std::collections::HashMap<&str, u64> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();

    macro_rules! off {
        ($c:literal, $t:ty, $f:ident) => {
            assert_eq!(
                got[concat!($c, ".", stringify!($f))],
                std::mem::offset_of!($t, $f) as u64,
                "{}",
                stringify!($f)
            );
        };
    }
    assert_eq!(got["rrdma_info"], Info::SIZE as u64);
    off!("rrdma_info", Info, abi_version);
    off!("rrdma_info", Info, flags);
    off!("rrdma_info", Info, features);
    off!("rrdma_info", Info, devices);
    off!("rrdma_info", Info, device_entry_size);
    off!("rrdma_info", Info, device_capacity);
    off!("rrdma_info", Info, device_count);
    off!("rrdma_info", Info, reserved);
    assert_eq!(got["rrdma_device_info"], DeviceInfo::SIZE as u64);
    off!("rrdma_device_info", DeviceInfo, name);
    off!("rrdma_device_info", DeviceInfo, index);
    off!("rrdma_device_info", DeviceInfo, node_type);
    off!("rrdma_device_info", DeviceInfo, port_count);
    off!("rrdma_device_info", DeviceInfo, port_state);
    off!("rrdma_device_info", DeviceInfo, link_layer);
    off!("rrdma_device_info", DeviceInfo, flags);
    off!("rrdma_device_info", DeviceInfo, node_guid);
    off!("rrdma_device_info", DeviceInfo, reserved);
    assert_eq!(got["rrdma_region_create"], RegionCreate::SIZE as u64);
    off!("rrdma_region_create", RegionCreate, block_size);
    off!("rrdma_region_create", RegionCreate, flags);
    off!("rrdma_region_create", RegionCreate, nblocks);
    off!("rrdma_region_create", RegionCreate, handle);
    off!("rrdma_region_create", RegionCreate, reserved);
    off!("rrdma_region_create", RegionCreate, mmap_offset);
    off!("rrdma_region_create", RegionCreate, size);
    assert_eq!(got["rrdma_region_destroy"], RegionDestroy::SIZE as u64);
    off!("rrdma_region_destroy", RegionDestroy, handle);
    off!("rrdma_region_destroy", RegionDestroy, flags);
    assert_eq!(got["rrdma_import"], Import::SIZE as u64);
    off!("rrdma_import", Import, conn);
    off!("rrdma_import", Import, flags);
    off!("rrdma_import", Import, token);
    off!("rrdma_import", Import, timeout_ms);
    off!("rrdma_import", Import, handle);
    off!("rrdma_import", Import, block_size);
    off!("rrdma_import", Import, access);
    off!("rrdma_import", Import, nblocks);
    off!("rrdma_import", Import, max_op_blocks);
    off!("rrdma_import", Import, reserved);
    assert_eq!(got["rrdma_region_register"], RegionRegister::SIZE as u64);
    off!("rrdma_region_register", RegionRegister, addr);
    off!("rrdma_region_register", RegionRegister, block_size);
    off!("rrdma_region_register", RegionRegister, flags);
    off!("rrdma_region_register", RegionRegister, nblocks);
    off!("rrdma_region_register", RegionRegister, handle);
    off!("rrdma_region_register", RegionRegister, reserved);
    off!("rrdma_region_register", RegionRegister, size);
    assert_eq!(
        got["RRDMA_REGION_REGISTER_SIZE_VER0"],
        uapi::REGION_REGISTER_SIZE_VER0 as u64
    );
    assert_eq!(
        got["RRDMA_IOCTL_REGION_REGISTER"],
        u64::from(uapi::IOCTL_REGION_REGISTER)
    );
    assert_eq!(got["RRDMA_FEATURE_REGISTER"], uapi::FEATURE_REGISTER);
    assert_eq!(got["RRDMA_IMPORT_SIZE_VER0"], uapi::IMPORT_SIZE_VER0 as u64);
    assert_eq!(got["RRDMA_IOCTL_IMPORT"], u64::from(uapi::IOCTL_IMPORT));
    assert_eq!(
        got["RRDMA_IOCTL_REGION_CREATE"],
        u64::from(uapi::IOCTL_REGION_CREATE)
    );
    assert_eq!(
        got["RRDMA_IOCTL_REGION_DESTROY"],
        u64::from(uapi::IOCTL_REGION_DESTROY)
    );
    assert_eq!(got["rrdma_connect"], Connect::SIZE as u64);
    off!("rrdma_connect", Connect, addr);
    off!("rrdma_connect", Connect, timeout_ms);
    off!("rrdma_connect", Connect, flags);
    off!("rrdma_connect", Connect, handle);
    off!("rrdma_connect", Connect, keepalive_ms);
    off!("rrdma_connect", Connect, keepalive_misses);
    assert_eq!(
        got["RRDMA_CONNECT_NO_KEEPALIVE"],
        u64::from(uapi::CONNECT_NO_KEEPALIVE)
    );
    assert_eq!(
        got["RRDMA_CONNECT_RECONNECT"],
        u64::from(uapi::CONNECT_RECONNECT)
    );
    assert_eq!(got["RRDMA_FEATURE_RECONNECT"], uapi::FEATURE_RECONNECT);
    assert_eq!(got["RRDMA_FEATURE_URING"], uapi::FEATURE_URING);
    assert_eq!(
        got["RRDMA_FEATURE_URING_IOPOLL"],
        uapi::FEATURE_URING_IOPOLL
    );
    assert_eq!(got["RRDMA_URING_CMD_OP"], u64::from(uapi::URING_CMD_OP));
    assert_eq!(got["RRDMA_FEATURES_ALL"], uapi::FEATURES_ALL);
    assert_eq!(got["rrdma_blk_map"], blkdev::BlkMap::SIZE as u64);
    off!("rrdma_blk_map", blkdev::BlkMap, import);
    off!("rrdma_blk_map", blkdev::BlkMap, flags);
    off!("rrdma_blk_map", blkdev::BlkMap, index);
    off!("rrdma_blk_map", blkdev::BlkMap, reserved);
    assert_eq!(got["rrdma_blk_unmap"], blkdev::BlkUnmap::SIZE as u64);
    off!("rrdma_blk_unmap", blkdev::BlkUnmap, index);
    off!("rrdma_blk_unmap", blkdev::BlkUnmap, flags);
    assert_eq!(got["RRDMA_IOCTL_BLK_MAP"], u64::from(blkdev::IOCTL_BLK_MAP));
    assert_eq!(
        got["RRDMA_IOCTL_BLK_UNMAP"],
        u64::from(blkdev::IOCTL_BLK_UNMAP)
    );
    assert_eq!(got["RRDMA_BLK_MAP_RO"], u64::from(blkdev::BLK_MAP_RO));
    assert_eq!(
        got["RRDMA_BLK_UNMAP_FORCE"],
        u64::from(blkdev::BLK_UNMAP_FORCE)
    );
    assert_eq!(got["RRDMA_FEATURE_BLK"], uapi::FEATURE_BLK);
    assert_eq!(got["RRDMA_IOCTL_GET_INFO"], u64::from(uapi::IOCTL_GET_INFO));
    assert_eq!(got["RRDMA_ABI_VERSION"], u64::from(uapi::ABI_VERSION));
    assert_eq!(got["RRDMA_INFO_SIZE_VER0"], uapi::INFO_SIZE_VER0 as u64);
    assert_eq!(
        got["RRDMA_DEVICE_INFO_SIZE_VER0"],
        u64::from(uapi::DEVICE_INFO_SIZE_VER0)
    );
    assert_eq!(
        got["RRDMA_DEVICE_ENTRY_SIZE_MAX"],
        u64::from(uapi::DEVICE_ENTRY_SIZE_MAX)
    );
    assert_eq!(
        got["RRDMA_DEVICE_F_USABLE"],
        u64::from(uapi::DEVICE_F_USABLE)
    );
    assert_eq!(got["RRDMA_NODE_RNIC"], u64::from(uapi::node_type::RNIC));
    assert_eq!(got["RRDMA_NODE_IB_CA"], u64::from(uapi::node_type::IB_CA));
    assert_eq!(
        got["RRDMA_PORT_ACTIVE"],
        u64::from(uapi::port_state::ACTIVE)
    );
    assert_eq!(
        got["RRDMA_LINK_LAYER_ETHERNET"],
        u64::from(uapi::link_layer::ETHERNET)
    );
    std::fs::remove_dir_all(&dir).ok();
}
