/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma C shim: the hot path's structs, which Rust builds and the shim
 * posts (post.c) or fills (cq.c): one send-queue work request, flattened,
 * and one batch of operation completions.  Mirrored by rust/module/ffi/
 * wr.rs; included by rrdma_shim.h.
 */
#ifndef RRDMA_WR_SHIM_H
#define RRDMA_WR_SHIM_H

/* rrdma_shim_wr.opcode */
#define RRDMA_SHIM_WR_READ	1
#define RRDMA_SHIM_WR_WRITE	2
#define RRDMA_SHIM_WR_REG	3
#define RRDMA_SHIM_WR_SINK_REG	5	/* register a READ sink (iWARP) */
#define RRDMA_SHIM_WR_SINK_READ	6	/* READ_WITH_INV into a READ sink */
#define RRDMA_SHIM_WR_SINK_REG_DMA 7	/* a READ sink over a disk request's pages */
#define RRDMA_SHIM_WR_READ_DMA	8	/* READ into a disk request's pages */
#define RRDMA_SHIM_WR_WRITE_DMA	9	/* WRITE from a disk request's pages */

/*
 * Most SGEs a READ_DMA/WRITE_DMA gathers: a disk's largest request (128 KiB)
 * in 4 KiB pages, which rxe takes (siw takes 6; a device's own limit holds).
 */
#define RRDMA_SHIM_DMA_SGE	32

/* rrdma_shim_wr.access, for RRDMA_SHIM_WR_REG */
#define RRDMA_SHIM_ACCESS_LOCAL_WRITE	BIT(0)
#define RRDMA_SHIM_ACCESS_REMOTE_READ	BIT(1)
#define RRDMA_SHIM_ACCESS_REMOTE_WRITE	BIT(2)

struct rrdma_shim_dma_seg;

/**
 * struct rrdma_shim_wr - one send-queue work request, flattened
 * @opcode:	RRDMA_SHIM_WR_*
 * @signaled:	request a completion even on success
 * @slot:	operation slot whose completion this is (reported through
 *		rrdma_rust_ops_done()), or RRDMA_SHIM_NO_SLOT: completions go to
 *		rrdma_rust_quiet_done()
 * @sink:	SINK_REG/SINK_REG_DMA/SINK_READ: index of the READ sink (below
 *		the QP's nsinks; those from data_sinks on map one page:
 *		fences), else zero
 * @local_addr:	READ/WRITE: local address (the local MR's iova space);
 *		SINK_REG: region offset of the sink's first byte (inside @mr's
 *		chunk); SINK_REG_DMA: its offset in the request's bytes;
 *		READ_DMA/WRITE_DMA: the first byte's offset in @segs[0]
 * @lkey:	READ/WRITE: local key; SINK_REG_DMA, READ_DMA/WRITE_DMA: how
 *		many @segs
 * @len:	all but REG: bytes
 * @remote_addr: READ/WRITE/SINK_READ/READ_DMA/WRITE_DMA: remote address
 *		(the remote MR's iova space)
 * @rkey:	READ/WRITE/SINK_READ/READ_DMA/WRITE_DMA: remote key
 * @access:	REG: RRDMA_SHIM_ACCESS_*
 * @mr:		REG: the MR to register; SINK_REG: the chunk whose DMA mapping
 *		the sink maps, or NULL for the QP's scratch buffer (a fence)
 * @segs:	SINK_REG_DMA: a disk request's DMA segments (@lkey of them),
 *		of which the sink maps bytes @local_addr to @local_addr + @len
 *		(checked by Rust: no gap, no more pages than a sink maps);
 *		READ_DMA/WRITE_DMA: the segments it scatters into or
 *		gathers from (@lkey of them, at most the QP's
 *		rrdma_shim_qp_dma_sge()), with the local DMA key of the QP's
 *		PD, which mapped them: @len
 *		bytes from byte @local_addr of the first on, each next one
 *		from its start (abi::ops::dma_gathers)
 *
 * iWARP places an RDMA READ's response as a tagged write into its sink, so
 * the sink must allow remote write.  A sink is registered for one READ
 * (SINK_REG: a fresh key, exactly the READ's bytes, local and remote
 * write) and the READ invalidates it when it completes (SINK_READ, an
 * IB_WR_RDMA_READ_WITH_INV): the peer can write there only while its
 * answer is due.  A READ that fails takes the QP down, and the sinks go
 * with it.
 */
#define RRDMA_SHIM_NO_SLOT	0xffffffffU
/*
 * @slot of a WRITE signaled only so that the provider copies its bytes
 * before it completes the operation (a write that completes once sent,
 * whose buffer the caller may then reuse): siw sends an unsignaled request
 * of a page or more from the pages themselves, which TCP keeps, and may
 * send again, until they are acknowledged.  Its completion is nothing.
 */
#define RRDMA_SHIM_COPIED_SLOT	0xfffffffeU

struct rrdma_shim_wr {
	__u32 opcode;
	__u32 signaled;
	__u32 slot;
	__u32 sink;
	__u64 local_addr;
	__u32 lkey;
	__u32 len;
	__u64 remote_addr;
	__u32 rkey;
	__u32 access;
	union {
		struct rrdma_shim_mr *mr;
		const struct rrdma_shim_dma_seg *segs;
	};
};

/*
 * One operation completion of a batch (rrdma_rust_ops_done()): the slot its
 * work request carried and the work completion's status.
 */
struct rrdma_shim_done {
	__u32 slot;
	__u32 status;
};

/* Most completions one poll of a send CQ takes, and so one batch holds. */
#define RRDMA_SHIM_POLL_BATCH	16

#endif /* RRDMA_WR_SHIM_H */
