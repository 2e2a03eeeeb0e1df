// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: the numbers of the interface between C and Rust, for Rust,
 * as the C compiler sees them.  Never linked: Kbuild compiles this file to
 * assembly, as the kernel's asm-offsets.c, and turns every DEFINE() into a
 * Rust constant of the generated rrdma_shim_layout.rs, which
 * rust/module/ffi/layout.rs includes and checks the Rust side against at
 * compile time.  So:
 *  - every struct that crosses C and Rust has its size and the offset of
 *    each field written once, here: static_assert()s check C's layout
 *    against them, and main() hands C's to ffi/layout.rs, which checks
 *    Rust's;
 *  - every constant Rust shares with C has one source: rrdma_shim.h's, or
 *    the kernel's for what the kernel defines (rdma_cm events, work
 *    completion statuses, device attributes); Rust takes the first from
 *    here and checks its copies of the second (rust/abi, shared with
 *    userspace) against them.
 */
#include <linux/build_bug.h>
#include <linux/kbuild.h>
#include <linux/stddef.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "rrdma_shim.h"
#include "uapi/rrdma.h"

/*
 * The structs that cross C and Rust (by pointer, both ways): the size and
 * each field's offset, written once, here.
 */
static_assert(sizeof(struct rrdma_shim_device_attr) == 96);
static_assert(offsetof(struct rrdma_shim_device_attr, name) == 0);
static_assert(offsetof(struct rrdma_shim_device_attr, index) == 64);
static_assert(offsetof(struct rrdma_shim_device_attr, node_type) == 68);
static_assert(offsetof(struct rrdma_shim_device_attr, port_count) == 72);
static_assert(offsetof(struct rrdma_shim_device_attr, port_state) == 76);
static_assert(offsetof(struct rrdma_shim_device_attr, link_layer) == 80);
static_assert(offsetof(struct rrdma_shim_device_attr, caps) == 84);
static_assert(offsetof(struct rrdma_shim_device_attr, node_guid) == 88);

static_assert(sizeof(struct rrdma_shim_device_limits) == 28);
static_assert(offsetof(struct rrdma_shim_device_limits, max_qp_wr) == 0);
static_assert(offsetof(struct rrdma_shim_device_limits, max_cqe) == 4);
static_assert(offsetof(struct rrdma_shim_device_limits, max_send_sge) == 8);
static_assert(offsetof(struct rrdma_shim_device_limits, max_recv_sge) == 12);
static_assert(offsetof(struct rrdma_shim_device_limits, max_sge_rd) == 16);
static_assert(offsetof(struct rrdma_shim_device_limits, max_fast_reg_pages) == 20);
static_assert(offsetof(struct rrdma_shim_device_limits, max_mr) == 24);

static_assert(sizeof(struct rrdma_shim_vma_info) == 40);
static_assert(offsetof(struct rrdma_shim_vma_info, start) == 0);
static_assert(offsetof(struct rrdma_shim_vma_info, end) == 8);
static_assert(offsetof(struct rrdma_shim_vma_info, pgoff) == 16);
static_assert(offsetof(struct rrdma_shim_vma_info, shared) == 24);
static_assert(offsetof(struct rrdma_shim_vma_info, exec) == 28);
static_assert(offsetof(struct rrdma_shim_vma_info, page_shift) == 32);
static_assert(offsetof(struct rrdma_shim_vma_info, pad) == 36);

static_assert(sizeof(struct rrdma_shim_addr) == 24);
static_assert(offsetof(struct rrdma_shim_addr, family) == 0);
static_assert(offsetof(struct rrdma_shim_addr, port) == 2);
static_assert(offsetof(struct rrdma_shim_addr, scope_id) == 4);
static_assert(offsetof(struct rrdma_shim_addr, addr) == 8);

static_assert(sizeof(struct rrdma_shim_wr) == 56);
static_assert(offsetof(struct rrdma_shim_wr, opcode) == 0);
static_assert(offsetof(struct rrdma_shim_wr, signaled) == 4);
static_assert(offsetof(struct rrdma_shim_wr, slot) == 8);
static_assert(offsetof(struct rrdma_shim_wr, sink) == 12);
static_assert(offsetof(struct rrdma_shim_wr, local_addr) == 16);
static_assert(offsetof(struct rrdma_shim_wr, lkey) == 24);
static_assert(offsetof(struct rrdma_shim_wr, len) == 28);
static_assert(offsetof(struct rrdma_shim_wr, remote_addr) == 32);
static_assert(offsetof(struct rrdma_shim_wr, rkey) == 40);
static_assert(offsetof(struct rrdma_shim_wr, access) == 44);
static_assert(offsetof(struct rrdma_shim_wr, mr) == 48);
static_assert(offsetof(struct rrdma_shim_wr, segs) == 48);

static_assert(sizeof(struct rrdma_shim_done) == 8);
static_assert(offsetof(struct rrdma_shim_done, slot) == 0);
static_assert(offsetof(struct rrdma_shim_done, status) == 4);

static_assert(sizeof(struct rrdma_op) == 48);
static_assert(offsetof(struct rrdma_op, opcode) == 0);
static_assert(offsetof(struct rrdma_op, flags) == 4);
static_assert(offsetof(struct rrdma_op, remote) == 8);
static_assert(offsetof(struct rrdma_op, local) == 12);
static_assert(offsetof(struct rrdma_op, remote_block) == 16);
static_assert(offsetof(struct rrdma_op, local_block) == 24);
static_assert(offsetof(struct rrdma_op, count) == 32);
static_assert(offsetof(struct rrdma_op, reserved) == 36);
static_assert(offsetof(struct rrdma_op, user_data) == 40);

static_assert(sizeof(struct rrdma_shim_blk_shape) == 24);
static_assert(offsetof(struct rrdma_shim_blk_shape, sectors) == 0);
static_assert(offsetof(struct rrdma_shim_blk_shape, block_size) == 8);
static_assert(offsetof(struct rrdma_shim_blk_shape, io_bytes) == 12);
static_assert(offsetof(struct rrdma_shim_blk_shape, depth) == 16);
static_assert(offsetof(struct rrdma_shim_blk_shape, read_only) == 20);

static_assert(sizeof(struct rrdma_shim_blk_io) == 32);
static_assert(offsetof(struct rrdma_shim_blk_io, pos) == 0);
static_assert(offsetof(struct rrdma_shim_blk_io, len) == 8);
static_assert(offsetof(struct rrdma_shim_blk_io, tag) == 12);
static_assert(offsetof(struct rrdma_shim_blk_io, op) == 16);
static_assert(offsetof(struct rrdma_shim_blk_io, zero_copy) == 20);
static_assert(offsetof(struct rrdma_shim_blk_io, dying) == 24);
static_assert(sizeof(struct rrdma_shim_dma_seg) == 16);
static_assert(offsetof(struct rrdma_shim_dma_seg, addr) == 0);
static_assert(offsetof(struct rrdma_shim_dma_seg, len) == 8);

static_assert(sizeof(struct rrdma_blk_map) == 16);
static_assert(offsetof(struct rrdma_blk_map, import) == 0);
static_assert(offsetof(struct rrdma_blk_map, flags) == 4);
static_assert(offsetof(struct rrdma_blk_map, index) == 8);
static_assert(offsetof(struct rrdma_blk_map, reserved) == 12);
static_assert(sizeof(struct rrdma_blk_unmap) == 8);
static_assert(offsetof(struct rrdma_blk_unmap, index) == 0);
static_assert(offsetof(struct rrdma_blk_unmap, flags) == 4);

int main(void)
{
	/* C's layouts (as asserted above), for Rust's to be checked against. */
	DEFINE(device_attr__SIZE, sizeof(struct rrdma_shim_device_attr));
	OFFSET(device_attr__name, rrdma_shim_device_attr, name);
	OFFSET(device_attr__index, rrdma_shim_device_attr, index);
	OFFSET(device_attr__node_type, rrdma_shim_device_attr, node_type);
	OFFSET(device_attr__port_count, rrdma_shim_device_attr, port_count);
	OFFSET(device_attr__port_state, rrdma_shim_device_attr, port_state);
	OFFSET(device_attr__link_layer, rrdma_shim_device_attr, link_layer);
	OFFSET(device_attr__caps, rrdma_shim_device_attr, caps);
	OFFSET(device_attr__node_guid, rrdma_shim_device_attr, node_guid);

	DEFINE(device_limits__SIZE, sizeof(struct rrdma_shim_device_limits));
	OFFSET(device_limits__max_qp_wr, rrdma_shim_device_limits, max_qp_wr);
	OFFSET(device_limits__max_cqe, rrdma_shim_device_limits, max_cqe);
	OFFSET(device_limits__max_send_sge, rrdma_shim_device_limits, max_send_sge);
	OFFSET(device_limits__max_recv_sge, rrdma_shim_device_limits, max_recv_sge);
	OFFSET(device_limits__max_sge_rd, rrdma_shim_device_limits, max_sge_rd);
	OFFSET(device_limits__max_fast_reg_pages, rrdma_shim_device_limits, max_fast_reg_pages);
	OFFSET(device_limits__max_mr, rrdma_shim_device_limits, max_mr);

	DEFINE(vma_info__SIZE, sizeof(struct rrdma_shim_vma_info));
	OFFSET(vma_info__start, rrdma_shim_vma_info, start);
	OFFSET(vma_info__end, rrdma_shim_vma_info, end);
	OFFSET(vma_info__pgoff, rrdma_shim_vma_info, pgoff);
	OFFSET(vma_info__shared, rrdma_shim_vma_info, shared);
	OFFSET(vma_info__exec, rrdma_shim_vma_info, exec);
	OFFSET(vma_info__page_shift, rrdma_shim_vma_info, page_shift);
	OFFSET(vma_info__pad, rrdma_shim_vma_info, pad);

	DEFINE(addr__SIZE, sizeof(struct rrdma_shim_addr));
	OFFSET(addr__family, rrdma_shim_addr, family);
	OFFSET(addr__port, rrdma_shim_addr, port);
	OFFSET(addr__scope_id, rrdma_shim_addr, scope_id);
	OFFSET(addr__addr, rrdma_shim_addr, addr);

	DEFINE(blk_shape__SIZE, sizeof(struct rrdma_shim_blk_shape));
	OFFSET(blk_shape__sectors, rrdma_shim_blk_shape, sectors);
	OFFSET(blk_shape__block_size, rrdma_shim_blk_shape, block_size);
	OFFSET(blk_shape__io_bytes, rrdma_shim_blk_shape, io_bytes);
	OFFSET(blk_shape__depth, rrdma_shim_blk_shape, depth);
	OFFSET(blk_shape__read_only, rrdma_shim_blk_shape, read_only);

	DEFINE(blk_io__SIZE, sizeof(struct rrdma_shim_blk_io));
	OFFSET(blk_io__pos, rrdma_shim_blk_io, pos);
	OFFSET(blk_io__len, rrdma_shim_blk_io, len);
	OFFSET(blk_io__tag, rrdma_shim_blk_io, tag);
	OFFSET(blk_io__op, rrdma_shim_blk_io, op);
	DEFINE(RRDMA_SHIM_BLK_READ, RRDMA_SHIM_BLK_READ);
	DEFINE(RRDMA_SHIM_BLK_WRITE, RRDMA_SHIM_BLK_WRITE);
	DEFINE(RRDMA_SHIM_BLK_WRITE_FUA, RRDMA_SHIM_BLK_WRITE_FUA);
	DEFINE(RRDMA_SHIM_BLK_FLUSH, RRDMA_SHIM_BLK_FLUSH);
	OFFSET(blk_io__zero_copy, rrdma_shim_blk_io, zero_copy);
	OFFSET(blk_io__dying, rrdma_shim_blk_io, dying);
	OFFSET(blk_io__pad, rrdma_shim_blk_io, pad);
	DEFINE(RRDMA_SHIM_BLK_STAGE, RRDMA_SHIM_BLK_STAGE);
	DEFINE(dma_seg__SIZE, sizeof(struct rrdma_shim_dma_seg));
	OFFSET(dma_seg__addr, rrdma_shim_dma_seg, addr);
	OFFSET(dma_seg__len, rrdma_shim_dma_seg, len);

	DEFINE(blk_status__SIZE, sizeof(struct rrdma_shim_blk_status));
	OFFSET(blk_status__peer, rrdma_shim_blk_status, peer);
	OFFSET(blk_status__fences, rrdma_shim_blk_status, fences);
	OFFSET(blk_status__reconnects, rrdma_shim_blk_status, reconnects);
	OFFSET(blk_status__zero_copy, rrdma_shim_blk_status, zero_copy);
	OFFSET(blk_status__staged, rrdma_shim_blk_status, staged);
	OFFSET(blk_status__on_lanes, rrdma_shim_blk_status, on_lanes);
	OFFSET(blk_status__state, rrdma_shim_blk_status, state);
	OFFSET(blk_status__pad, rrdma_shim_blk_status, pad);
	DEFINE(RRDMA_SHIM_BLK_UP, RRDMA_SHIM_BLK_UP);
	DEFINE(RRDMA_SHIM_BLK_RECONNECTING, RRDMA_SHIM_BLK_RECONNECTING);
	DEFINE(RRDMA_SHIM_BLK_DOWN, RRDMA_SHIM_BLK_DOWN);

	DEFINE(blk_map__SIZE, sizeof(struct rrdma_blk_map));
	DEFINE(blk_unmap__SIZE, sizeof(struct rrdma_blk_unmap));

	/* 56 with 4-byte pointers too: the u64 fields align it to 8. */
	DEFINE(wr__SIZE, sizeof(struct rrdma_shim_wr));
	OFFSET(wr__opcode, rrdma_shim_wr, opcode);
	OFFSET(wr__signaled, rrdma_shim_wr, signaled);
	OFFSET(wr__slot, rrdma_shim_wr, slot);
	OFFSET(wr__sink, rrdma_shim_wr, sink);
	OFFSET(wr__local_addr, rrdma_shim_wr, local_addr);
	OFFSET(wr__lkey, rrdma_shim_wr, lkey);
	OFFSET(wr__len, rrdma_shim_wr, len);
	OFFSET(wr__remote_addr, rrdma_shim_wr, remote_addr);
	OFFSET(wr__rkey, rrdma_shim_wr, rkey);
	OFFSET(wr__access, rrdma_shim_wr, access);
	OFFSET(wr__mr, rrdma_shim_wr, mr);
	DEFINE(RRDMA_SHIM_WR_SINK_REG_DMA, RRDMA_SHIM_WR_SINK_REG_DMA);
	DEFINE(RRDMA_SHIM_WR_READ_DMA, RRDMA_SHIM_WR_READ_DMA);
	DEFINE(RRDMA_SHIM_WR_WRITE_DMA, RRDMA_SHIM_WR_WRITE_DMA);

	DEFINE(done__SIZE, sizeof(struct rrdma_shim_done));
	OFFSET(done__slot, rrdma_shim_done, slot);
	OFFSET(done__status, rrdma_shim_done, status);

	/* The UAPI's, handed by shim/uring.c to rrdma_rust_file_uring_op(). */
	DEFINE(op__SIZE, sizeof(struct rrdma_op));
	OFFSET(op__opcode, rrdma_op, opcode);
	OFFSET(op__flags, rrdma_op, flags);
	OFFSET(op__remote, rrdma_op, remote);
	OFFSET(op__local, rrdma_op, local);
	OFFSET(op__remote_block, rrdma_op, remote_block);
	OFFSET(op__local_block, rrdma_op, local_block);
	OFFSET(op__count, rrdma_op, count);
	OFFSET(op__reserved, rrdma_op, reserved);
	OFFSET(op__user_data, rrdma_op, user_data);

	/* rrdma_shim.h's constants. */
	DEFINE(RRDMA_SHIM_NAME_MAX, RRDMA_SHIM_NAME_MAX);
	DEFINE(RRDMA_SHIM_CAP_MEM_MGT_EXT, RRDMA_SHIM_CAP_MEM_MGT_EXT);
	DEFINE(RRDMA_SHIM_WR_READ, RRDMA_SHIM_WR_READ);
	DEFINE(RRDMA_SHIM_WR_WRITE, RRDMA_SHIM_WR_WRITE);
	DEFINE(RRDMA_SHIM_WR_REG, RRDMA_SHIM_WR_REG);
	DEFINE(RRDMA_SHIM_WR_SINK_REG, RRDMA_SHIM_WR_SINK_REG);
	DEFINE(RRDMA_SHIM_WR_SINK_READ, RRDMA_SHIM_WR_SINK_READ);
	DEFINE(RRDMA_SHIM_ACCESS_LOCAL_WRITE, RRDMA_SHIM_ACCESS_LOCAL_WRITE);
	DEFINE(RRDMA_SHIM_ACCESS_REMOTE_READ, RRDMA_SHIM_ACCESS_REMOTE_READ);
	DEFINE(RRDMA_SHIM_ACCESS_REMOTE_WRITE, RRDMA_SHIM_ACCESS_REMOTE_WRITE);
	/* As u64: the assembler would print the unsigned int as -1. */
	DEFINE(RRDMA_SHIM_NO_SLOT, (u64)RRDMA_SHIM_NO_SLOT);
	DEFINE(RRDMA_SHIM_COPIED_SLOT, (u64)RRDMA_SHIM_COPIED_SLOT);
	DEFINE(RRDMA_SHIM_POLL_BATCH, RRDMA_SHIM_POLL_BATCH);
	DEFINE(RRDMA_SHIM_CTRL_MAX, RRDMA_SHIM_CTRL_MAX);
	DEFINE(RRDMA_SHIM_FAIL_ACCEPT, RRDMA_SHIM_FAIL_ACCEPT);
	DEFINE(RRDMA_SHIM_FAIL_LANE_ACCEPT, RRDMA_SHIM_FAIL_LANE_ACCEPT);

	/* The rdma_cm events rrdma_rust_conn_event() tells apart. */
	DEFINE(RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_RESOLVED);
	DEFINE(RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ADDR_ERROR);
	DEFINE(RDMA_CM_EVENT_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED);
	DEFINE(RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_ROUTE_ERROR);
	DEFINE(RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_CONNECT_ERROR);
	DEFINE(RDMA_CM_EVENT_UNREACHABLE, RDMA_CM_EVENT_UNREACHABLE);
	DEFINE(RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_REJECTED);
	DEFINE(RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_ESTABLISHED);
	DEFINE(RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DISCONNECTED);
	DEFINE(RDMA_CM_EVENT_DEVICE_REMOVAL, RDMA_CM_EVENT_DEVICE_REMOVAL);

	/* The work completion statuses rust/abi/src/ops.rs (wc) tells apart. */
	DEFINE(IB_WC_SUCCESS, IB_WC_SUCCESS);
	DEFINE(IB_WC_LOC_QP_OP_ERR, IB_WC_LOC_QP_OP_ERR);
	DEFINE(IB_WC_LOC_PROT_ERR, IB_WC_LOC_PROT_ERR);
	DEFINE(IB_WC_WR_FLUSH_ERR, IB_WC_WR_FLUSH_ERR);
	DEFINE(IB_WC_BAD_RESP_ERR, IB_WC_BAD_RESP_ERR);
	DEFINE(IB_WC_REM_INV_REQ_ERR, IB_WC_REM_INV_REQ_ERR);
	DEFINE(IB_WC_REM_ACCESS_ERR, IB_WC_REM_ACCESS_ERR);
	DEFINE(IB_WC_REM_OP_ERR, IB_WC_REM_OP_ERR);
	DEFINE(IB_WC_RETRY_EXC_ERR, IB_WC_RETRY_EXC_ERR);
	DEFINE(IB_WC_RNR_RETRY_EXC_ERR, IB_WC_RNR_RETRY_EXC_ERR);

	/*
	 * Device attributes rrdma_shim_device_query() passes on as the kernel
	 * has them, and the UAPI (rust/abi/src/uapi.rs) defines alike.
	 */
	DEFINE(RDMA_NODE_IB_CA, RDMA_NODE_IB_CA);
	DEFINE(RDMA_NODE_IB_SWITCH, RDMA_NODE_IB_SWITCH);
	DEFINE(RDMA_NODE_IB_ROUTER, RDMA_NODE_IB_ROUTER);
	DEFINE(RDMA_NODE_RNIC, RDMA_NODE_RNIC);
	DEFINE(RDMA_NODE_USNIC, RDMA_NODE_USNIC);
	DEFINE(RDMA_NODE_USNIC_UDP, RDMA_NODE_USNIC_UDP);
	DEFINE(RDMA_NODE_UNSPECIFIED, RDMA_NODE_UNSPECIFIED);
	DEFINE(IB_PORT_NOP, IB_PORT_NOP);
	DEFINE(IB_PORT_DOWN, IB_PORT_DOWN);
	DEFINE(IB_PORT_INIT, IB_PORT_INIT);
	DEFINE(IB_PORT_ARMED, IB_PORT_ARMED);
	DEFINE(IB_PORT_ACTIVE, IB_PORT_ACTIVE);
	DEFINE(IB_PORT_ACTIVE_DEFER, IB_PORT_ACTIVE_DEFER);
	DEFINE(IB_LINK_LAYER_UNSPECIFIED, IB_LINK_LAYER_UNSPECIFIED);
	DEFINE(IB_LINK_LAYER_INFINIBAND, IB_LINK_LAYER_INFINIBAND);
	DEFINE(IB_LINK_LAYER_ETHERNET, IB_LINK_LAYER_ETHERNET);
	return 0;
}
