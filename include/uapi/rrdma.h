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

/* Feature bits reported by RRDMA_IOCTL_GET_INFO (none yet in ABI 1.0). */
#define RRDMA_FEATURES_ALL	0ULL

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

#define RRDMA_IOCTL_GET_INFO	_IOWR(RRDMA_IOCTL_MAGIC, 0x00, struct rrdma_info)

#endif /* _UAPI_LINUX_RRDMA_H */
