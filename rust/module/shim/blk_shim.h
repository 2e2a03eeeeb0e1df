/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma C shim: the interface of rrdma-blk's disks (blk.c, blk_sysfs.c)
 * with Rust (rust/module/blk.rs, ffi/blk.rs).  Included by rrdma_shim.h,
 * whose types (struct rrdma_shim_addr) it uses.
 */
#ifndef RRDMA_BLK_SHIM_H
#define RRDMA_BLK_SHIM_H

/*
 * blk.c: rrdma-blk's disks.  The shape of a disk (from abi::blkdev::DiskPlan)
 * and one request as rrdma_rust_blk_queue() sees it.
 */
struct rrdma_shim_blk_shape {
	__u64 sectors;
	__u32 block_size;
	__u32 io_bytes;
	__u32 depth;
	__u32 read_only;
};

/* rrdma_shim_blk_io.op */
#define RRDMA_SHIM_BLK_READ		0
#define RRDMA_SHIM_BLK_WRITE		1	/* completes once sent */
#define RRDMA_SHIM_BLK_WRITE_FUA	2	/* completes once placed */
#define RRDMA_SHIM_BLK_FLUSH		3	/* earlier writes placed */

struct rrdma_shim_blk_io {
	__u64 pos;	/* byte offset on the disk */
	__u32 len;	/* bytes (0: a flush) */
	__u32 tag;	/* its staging slot */
	__u32 op;	/* RRDMA_SHIM_BLK_* */
	__u32 zero_copy; /* its bytes are in its pages, not its slot */
	__u32 dying;	/* the disk is being removed: fail, do not wait */
	__u32 pad;
};

/*
 * rrdma_rust_blk_queue()'s answer to a request offered with zero_copy:
 * its queue pair cannot reach the request's pages (an iWARP READ whose
 * pages one sink cannot map: a gap between them, more pages than a sink
 * maps; more work requests than an operation may take; a device that
 * cannot map them): stage its bytes in its slot and queue it again.
 */
#define RRDMA_SHIM_BLK_STAGE		1

/* Most segments of a request (the queue's max_segments). */
#define RRDMA_SHIM_BLK_SEGS		64

/* One DMA segment of a request (rrdma_shim_blk_dma_map()). */
struct rrdma_shim_dma_seg {
	__u64 addr;
	__u32 len;
	__u32 pad;
};

struct rrdma_blk;
struct request;
struct rrdma_blk *rrdma_shim_blk_create(void *owner, u32 index,
					const struct rrdma_shim_blk_shape *shape,
					struct page **pages, int *err);
void rrdma_shim_blk_destroy(struct rrdma_blk *b);
int rrdma_shim_blk_close(struct rrdma_blk *b, bool force);
void rrdma_shim_blk_end(struct request *rq, int status);
struct ib_pd;
int rrdma_shim_blk_dma_map(struct request *rq, struct ib_pd *pd,
			   const struct rrdma_shim_dma_seg **segs, u32 *nsegs);
void rrdma_shim_blk_dma_unmap(struct request *rq);
bool rrdma_shim_capable_sys_admin(void);

/* blk_sysfs.c: a disk's /sys/block/rrdmabN/rrdma/ files. */
#define RRDMA_SHIM_BLK_UP		0	/* connected */
#define RRDMA_SHIM_BLK_RECONNECTING	1	/* failed, connecting again */
#define RRDMA_SHIM_BLK_DOWN		2	/* ended for good */
struct rrdma_shim_blk_status {
	struct rrdma_shim_addr peer;
	__u64 fences;
	__u64 reconnects;
	__u64 zero_copy;
	__u64 staged;
	__u64 on_lanes;
	__u32 state;	/* RRDMA_SHIM_BLK_UP, _RECONNECTING, _DOWN */
	__u32 pad;
};

struct gendisk;
struct attribute_group;
extern const struct attribute_group *rrdma_shim_blk_groups[];
void *rrdma_shim_blk_owner(struct gendisk *disk);
/* Rust: process context (a sysfs read); @out is zeroed. */
void rrdma_rust_blk_status(void *owner, struct rrdma_shim_blk_status *out);
/* Rust: process context (a sysfs write): the disk's connection reconnects. */
void rrdma_rust_blk_reset(void *owner);

void rrdma_shim_module_get(void);
void rrdma_shim_module_put(void);
/* Rust: process context (blk-mq's dispatch of a BLK_MQ_F_BLOCKING queue). */
int rrdma_rust_blk_queue(void *owner, struct request *rq,
			 const struct rrdma_shim_blk_io *io);

#endif /* RRDMA_BLK_SHIM_H */
