/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * rrdma: remote memory blocks over RDMA, userspace ABI of /dev/rrdma.
 *
 * Conventions (Documentation/rrdma.rst, "Userspace ABI"):
 *  - fixed-width fields, natural alignment, explicit padding; every struct is
 *    a multiple of 8 bytes;
 *  - every reserved field and every flag bit not defined here must be zero,
 *    else the ioctl fails with EINVAL;
 *  - structs only grow at the end.  The kernel takes the caller's size from
 *    _IOC_SIZE(cmd): a shorter struct than the first version is refused with
 *    EINVAL, a longer one is accepted only if its extra tail is zero (E2BIG
 *    otherwise), and output is written up to the smaller of both sizes;
 *  - userspace pointers travel as __u64;
 *  - remote addresses and rkeys never appear here.
 */
#ifndef _UAPI_LINUX_RRDMA_H
#define _UAPI_LINUX_RRDMA_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* Bumped only for incompatible changes; growth is discovered via features. */
#define RRDMA_ABI_VERSION	1

/* ioctl type byte; 0xE7 is unassigned in ioctl-number.rst. */
#define RRDMA_IOCTL_MAGIC	0xE7

/* Feature bits reported by RRDMA_IOCTL_GET_INFO. */
#define RRDMA_FEATURE_REGIONS	(1ULL << 0)	/* REGION_CREATE/DESTROY, mmap */
#define RRDMA_FEATURES_ALL	RRDMA_FEATURE_REGIONS

/* RDMA device name length, NUL included (IB_DEVICE_NAME_MAX). */
#define RRDMA_DEVICE_NAME_MAX	64

/* rrdma_device_info.node_type: the kernel's enum rdma_node_type. */
#define RRDMA_NODE_IB_CA	1	/* InfiniBand or RoCE channel adapter (rxe, mlx5) */
#define RRDMA_NODE_IB_SWITCH	2
#define RRDMA_NODE_IB_ROUTER	3
#define RRDMA_NODE_RNIC		4	/* iWARP (siw, irdma in iWARP mode) */
#define RRDMA_NODE_USNIC	5
#define RRDMA_NODE_USNIC_UDP	6
#define RRDMA_NODE_UNSPECIFIED	7

/* rrdma_device_info.port_state: the kernel's enum ib_port_state. */
#define RRDMA_PORT_NOP		0
#define RRDMA_PORT_DOWN		1
#define RRDMA_PORT_INIT		2
#define RRDMA_PORT_ARMED	3
#define RRDMA_PORT_ACTIVE	4
#define RRDMA_PORT_ACTIVE_DEFER	5

/* rrdma_device_info.link_layer: the kernel's IB_LINK_LAYER_*. */
#define RRDMA_LINK_LAYER_UNSPECIFIED	0
#define RRDMA_LINK_LAYER_INFINIBAND	1
#define RRDMA_LINK_LAYER_ETHERNET	2

/* rrdma_device_info.flags */
/* rrdma built its per-device context: the device can carry rrdma traffic. */
#define RRDMA_DEVICE_F_USABLE	(1U << 0)

/**
 * struct rrdma_device_info - one RDMA device, as RRDMA_IOCTL_GET_INFO lists it
 * @name:	device name (e.g. "siw0"), NUL-terminated
 * @index:	the kernel's device index (as `rdma link` shows)
 * @node_type:	RRDMA_NODE_*
 * @port_count:	number of ports
 * @port_state:	RRDMA_PORT_* of the first port, read at the time of the call
 * @link_layer:	RRDMA_LINK_LAYER_* of the first port
 * @flags:	RRDMA_DEVICE_F_*
 * @node_guid:	node GUID, in network byte order as the kernel keeps it
 * @reserved:	written as zero
 *
 * Entries are written at a stride of rrdma_info.device_entry_size, so that
 * this struct can grow: an older caller receives the prefix it knows, a
 * newer caller zeros for the fields this kernel does not know.
 */
struct rrdma_device_info {
	char name[RRDMA_DEVICE_NAME_MAX];
	__u32 index;
	__u32 node_type;
	__u32 port_count;
	__u32 port_state;
	__u32 link_layer;
	__u32 flags;
	__u64 node_guid;
	__u64 reserved[2];
};

#define RRDMA_DEVICE_INFO_SIZE_VER0	112	/* first published size */

/**
 * struct rrdma_info - argument of RRDMA_IOCTL_GET_INFO
 * @abi_version:	out: RRDMA_ABI_VERSION of the running module
 * @flags:		in: must be zero
 * @features:		out: RRDMA_FEATURE_* bits the module supports
 * @devices:		in: user pointer to @device_capacity entries, or 0
 * @device_entry_size:	in: the caller's sizeof(struct rrdma_device_info);
 *			at least RRDMA_DEVICE_INFO_SIZE_VER0 and at most 4096
 *			when @device_capacity is not zero, else ignored
 * @device_capacity:	in: number of entries at @devices (0 with @devices 0)
 * @device_count:	out: number of devices known; can exceed
 *			@device_capacity, in which case only the first
 *			@device_capacity entries were written
 * @reserved:		in: must be zero
 */
struct rrdma_info {
	__u32 abi_version;
	__u32 flags;
	__u64 features;
	__u64 devices;
	__u32 device_entry_size;
	__u32 device_capacity;
	__u32 device_count;
	__u32 reserved;
};

#define RRDMA_INFO_SIZE_VER0	40	/* first published size */

/* Largest device entry stride accepted. */
#define RRDMA_DEVICE_ENTRY_SIZE_MAX	4096

/**
 * struct rrdma_region_create - argument of RRDMA_IOCTL_REGION_CREATE
 * @block_size:	in: bytes per block, a power of two from 512 to 1 MiB
 * @flags:	in: must be zero
 * @nblocks:	in: number of blocks, at least one
 * @handle:	out: the region's handle in this file
 * @reserved:	in: must be zero
 * @mmap_offset: out: offset to pass to mmap(2) to map the region
 * @size:	out: bytes in the region (block_size * nblocks)
 *
 * The kernel allocates zeroed pages for the region and charges them to the
 * caller's RLIMIT_MEMLOCK (unless it has CAP_IPC_LOCK); the module
 * parameter max_region_mb bounds one region.  The pages are mapped by
 * mmap(2) of exactly the rounded-up size at exactly @mmap_offset, with
 * MAP_SHARED and without PROT_EXEC: the mapping is the region's memory
 * itself, not a copy, is not inherited by fork(2) children, and stays
 * valid after the region is destroyed or the file is closed.
 */
struct rrdma_region_create {
	__u32 block_size;
	__u32 flags;
	__u64 nblocks;
	__u32 handle;
	__u32 reserved;
	__u64 mmap_offset;
	__u64 size;
};

#define RRDMA_REGION_CREATE_SIZE_VER0	40

/**
 * struct rrdma_region_destroy - argument of RRDMA_IOCTL_REGION_DESTROY
 * @handle:	in: the region's handle
 * @flags:	in: must be zero
 */
struct rrdma_region_destroy {
	__u32 handle;
	__u32 flags;
};

#define RRDMA_REGION_DESTROY_SIZE_VER0	8

#define RRDMA_IOCTL_GET_INFO	_IOWR(RRDMA_IOCTL_MAGIC, 0x00, struct rrdma_info)
#define RRDMA_IOCTL_REGION_CREATE \
	_IOWR(RRDMA_IOCTL_MAGIC, 0x01, struct rrdma_region_create)
#define RRDMA_IOCTL_REGION_DESTROY \
	_IOW(RRDMA_IOCTL_MAGIC, 0x02, struct rrdma_region_destroy)

#endif /* _UAPI_LINUX_RRDMA_H */
