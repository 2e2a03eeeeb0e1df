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
 *  - userspace pointers travel as __u64; an argument the kernel cannot read,
 *    or cannot write an answer to, fails with EFAULT before anything is done;
 *  - handles are per file and never reused while the file is open (a stale
 *    handle is ENOENT, never another object);
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
/* LISTEN .. SUBMIT, RW_SYNC, completions by read(2)/poll(2) */
#define RRDMA_FEATURE_REMOTE	(1ULL << 1)
/* CONNECT's keepalive fields and RRDMA_CONNECT_NO_KEEPALIVE */
#define RRDMA_FEATURE_KEEPALIVE	(1ULL << 2)
/* RRDMA_CONNECT_RECONNECT */
#define RRDMA_FEATURE_RECONNECT	(1ULL << 3)
/* io_uring commands: RRDMA_URING_CMD_OP (kernels with CONFIG_IO_URING) */
#define RRDMA_FEATURE_URING	(1ULL << 4)
/* io_uring commands on an IORING_SETUP_IOPOLL ring complete by polling */
#define RRDMA_FEATURE_URING_IOPOLL	(1ULL << 5)
/* RRDMA_IOCTL_REGION_REGISTER: the caller's own memory as a region */
#define RRDMA_FEATURE_REGISTER	(1ULL << 6)
/* RRDMA_OP_F_SENT and RRDMA_OP_FENCE */
#define RRDMA_FEATURE_WRITE_SENT	(1ULL << 7)
/* RRDMA_IOCTL_BLK_MAP and BLK_UNMAP: an import as a block device */
#define RRDMA_FEATURE_BLK	(1ULL << 8)
/* RRDMA_IOCTL_STATUS */
#define RRDMA_FEATURE_STATUS	(1ULL << 9)
/*
 * Caps on the connections, regions and exports a file holds (ENOSPC
 * beyond) and a user's files hold together (EDQUOT beyond); the module
 * parameters max_file_* and max_user_* set them.
 */
#define RRDMA_FEATURE_CAPS	(1ULL << 10)
#define RRDMA_FEATURES_ALL	(RRDMA_FEATURE_REGIONS | RRDMA_FEATURE_REMOTE | \
				 RRDMA_FEATURE_KEEPALIVE | RRDMA_FEATURE_RECONNECT | \
				 RRDMA_FEATURE_URING | RRDMA_FEATURE_URING_IOPOLL | \
				 RRDMA_FEATURE_REGISTER | RRDMA_FEATURE_WRITE_SENT | \
				 RRDMA_FEATURE_BLK | RRDMA_FEATURE_STATUS | \
				 RRDMA_FEATURE_CAPS)

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
 * caller's memory cgroup and RLIMIT_MEMLOCK (unless it has CAP_IPC_LOCK);
 * the module parameter max_region_mb bounds one region.  The pages are
 * mapped by mmap(2) of exactly the rounded-up size at exactly @mmap_offset,
 * with MAP_SHARED and without PROT_EXEC: the mapping is the region's memory
 * itself, not a copy, and stays valid after the region is destroyed or the
 * file is closed; the pages and their RLIMIT_MEMLOCK charge last until the
 * last mapping goes.  fork(2) children do not inherit the mapping; if
 * MADV_DOFORK made them (where the kernel allows it), their copy faults
 * with SIGBUS.  A region counts against the caps (RRDMA_FEATURE_CAPS) for
 * as long as its pages live: ENOSPC beyond max_file_regions in the file
 * (default 65536), EDQUOT beyond max_user_regions in the user's files
 * (default 262144).
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

/**
 * struct rrdma_region_register - argument of RRDMA_IOCTL_REGION_REGISTER
 * @addr:	in: start of the caller's memory, page aligned
 * @block_size:	in: bytes per block, a power of two from 512 to 1 MiB
 * @flags:	in: must be zero
 * @nblocks:	in: number of blocks, at least one; block_size * nblocks is
 *		a whole number of pages
 * @handle:	out: the region's handle in this file
 * @reserved:	in: must be zero
 * @size:	out: bytes in the region (block_size * nblocks)
 *
 * Turns the caller's memory [addr, addr + size) into a region, usable
 * wherever a created one is (EXPORT, the local side of operations,
 * io_uring), without copying it: the pages are pinned (as ib_umem pins
 * them, FOLL_LONGTERM) and charged to RLIMIT_MEMLOCK like a created
 * region's; they already belong to the caller's memory cgroup.  Accepted:
 * anonymous memory (private or shared), shmem (memfd, tmpfs) and hugetlb
 * mappings, all writable.  Errors: EINVAL (an argument above, or a range
 * that wraps the address space), EOVERFLOW (the size overflows or exceeds
 * the module parameter max_region_mb), EFAULT (part of the range is not
 * mapped), EACCES (a mapping in it is not writable), EOPNOTSUPP (memory
 * that cannot be pinned for a NIC: VM_IO or VM_PFNMAP mappings, DAX, and
 * file-backed memory other than shmem and hugetlb), ENOMEM (RLIMIT_MEMLOCK,
 * or no memory), EINTR (a fatal signal while pinning), ENOSPC (the file's
 * objects or regions are at their cap), EDQUOT (its user's regions are).
 * A mapping changed by another thread while the pages are pinned may turn
 * any of these into EFAULT.
 *
 * The region is the pages the range held when it was registered, until
 * REGION_DESTROY (or close) unpins them: whatever the process then does
 * to its mapping (munmap, MADV_DONTNEED, mremap, a new mapping over it),
 * the NIC reaches only those pages, and the process no longer sees what
 * operations move.  A fork(2) child gets copies of pinned private pages
 * (the parent keeps the region's); shared memory stays shared.  A
 * registered region has no mmap offset: the caller already maps it.
 */
struct rrdma_region_register {
	__u64 addr;
	__u32 block_size;
	__u32 flags;
	__u64 nblocks;
	__u32 handle;
	__u32 reserved;
	__u64 size;
};

#define RRDMA_REGION_REGISTER_SIZE_VER0	40

#define RRDMA_IOCTL_GET_INFO	_IOWR(RRDMA_IOCTL_MAGIC, 0x00, struct rrdma_info)
#define RRDMA_IOCTL_REGION_CREATE \
	_IOWR(RRDMA_IOCTL_MAGIC, 0x01, struct rrdma_region_create)
#define RRDMA_IOCTL_REGION_DESTROY \
	_IOW(RRDMA_IOCTL_MAGIC, 0x02, struct rrdma_region_destroy)

/* rrdma_addr.family */
#define RRDMA_AF_INET		2	/* AF_INET */
#define RRDMA_AF_INET6		10	/* AF_INET6 */

/**
 * struct rrdma_addr - an IP address and port, as rdma_cm resolves them
 * @family:	RRDMA_AF_INET or RRDMA_AF_INET6
 * @port:	port, host byte order (not 0)
 * @scope_id:	IPv6 scope (interface index) for link-local addresses, else 0
 * @addr:	address in network byte order; IPv4 uses the first 4 bytes and
 *		the other 12 must be zero
 */
struct rrdma_addr {
	__u16 family;
	__u16 port;
	__u32 scope_id;
	__u8 addr[16];
};

/* Largest listen backlog; 0 asks for RRDMA_BACKLOG_DEFAULT. */
#define RRDMA_BACKLOG_DEFAULT	16
#define RRDMA_BACKLOG_MAX	256

/**
 * struct rrdma_listen - argument of RRDMA_IOCTL_LISTEN
 * @addr:	in: local address to listen on (any address: all zero)
 * @backlog:	in: connections accepted by the kernel but not yet taken by
 *		RRDMA_IOCTL_ACCEPT; further requests are rejected with EBUSY
 * @flags:	in: must be zero
 * @handle:	out: the listener's handle
 * @reserved:	in: must be zero
 *
 * The kernel completes the handshake of every valid connection request
 * itself (auto-accept) and queues the established connection for ACCEPT.
 * Queued connections already serve this file's exports.  A port another
 * listener holds is EADDRINUSE (same address) or EADDRNOTAVAIL (one of
 * them on any address), as rdma_cm answers the bind.
 */
struct rrdma_listen {
	struct rrdma_addr addr;
	__u32 backlog;
	__u32 flags;
	__u32 handle;
	__u32 reserved;
};

/**
 * struct rrdma_accept - argument of RRDMA_IOCTL_ACCEPT
 * @listener:	in: the listener's handle
 * @flags:	in: must be zero
 * @timeout_ms:	in: how long to wait for a connection; 0 does not wait
 *		(EAGAIN), ~0U waits until a signal; EINVAL once the listener
 *		is closed (UNLISTEN, or its device gone), also during the wait
 * @handle:	out: the connection's handle
 * @peer:	out: the peer's address
 */
struct rrdma_accept {
	__u32 listener;
	__u32 flags;
	__u32 timeout_ms;
	__u32 handle;
	struct rrdma_addr peer;
};

/**
 * struct rrdma_connect - argument of RRDMA_IOCTL_CONNECT
 * @addr:	in: the peer's address
 * @timeout_ms:	in: for address and route resolution and the handshake;
 *		0 means the default (5000)
 * @flags:	in: RRDMA_CONNECT_NO_KEEPALIVE, RRDMA_CONNECT_RECONNECT
 * @handle:	out: the connection's handle
 * @keepalive_ms: in: keepalive interval in milliseconds, 100 or more; 0
 *		takes the module parameter keepalive_ms (default 5000)
 * @keepalive_misses: in: intervals without an answer from the peer before
 *		the connection ends with ETIMEDOUT, 2 to 255; 0 takes the module
 *		parameter keepalive_misses (default 6)
 *
 * Waits interruptibly until the connection is established or has failed:
 * ECONNREFUSED (nobody listens, or the peer refused: its errno is
 * returned if it sent one), ETIMEDOUT, EHOSTUNREACH, ENODEV (no usable RDMA
 * device owns the route), EADDRNOTAVAIL (no free local port: iWARP
 * connects over TCP), EINTR, ENOSPC (the file holds max_file_conns
 * connections, default 4096, accepted ones included), EDQUOT (the user's
 * files hold max_user_conns, default 8192).  A listener whose file or
 * user is at its cap refuses the connect request: the connecting side
 * gets ECONNREFUSED (on siw, whose rejects carry no private data, any
 * refusal does).
 *
 * Keepalive (RRDMA_FEATURE_KEEPALIVE): when no answer to anything this
 * side sent has come back for @keepalive_ms, the kernel sends a ping; after
 * @keepalive_misses intervals without one, the peer is taken as gone and
 * the connection ends with ETIMEDOUT (operations in flight complete with
 * it). The passive side checks its peer the same way with the module
 * parameters, and releases what it granted on the connection. When the
 * peer notices first and its disconnect still gets through, the connection
 * ends with ECONNRESET instead. Needs a peer
 * module of protocol version 3; with an older one, the connection has no
 * keepalive. RRDMA_CONNECT_NO_KEEPALIVE (with both fields 0) turns it off
 * for this connection; with the module's keepalive_ms at 0, it is off
 * unless a field asks for it. Control messages share the queue pair with
 * the data: an answer waits behind the operations its sender queued before
 * it, so keep the limit above the time a peer needs to send what it queues.
 *
 * Reconnect (RRDMA_FEATURE_RECONNECT): with RRDMA_CONNECT_RECONNECT, a
 * connection that was established and then fails (the peer disconnected
 * or went silent, the queue pair broke, the device went) is not ended: the
 * kernel connects again to @addr, after a delay that doubles from the
 * module parameter reconnect_delay_ms (default 200) up to
 * reconnect_max_delay_ms (default 10000), half of it random, at most
 * reconnect_attempts times (default 10) in a row; each attempt has
 * @timeout_ms. CONNECT itself succeeds once the connection is
 * established, even if it fails again before CONNECT returns, as long as
 * it is reconnecting then. Meanwhile the handle stays valid: operations in flight at
 * the failure complete with ECONNRESET (a WRITE among them may or may not
 * have landed, but never lands after the connection is back: the exporter,
 * protocol version 4, ends the old connection before it accepts the new
 * one), and new operations and IMPORTs fail with EAGAIN. Once connected
 * again, each import is asked for again and keeps its handle; one whose
 * export is gone, changed or restricted to the old connection fails with
 * EKEYREVOKED from then on (until then, EAGAIN).
 * When the attempts are spent the connection ends with the last attempt's
 * errno. DISCONNECT and close end it at any point. A CONNECT that fails is
 * not retried.
 */
struct rrdma_connect {
	struct rrdma_addr addr;
	__u32 timeout_ms;
	__u32 flags;
	__u32 handle;
	__u16 keepalive_ms;
	__u16 keepalive_misses;
};

/* CONNECT flags */
#define RRDMA_CONNECT_NO_KEEPALIVE	(1U << 0)
#define RRDMA_CONNECT_RECONNECT		(1U << 1)

/**
 * struct rrdma_handle_arg - argument of DISCONNECT, UNIMPORT and UNLISTEN
 * @handle:	in: the object's handle
 * @flags:	in: must be zero
 */
struct rrdma_handle_arg {
	__u32 handle;
	__u32 flags;
};

/* rrdma_export.access */
#define RRDMA_ACCESS_READ	(1U << 0)	/* peers may READ the region */
#define RRDMA_ACCESS_WRITE	(1U << 1)	/* peers may WRITE it (needs READ) */

/**
 * struct rrdma_export - argument of RRDMA_IOCTL_EXPORT
 * @region:	in: the region's handle
 * @access:	in: RRDMA_ACCESS_READ, or READ | WRITE
 * @conn:	in: a connection handle to restrict the export to, or 0 for
 *		any connection of this file
 * @flags:	in: must be zero
 * @token:	out: a random 64-bit token naming the export to peers
 *
 * Registration for the NIC happens per importing connection, by fast
 * registration with a fresh key, and a read-only export is registered
 * without remote write access.  A region with exports cannot be destroyed
 * (EBUSY) until they are unexported.  A file holds at most
 * max_file_exports exports (default 4096; ENOSPC beyond), and one user's
 * files max_user_exports together (default 65536; EDQUOT beyond).
 */
struct rrdma_export {
	__u32 region;
	__u32 access;
	__u32 conn;
	__u32 flags;
	__u64 token;
};

/**
 * struct rrdma_unexport - argument of RRDMA_IOCTL_UNEXPORT
 * @token:	in: the token EXPORT returned
 * @flags:	in: must be zero
 * @reserved:	in: must be zero
 *
 * Revokes: importers are told and their later operations fail with
 * EKEYREVOKED; once each importer has acknowledged that none of its
 * operations on the export is in flight (or its connection has ended),
 * every registration of the export is deregistered (the NIC refuses the
 * old keys) and the ioctl returns: no write through the token lands after
 * that.
 */
struct rrdma_unexport {
	__u64 token;
	__u32 flags;
	__u32 reserved;
};

/**
 * struct rrdma_import - argument of RRDMA_IOCTL_IMPORT
 * @conn:	in: the connection to the exporting peer
 * @flags:	in: must be zero
 * @token:	in: the token the peer's EXPORT returned
 * @timeout_ms:	in: for the peer's answer; 0 means the default (5000)
 * @handle:	out: the remote region's handle
 * @block_size:	out: the remote region's block size
 * @access:	out: RRDMA_ACCESS_* granted
 * @nblocks:	out: the remote region's number of blocks
 * @max_op_blocks: out: the largest @count one operation on this import
 *		accepts, wherever it starts (a larger one fails with E2BIG
 *		before anything is posted); it depends on both sides' devices.
 *		Not written by callers of the 40-byte first version.
 * @reserved:	in: must be zero
 *
 * Waits for the answer, and first for one of the connection's 8 import
 * request slots if all are taken, within @timeout_ms (ETIMEDOUT).
 */
struct rrdma_import {
	__u32 conn;
	__u32 flags;
	__u64 token;
	__u32 timeout_ms;
	__u32 handle;
	__u32 block_size;
	__u32 access;
	__u64 nblocks;
	__u32 max_op_blocks;
	__u32 reserved;
};

#define RRDMA_IMPORT_SIZE_VER0	40	/* first published size */

/* rrdma_op.opcode */
#define RRDMA_OP_READ		1	/* remote blocks -> local region */
#define RRDMA_OP_WRITE		2	/* local region -> remote blocks */
#define RRDMA_OP_FENCE		3	/* earlier writes on @remote placed */

/* rrdma_op.flags */
#define RRDMA_OP_F_SENT		(1U << 0)	/* a write completes once sent */

/**
 * struct rrdma_op - one block operation
 * @opcode:	RRDMA_OP_READ, RRDMA_OP_WRITE or RRDMA_OP_FENCE
 * @flags:	RRDMA_OP_F_SENT on a write, otherwise zero
 * @remote:	handle of an imported remote region
 * @local:	handle of a local region; same block size as the remote one
 *		(zero for a fence, as are the block fields and @count)
 * @remote_block: first remote block
 * @local_block: first local block
 * @count:	number of contiguous blocks, at least one (zero for a fence)
 * @reserved:	must be zero
 * @user_data:	returned unchanged in the completion
 *
 * Operations in flight at the same time on overlapping remote blocks are
 * not atomic with respect to each other at any granularity (not per
 * operation, not per block, not per 8 bytes): two writes may leave a block
 * with bytes of both, and a read beside a write may return any mix of old
 * and new bytes; each byte is one that a write wrote or the block held.
 * Ordering comes only from completions: once a write's completion has been
 * reported, any operation submitted afterwards, by any thread that learned
 * of that completion, sees all its bytes, and a later write replaces them
 * in full.  A failed write may have placed any part of its bytes.
 *
 * When a write completes (RRDMA_FEATURE_WRITE_SENT):
 * - by default, once placed: its bytes are in the exporter's memory, where
 *   any later operation of any peer sees them.  On iWARP (siw, irdma,
 *   cxgb4), whose RDMA WRITE completion says only that the data left, the
 *   module reads one byte after it (a fence) and completes the write with
 *   that read; writes of one SUBMIT on one connection (on each queue pair
 *   it used), or posted while a fence is in flight, share one.
 * - with RRDMA_OP_F_SENT, once sent: its local blocks may be reused, but
 *   its bytes may still be on their way, and an operation that reads them
 *   may see older bytes until a fence on the import completes.  On
 *   RoCE/InfiniBand a write completes once acknowledged, which is placed:
 *   the flag changes nothing there.
 *
 * RRDMA_OP_FENCE on an import completes, with bytes 0, once every write on
 * that import submitted before it (by this file, on any of the
 * connection's queue pairs) is placed: one fence however many writes it
 * follows (a round trip once their bytes have arrived: "sent" writes may
 * still be on their way), and none when nothing is outstanding (every
 * earlier write's placement already known).  It completes after the earlier writes of
 * the file on that connection that have not completed yet (within one
 * SUBMIT too).  Through io_uring, "before" means issued before: a write
 * that found the queues full is issued again later by a worker, so link
 * the fence to the writes (IOSQE_IO_LINK) or submit it after their CQEs.
 * When the connection ends (RRDMA_CONNECT_RECONNECT
 * then brings it back), writes sent and never covered by a fence that
 * completed may be lost: the first fence submitted on the import after
 * that fails with ECONNRESET (once; a fence in flight when it ended fails
 * with the connection's errno and counts as that report), and so does
 * every write not yet completed.  The check is conservative: it may
 * report writes lost that had in fact been placed, never the reverse.
 */
struct rrdma_op {
	__u32 opcode;
	__u32 flags;
	__u32 remote;
	__u32 local;
	__u64 remote_block;
	__u64 local_block;
	__u32 count;
	__u32 reserved;
	__u64 user_data;
};

#define RRDMA_OP_SIZE_VER0	48

/**
 * struct rrdma_submit - argument of RRDMA_IOCTL_SUBMIT
 * @ops:	in: user pointer to @count struct rrdma_op, @op_size apart
 * @count:	in: number of operations, 1 to RRDMA_SUBMIT_MAX
 * @op_size:	in: the caller's sizeof(struct rrdma_op), at least
 *		RRDMA_OP_SIZE_VER0
 * @flags:	in: must be zero
 * @submitted:	out: operations posted, in order
 *
 * The argument is written back before anything is done: one in read-only
 * memory fails with EFAULT and posts nothing.  Every operation is checked
 * (handles, kinds, bounds, access, size) before any is posted: if one is
 * refused, the ioctl fails with its errno, nothing is posted and
 * @submitted is the index of the refused operation.  An operation of more
 * blocks than its import's max_op_blocks is refused with E2BIG.  One
 * larger than its connection's own queue pair takes (a small one, beside
 * the data lanes that carry the operations once the first operation opened
 * them) waits for a lane to be up, before anything is posted, for at most
 * 10 s: ENOSPC, logged, if none comes up (the peer granted none or
 * refused them).  A SUBMIT that fills that small queue pair before the
 * lanes are up (a new connection's first batch) waits for the first lane
 * the same way and posts the rest there.  When the
 * queues are full, a prefix is posted; the ioctl returns how many
 * operations were posted and @submitted says the same; EAGAIN when none
 * could be.  Room comes back as posted operations complete: a caller reads
 * a completion and submits the rest again (EAGAIN with nothing of the file
 * in flight is logged with the queues' state).  Each posted operation
 * produces exactly one
 * struct rrdma_completion, read from the file.
 */
struct rrdma_submit {
	__u64 ops;
	__u32 count;
	__u32 op_size;
	__u32 flags;
	__u32 submitted;
};

#define RRDMA_SUBMIT_MAX	1024

/**
 * struct rrdma_completion - what read(2) of /dev/rrdma returns
 * @user_data:	the operation's user_data
 * @status:	0, or a negative errno: EKEYREVOKED (export revoked),
 *		EACCES (the peer's NIC refused the access), ECONNRESET /
 *		ECONNABORTED (the connection went down), ECANCELED (flushed by
 *		a disconnect or close), ETIMEDOUT (keepalive: the peer stopped
 *		answering), ENODEV (the device was removed), EIO
 * @opcode:	the operation's opcode
 * @bytes:	bytes transferred (0 on error)
 *
 * read(2) returns whole records only (EINVAL for a smaller buffer), blocks
 * interruptibly unless O_NONBLOCK (EAGAIN), and poll(2) reports POLLIN while
 * completions are pending.  With the module parameter read_gather=Y (off
 * by default), a read(2) that found records while more operations are in
 * flight may wait for more first, O_NONBLOCK or not: never more than 1 ms,
 * and not beyond half of what was pending.
 */
struct rrdma_completion {
	__u64 user_data;
	__s32 status;
	__u32 opcode;
	__u64 bytes;
};

#define RRDMA_IOCTL_LISTEN	_IOWR(RRDMA_IOCTL_MAGIC, 0x03, struct rrdma_listen)
#define RRDMA_IOCTL_ACCEPT	_IOWR(RRDMA_IOCTL_MAGIC, 0x04, struct rrdma_accept)
#define RRDMA_IOCTL_CONNECT	_IOWR(RRDMA_IOCTL_MAGIC, 0x05, struct rrdma_connect)
#define RRDMA_IOCTL_DISCONNECT	_IOW(RRDMA_IOCTL_MAGIC, 0x06, struct rrdma_handle_arg)
#define RRDMA_IOCTL_EXPORT	_IOWR(RRDMA_IOCTL_MAGIC, 0x07, struct rrdma_export)
#define RRDMA_IOCTL_UNEXPORT	_IOW(RRDMA_IOCTL_MAGIC, 0x08, struct rrdma_unexport)
#define RRDMA_IOCTL_IMPORT	_IOWR(RRDMA_IOCTL_MAGIC, 0x09, struct rrdma_import)
#define RRDMA_IOCTL_UNIMPORT	_IOW(RRDMA_IOCTL_MAGIC, 0x0a, struct rrdma_handle_arg)
#define RRDMA_IOCTL_UNLISTEN	_IOW(RRDMA_IOCTL_MAGIC, 0x0b, struct rrdma_handle_arg)
#define RRDMA_IOCTL_SUBMIT	_IOWR(RRDMA_IOCTL_MAGIC, 0x0c, struct rrdma_submit)
/*
 * One operation, waited for: returns its status (user_data is ignored).
 * It gets the checks of one operation of RRDMA_IOCTL_SUBMIT, and its wait
 * for a data lane.
 * A signal interrupts it only before the operation is posted; once posted,
 * it is waited for to its end (a fatal signal excepted).
 */
#define RRDMA_IOCTL_RW_SYNC	_IOW(RRDMA_IOCTL_MAGIC, 0x0d, struct rrdma_op)
#define RRDMA_IOCTL_REGION_REGISTER \
	_IOWR(RRDMA_IOCTL_MAGIC, 0x0e, struct rrdma_region_register)

/* rrdma_blk_map.flags */
#define RRDMA_BLK_MAP_RO	(1U << 0)	/* a read-only disk */

/**
 * struct rrdma_blk_map - argument of RRDMA_IOCTL_BLK_MAP
 * @import:	in: the import the disk reads and writes
 * @flags:	in: RRDMA_BLK_MAP_RO, or zero (else EINVAL)
 * @index:	out: N of the new disk /dev/rrdmabN
 * @reserved:	in: must be zero (else EINVAL)
 *
 * Needs CAP_SYS_ADMIN (EPERM).  An unknown @import: ENOENT.  The disk's
 * logical block size is the import's block size, which must be a power of
 * two from 512 to the page size, and one operation on the import must
 * move at least a page (@max_op_blocks of IMPORT): else EINVAL.  Its size
 * is the import's (EOVERFLOW if that does not fit a block device's
 * signed 64-bit byte size); 256 disks at most (ENOSPC).  Its 4 MiB
 * staging region counts against the caller's RLIMIT_MEMLOCK (ENOMEM past
 * it); a fatal signal while it is allocated: EINTR.  An export without
 * RRDMA_ACCESS_WRITE, or RRDMA_BLK_MAP_RO, gives a read-only disk.  The
 * disk is the kernel's: it has a connection of its own to the address
 * @import's connection was made to (EINVAL if a listener accepted that
 * connection), which reconnects for as long as the disk is mapped, with
 * the module's keepalive, and imports the same export over it; BLK_MAP
 * waits for both and fails as CONNECT and IMPORT do.  @import, its
 * connection and this file may then go: the disk stays until
 * RRDMA_IOCTL_BLK_UNMAP (from any file), which ends its connection; the
 * module cannot be unloaded meanwhile.  Several disks may map one
 * import.  /sys/block/rrdmabN/rrdma/ shows its peer, its connection's
 * state and reconnects, and its flushes.
 *
 * The disk has a volatile write cache: a write completes once sent
 * (RRDMA_OP_F_SENT), a flush (REQ_OP_FLUSH, fsync) once every write
 * completed before it is placed in the exporter's memory
 * (RRDMA_OP_FENCE), and a FUA write once placed.  A flush fails if
 * writes it covers were lost with a connection.  The exporter's memory is
 * itself volatile: it does not survive the exporter's host.  A read or
 * write whose connection fails under it is posted again once the
 * connection is back; while it is down, I/O waits up to the module
 * parameter blk_loss_timeout_ms, then fails until it is back; an I/O
 * also fails when the export is revoked.  Discard and
 * write-zeroes are not supported.
 */
struct rrdma_blk_map {
	__u32 import;
	__u32 flags;
	__u32 index;
	__u32 reserved;
};

/* rrdma_blk_unmap.flags */
#define RRDMA_BLK_UNMAP_FORCE	(1U << 0)	/* even while it is open */

/**
 * struct rrdma_blk_unmap - argument of RRDMA_IOCTL_BLK_UNMAP
 * @index:	in: N of /dev/rrdmabN
 * @flags:	in: RRDMA_BLK_UNMAP_FORCE, or zero
 *
 * Needs CAP_SYS_ADMIN (EPERM).  Any file may unmap any disk.  No such disk:
 * ENOENT; being mapped or unmapped: EBUSY; open (mounted, or used as swap)
 * without RRDMA_BLK_UNMAP_FORCE: EBUSY; unknown flags: EINVAL.  Once the
 * check passed the disk opens no more (ENXIO).  Forced, a file system
 * still mounted on it writes its dirty data back first, through the
 * disk's connection if that is up.  Returns once the disk is gone and its
 * requests have ended (failed, if they waited for a connection).
 */
struct rrdma_blk_unmap {
	__u32 index;
	__u32 flags;
};

#define RRDMA_IOCTL_BLK_MAP	_IOWR(RRDMA_IOCTL_MAGIC, 0x0f, struct rrdma_blk_map)
#define RRDMA_IOCTL_BLK_UNMAP	_IOW(RRDMA_IOCTL_MAGIC, 0x10, struct rrdma_blk_unmap)

/**
 * struct rrdma_status - argument of RRDMA_IOCTL_STATUS
 * @kind:	in: RRDMA_STATUS_CONNS, _EXPORTS, _IMPORTS or _DISKS
 * @flags:	in: must be zero
 * @records:	in: user pointer to @capacity records, @record_size apart,
 *		or 0 with @capacity 0 to count them
 * @capacity:	in: records the array has room for
 * @record_size: in: the caller's sizeof() of the kind's record, from its
 *		first size (RRDMA_STATUS_*_SIZE_VER0) to 4096; the kernel
 *		fills each record up to the smaller of both sizes and zeroes
 *		the rest
 * @count:	out: records there are, which may exceed @capacity (call
 *		again with more room: objects come and go between calls)
 * @reserved:	in: must be zero
 *
 * What an administrator sees of the host's rrdma objects (RRDMA_FEATURE_
 * STATUS; the CLI's `rrdma status`): every connection, every export with
 * each connection that imported it, every import, every rrdma-blk disk.
 * A caller with CAP_NET_ADMIN sees those of every file; another, those of
 * files opened by its own effective uid, and every disk.  Tokens and keys
 * never appear.  Each record is a snapshot taken under the object's lock;
 * the set is not one atomic snapshot.  Errors: EINVAL (an argument above),
 * EOVERFLOW (the array's range wraps), EFAULT, ENOMEM.
 */
struct rrdma_status {
	__u32 kind;
	__u32 flags;
	__u64 records;
	__u32 capacity;
	__u32 record_size;
	__u32 count;
	__u32 reserved;
};

#define RRDMA_STATUS_CONNS	1	/* struct rrdma_status_conn */
#define RRDMA_STATUS_EXPORTS	2	/* struct rrdma_status_export */
#define RRDMA_STATUS_IMPORTS	3	/* struct rrdma_status_import */
#define RRDMA_STATUS_DISKS	4	/* struct rrdma_status_disk */

/* rrdma_status_conn.state, rrdma_status_disk.state */
#define RRDMA_CONN_STATE_RESOLVING	1	/* address resolution */
#define RRDMA_CONN_STATE_ROUTE		2	/* route resolution */
#define RRDMA_CONN_STATE_CONNECTING	3	/* handshake, active side */
#define RRDMA_CONN_STATE_ACCEPTING	4	/* handshake, passive side */
#define RRDMA_CONN_STATE_CONNECTED	5
#define RRDMA_CONN_STATE_CLOSING	6	/* tearing down */
#define RRDMA_CONN_STATE_CLOSED		7
#define RRDMA_CONN_STATE_WAITING	8	/* before a reconnect attempt */

/* rrdma_status_conn.flags */
#define RRDMA_STATUS_CONN_ACTIVE	(1U << 0)	/* this side connected */
#define RRDMA_STATUS_CONN_RECONNECT	(1U << 1)	/* RRDMA_CONNECT_RECONNECT */
#define RRDMA_STATUS_CONN_DISK		(1U << 2)	/* a disk's, no file's */

/**
 * struct rrdma_status_conn - a connection (RRDMA_STATUS_CONNS)
 * @id:		unique on this host while the module is loaded, never reused
 * @pid:	the process that opened its file, in the caller's pid
 *		namespace (0: a disk's, not visible from there, or exited)
 * @uid:	the owner of its file, in the caller's user namespace
 * @peer:	the peer's address
 * @state:	RRDMA_CONN_STATE_*
 * @flags:	RRDMA_STATUS_CONN_*
 * @lanes:	data lanes granted: queue pairs beyond the connection's own,
 *		opened at either side's first operation
 * @reconnects:	reconnect attempts so far
 * @in_flight:	operations posted and not yet completed (on its imports,
 *		those given up with operations in flight included)
 * @failed:	operations that completed with an error
 * @imports:	imports made over it
 * @grants:	exports of this side the peer imported over it
 * @device:	index of its RDMA device (struct rrdma_device_info's), or ~0U
 * @version:	wire protocol version both sides speak; 0 until known
 */
struct rrdma_status_conn {
	__u64 id;
	__u32 pid;
	__u32 uid;
	struct rrdma_addr peer;
	__u32 state;
	__u32 flags;
	__u32 lanes;
	__u32 reconnects;
	__u64 in_flight;
	__u64 failed;
	__u32 imports;
	__u32 grants;
	__u32 device;
	__u32 version;
};

#define RRDMA_STATUS_CONN_SIZE_VER0	88

/* rrdma_status_export.flags */
#define RRDMA_STATUS_EXPORT_ONE_CONN	(1U << 0)	/* restricted to one */

/**
 * struct rrdma_status_export - an export and one importer
 *	(RRDMA_STATUS_EXPORTS): one record per connection that imported it,
 *	or one with @importer 0 when none did
 * @file:	its file's id (unique on this host)
 * @pid:	the process that opened the file
 * @uid:	the file's owner
 * @export:	the export's number in its file (not its token)
 * @access:	RRDMA_ACCESS_*
 * @block_size:	block size of its region
 * @flags:	RRDMA_STATUS_EXPORT_*
 * @nblocks:	blocks of its region
 * @importer:	the importing connection's id (struct rrdma_status_conn), or 0
 * @importer_peer: that connection's peer
 */
struct rrdma_status_export {
	__u64 file;
	__u32 pid;
	__u32 uid;
	__u32 export;
	__u32 access;
	__u32 block_size;
	__u32 flags;
	__u64 nblocks;
	__u64 importer;
	struct rrdma_addr importer_peer;
};

#define RRDMA_STATUS_EXPORT_SIZE_VER0	72

/* rrdma_status_import.flags */
#define RRDMA_STATUS_IMPORT_REVOKED	(1U << 0)	/* the export is gone */
#define RRDMA_STATUS_IMPORT_STALE	(1U << 1)	/* asked for again */

/**
 * struct rrdma_status_import - an import (RRDMA_STATUS_IMPORTS)
 * @conn:	its connection's id
 * @pid:	the process that opened the file
 * @uid:	the file's owner
 * @access:	RRDMA_ACCESS_* granted
 * @flags:	RRDMA_STATUS_IMPORT_*
 * @block_size:	block size (0 while the import is being made)
 * @in_flight:	operations on it posted and not yet completed
 * @nblocks:	blocks
 * @peer:	the exporting peer's address
 */
struct rrdma_status_import {
	__u64 conn;
	__u32 pid;
	__u32 uid;
	__u32 access;
	__u32 flags;
	__u32 block_size;
	__u32 in_flight;
	__u64 nblocks;
	struct rrdma_addr peer;
};

#define RRDMA_STATUS_IMPORT_SIZE_VER0	64

/* rrdma_status_disk.flags */
#define RRDMA_STATUS_DISK_RO		(1U << 0)	/* read-only */

/**
 * struct rrdma_status_disk - an rrdma-blk disk (RRDMA_STATUS_DISKS)
 * @index:	N of /dev/rrdmabN
 * @flags:	RRDMA_STATUS_DISK_*
 * @conn:	its connection's id
 * @block_size:	logical block size
 * @state:	RRDMA_CONN_STATE_* of its connection
 * @nblocks:	blocks
 * @reconnects:	reconnect attempts of its connection so far
 * @reserved:	zero
 */
struct rrdma_status_disk {
	__u32 index;
	__u32 flags;
	__u64 conn;
	__u32 block_size;
	__u32 state;
	__u64 nblocks;
	__u64 reconnects;
	__u64 reserved;
};

#define RRDMA_STATUS_DISK_SIZE_VER0	48

#define RRDMA_IOCTL_STATUS	_IOWR(RRDMA_IOCTL_MAGIC, 0x11, struct rrdma_status)

/*
 * io_uring (RRDMA_FEATURE_URING): an IORING_OP_URING_CMD on /dev/rrdma, on
 * a ring set up with IORING_SETUP_SQE128, with cmd_op RRDMA_URING_CMD_OP
 * and one struct rrdma_op at the start of the SQE's command area (its
 * user_data is ignored: the CQE carries the SQE's).  The operation gets the
 * checks of one operation of RRDMA_IOCTL_SUBMIT; the CQE's res is the bytes
 * moved, or -errno (the errnos of SUBMIT and of a completion).  A ring
 * without SQE128 gets -EINVAL, another cmd_op -ENOTTY.  The SQE's fields
 * the command does not use must be zero, or its CQE is -EINVAL and nothing
 * is posted: addr, len, uring_cmd_flags (IORING_URING_CMD_FIXED: no
 * registered buffers), buf_index, file_index and the command area's 32
 * bytes after the struct rrdma_op (clear the whole area: a ring slot keeps
 * its last SQE's bytes).  io_uring refuses a non-zero ioprio and __pad1
 * itself.  On a ring set up with IORING_SETUP_IOPOLL
 * (RRDMA_FEATURE_URING_IOPOLL) the command completes by polling:
 * io_uring_enter(IORING_ENTER_GETEVENTS) polls the completion queue of the
 * queue pair its operation went to, and posts the CQEs it finds there
 * without a wake-up (a poll that finds nothing for a while, see the module
 * parameters iopoll_spin and iopoll_spin_us, sleeps until the queue has
 * something); it returns once min_complete CQEs are ready, or earlier
 * when the task should reschedule (an IOPOLL ring ignores
 * IORING_ENTER_EXT_ARG's timeout), so a caller waits by asking again.
 * When the queues are full, or the operation waits for a data lane (see
 * RRDMA_IOCTL_SUBMIT), io_uring issues the command again from a worker
 * thread, which waits (a signal ends it with -EINTR).
 * While the connection reconnects, its CQE is -EAGAIN (on an IOPOLL ring
 * too).  Its completion does not go through read(2).
 */
#define RRDMA_URING_CMD_OP	_IOW(RRDMA_IOCTL_MAGIC, 0x40, struct rrdma_op)

#endif /* _UAPI_LINUX_RRDMA_H */
