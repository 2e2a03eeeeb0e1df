// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma-blk's block layer side (RRDMA_IOCTL_BLK_MAP): a blk-mq disk whose
 * requests Rust posts as operations on an import.
 *
 * Why C: the kernel crate's block::mq has no request sector, length or
 * segments, no completion with an error and no read-only or queue limits on
 * both 6.12 and 7.x, and its types changed between them.  The interface is
 * four calls and one callback:
 *  - rrdma_shim_blk_create() builds and adds the disk; @owner is what
 *    rrdma_rust_blk_queue() gets back; @pages the staging region's pages,
 *    QUEUE_DEPTH slots of @io_bytes each;
 *  - rrdma_rust_blk_queue() (Rust) posts one request: 0 once posted (its
 *    completion calls rrdma_shim_blk_end()), -EAGAIN when the connection
 *    has no room now (blk-mq retries), another -errno to fail it.  A read
 *    or write is first offered with zero copy: its bytes move between its
 *    own pages and the peer, which rrdma_shim_blk_dma_map() maps for the
 *    device of the queue pair it is posted on (named with the local DMA
 *    key, or by an iWARP READ's sink registered over them), inside the
 *    posting; RRDMA_SHIM_BLK_STAGE says that queue pair cannot reach them
 *    (a sink cannot map pages with a gap between them or more pages than
 *    it has; more work requests than an operation may take; a device that
 *    cannot map them), and its bytes then
 *    go through the slot of its tag: one copy on the initiator, none on
 *    the exporter either way;
 *  - rrdma_shim_blk_end() ends a request with a status; any context,
 *    softirq included.  Its DMA mapping, if any, goes first.  A read or
 *    write that failed with its connection
 *    (ECONNRESET, ECONNABORTED, ETIMEDOUT) goes back to the queue, to be
 *    posted again once the connection is back (or to fail then, if it is
 *    gone): its own bytes go again.  A flush never does: the writes it
 *    should have placed may be lost, which only its failure can say.
 *    Otherwise the request completes through blk_mq_complete_request(),
 *    whose callback copies a staged read's bytes from its slot and ends
 *    it, in the block layer's softirq when it can (not under rrdma's locks);
 *  - rrdma_shim_blk_dma_map(): see above;
 *  - rrdma_shim_blk_close(): EBUSY while the disk is open (unless forced:
 *    then the disk is dying first), else no open succeeds any more
 *    (ENXIO);
 *  - rrdma_shim_blk_destroy(), which first marks the disk dying: its
 *    requests then fail rather than wait for a connection (io->dying).
 * The queue is BLK_MQ_F_BLOCKING: posting takes the connection's mutex.
 * Posting runs under memalloc_noio_save(): an allocation it makes (a first
 * registration) does not recurse into reclaim's I/O, which may be this
 * disk's (swap, writeback).
 */

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/capability.h>
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/sched/mm.h>

#include <rdma/ib_verbs.h>

#include "rrdma_shim.h"

/*
 * A request's staging slot, set when it is queued: byte @base on; its
 * kind; its status once its operation has ended; whether its bytes went
 * through the slot (@staged).  Zero copy: its segments (@sg, @nsg of them
 * as blk_rq_map_sg() made them) and, while mapped for @dma_dev (NULL: not
 * mapped), their @ndma DMA segments @dma.
 */
struct rrdma_blk_pdu {
	struct page **pages;
	size_t base;
	u32 op;
	int status;
	bool staged;
	struct ib_device *dma_dev;
	int nsg;
	int ndma;
	struct scatterlist sg[RRDMA_SHIM_BLK_SEGS];
	struct rrdma_shim_dma_seg dma[RRDMA_SHIM_BLK_SEGS];
};

struct rrdma_blk {
	struct blk_mq_tag_set set;
	struct gendisk *disk;
	void *owner;
	struct page **pages;
	u32 io_bytes;
	bool dying;
	/* No new openers: set under the disk's open_mutex (rrdma_shim_blk_close()). */
	bool closed;
};

/* Under the disk's open_mutex, as rrdma_shim_blk_close() sets closed. */
static int rrdma_blk_open(struct gendisk *disk, blk_mode_t mode)
{
	struct rrdma_blk *b = disk->queue->queuedata;

	return b->closed ? -ENXIO : 0;
}

static const struct block_device_operations rrdma_blk_fops = {
	.owner = THIS_MODULE,
	.open = rrdma_blk_open,
};

/*
 * Copies the request's bytes between its segments and its slot; @to_rq:
 * slot to request (a read), else request to slot (a write).
 */
static void rrdma_blk_copy(struct request *rq, bool to_rq)
{
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);
	struct req_iterator iter;
	struct bio_vec bv;
	size_t off = pdu->base;

	rq_for_each_segment(bv, rq, iter) {
		size_t done = 0;

		while (done < bv.bv_len) {
			size_t in_page = offset_in_page(off);
			size_t n = min_t(size_t, bv.bv_len - done,
					 PAGE_SIZE - in_page);
			char *s = kmap_local_page(pdu->pages[off >> PAGE_SHIFT]);
			char *b = bvec_kmap_local(&bv);

			if (to_rq)
				memcpy(b + done, s + in_page, n);
			else
				memcpy(s + in_page, b + done, n);
			kunmap_local(b);
			kunmap_local(s);
			done += n;
			off += n;
		}
	}
}

static enum dma_data_direction rrdma_blk_dma_dir(struct request *rq)
{
	return rq_data_dir(rq) == WRITE ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
}

/*
 * Unmaps the request's segments if they are mapped; any context.  Rust
 * unmaps a request it does not post before it releases the locks that
 * keep the device (rrdma_shim_blk_dma_unmap()); its completion, or the
 * teardown's once the queue pair is gone, ends a posted one
 * (rrdma_shim_blk_end()), before the device's removal returns.
 */
static void rrdma_blk_dma_unmap(struct request *rq)
{
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);

	if (!pdu->dma_dev)
		return;
	ib_dma_unmap_sg(pdu->dma_dev, pdu->sg, pdu->nsg, rrdma_blk_dma_dir(rq));
	pdu->dma_dev = NULL;
}

void rrdma_shim_blk_dma_unmap(struct request *rq)
{
	rrdma_blk_dma_unmap(rq);
}

/*
 * Maps @rq's segments for the device of @pd, once per posting (the
 * attempts of one post on the same device share it), and gives them with
 * @pd's local DMA key: what its work requests name.  Called by Rust
 * inside the posting, under a path's lock (BH off); the request is
 * started and offered with zero copy.  -ENOMEM when the device cannot map
 * them (Rust stages the request instead).
 */
int rrdma_shim_blk_dma_map(struct request *rq, struct ib_pd *pd,
			   const struct rrdma_shim_dma_seg **segs, u32 *nsegs)
{
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);
	struct ib_device *dev = pd->device;
	struct scatterlist *sg;
	int i, n;

	if (pdu->staged || !pdu->nsg)
		return -EINVAL;
	if (pdu->dma_dev != dev) {
		rrdma_blk_dma_unmap(rq);
		n = ib_dma_map_sg(dev, pdu->sg, pdu->nsg, rrdma_blk_dma_dir(rq));
		if (!n)
			return -ENOMEM;
		for_each_sg(pdu->sg, sg, n, i) {
			pdu->dma[i].addr = sg_dma_address(sg);
			pdu->dma[i].len = sg_dma_len(sg);
			pdu->dma[i].pad = 0;
		}
		pdu->ndma = n;
		pdu->dma_dev = dev;
	}
	*segs = pdu->dma;
	*nsegs = pdu->ndma;
	return 0;
}

/* Its bytes go through its slot: a write's copied in now. */
static void rrdma_blk_stage(struct request *rq, struct rrdma_shim_blk_io *io)
{
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);

	rrdma_blk_dma_unmap(rq);
	pdu->staged = true;
	io->zero_copy = 0;
	if (io->op != RRDMA_SHIM_BLK_READ)
		rrdma_blk_copy(rq, false);
}

static blk_status_t rrdma_blk_queue_rq(struct blk_mq_hw_ctx *hctx,
				       const struct blk_mq_queue_data *bd)
{
	struct rrdma_blk *b = hctx->queue->queuedata;
	struct request *rq = bd->rq;
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);
	struct rrdma_shim_blk_io io = {
		.pos = blk_rq_pos(rq) << SECTOR_SHIFT,
		.len = blk_rq_bytes(rq),
		.tag = rq->tag,
	};
	unsigned short nr_phys = blk_rq_nr_phys_segments(rq);
	unsigned int noio;
	int ret;

	/*
	 * Being removed: a request that would wait for its connection fails,
	 * one it can carry goes on (del_gendisk() has a mounted file system
	 * write its dirty data back first).
	 */
	io.dying = READ_ONCE(b->dying);
	switch (req_op(rq)) {
	case REQ_OP_READ:
		io.op = RRDMA_SHIM_BLK_READ;
		break;
	case REQ_OP_WRITE:
		io.op = rq->cmd_flags & REQ_FUA ? RRDMA_SHIM_BLK_WRITE_FUA :
						  RRDMA_SHIM_BLK_WRITE;
		break;
	case REQ_OP_FLUSH:
		io.op = RRDMA_SHIM_BLK_FLUSH;
		io.len = 0;
		break;
	default:
		return BLK_STS_NOTSUPP;
	}
	pdu->pages = b->pages;
	pdu->base = (size_t)rq->tag * b->io_bytes;
	pdu->op = io.op;
	pdu->staged = false;
	pdu->dma_dev = NULL;
	pdu->nsg = 0;
	blk_mq_start_request(rq);
	if (io.len && nr_phys) {
		/*
		 * Only the entries blk_rq_map_sg() may fill, as nvme-pci
		 * does: at most max_segments (RRDMA_SHIM_BLK_SEGS).
		 */
		sg_init_table(pdu->sg, nr_phys);
		/* The request_queue argument went in 6.15 (Kbuild). */
#ifdef RRDMA_COMPAT_MAP_SG_QUEUE
		pdu->nsg = blk_rq_map_sg(rq->q, rq, pdu->sg);
#else
		pdu->nsg = blk_rq_map_sg(rq, pdu->sg);
#endif
		io.zero_copy = pdu->nsg > 0;
	}
	noio = memalloc_noio_save();
	if (io.len && !io.zero_copy)
		rrdma_blk_stage(rq, &io);
	ret = rrdma_rust_blk_queue(b->owner, rq, &io);
	if (ret == RRDMA_SHIM_BLK_STAGE && io.zero_copy) {
		rrdma_blk_stage(rq, &io);
		ret = rrdma_rust_blk_queue(b->owner, rq, &io);
	}
	memalloc_noio_restore(noio);
	/*
	 * Not kept: Rust unmapped it already (this is for a bug's sake).  A
	 * kept request may have ended already: untouched.
	 */
	if (ret && WARN_ON_ONCE(pdu->dma_dev))
		rrdma_blk_dma_unmap(rq);
	if (ret == -EAGAIN || ret == -ENOMEM)
		return BLK_STS_RESOURCE;
	if (ret)
		return BLK_STS_IOERR;
	return BLK_STS_OK;
}

/* blk_mq_complete_request()'s callback: the end of rrdma_shim_blk_end(). */
static void rrdma_blk_complete(struct request *rq)
{
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);

	if (!pdu->status && pdu->op == RRDMA_SHIM_BLK_READ && pdu->staged)
		rrdma_blk_copy(rq, true);
	blk_mq_end_request(rq, pdu->status ? BLK_STS_IOERR : BLK_STS_OK);
}

/*
 * A request whose operation has not ended in the block layer's timeout
 * (30 s): said, and waited for still.  Its operation ends exactly once,
 * by its completion or its connection's end; ending the request here
 * would let the slot be reused under a READ still in flight.
 */
static enum blk_eh_timer_return rrdma_blk_timeout(struct request *rq)
{
	pr_warn_ratelimited("rrdma: %s: request %d has waited %u s for its operation\n",
			    rq->q->disk->disk_name, rq->tag, rq->timeout / HZ);
	return BLK_EH_RESET_TIMER;
}

static const struct blk_mq_ops rrdma_blk_mq_ops = {
	.queue_rq = rrdma_blk_queue_rq,
	.complete = rrdma_blk_complete,
	.timeout = rrdma_blk_timeout,
};

void rrdma_shim_blk_end(struct request *rq, int status)
{
	struct rrdma_blk *b = rq->q->queuedata;
	struct rrdma_blk_pdu *pdu = blk_mq_rq_to_pdu(rq);
	bool conn_failed = status == -ECONNRESET || status == -ECONNABORTED ||
			   status == -ETIMEDOUT;

	/* Its operation has ended: no device reaches its pages any more. */
	rrdma_blk_dma_unmap(rq);
	if (conn_failed && pdu->op != RRDMA_SHIM_BLK_FLUSH &&
	    !READ_ONCE(b->dying)) {
		blk_mq_requeue_request(rq, true);
		return;
	}
	pdu->status = status;
	blk_mq_complete_request(rq);
}

struct rrdma_blk *rrdma_shim_blk_create(void *owner, u32 index,
					const struct rrdma_shim_blk_shape *shape,
					struct page **pages, int *err)
{
	struct queue_limits lim = {
		/*
		 * A write completes once sent, which on iWARP is before its
		 * bytes are placed: a volatile write cache, which a flush
		 * (a fence) empties; a FUA write completes once placed.
		 */
		.features = BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA,
		.logical_block_size = shape->block_size,
		.physical_block_size = shape->block_size,
		.max_hw_sectors = shape->io_bytes >> SECTOR_SHIFT,
		.max_segments = RRDMA_SHIM_BLK_SEGS,
	};
	struct rrdma_blk *b;
	int ret;

	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b) {
		*err = -ENOMEM;
		return NULL;
	}
	b->owner = owner;
	b->pages = pages;
	b->io_bytes = shape->io_bytes;
	b->set.ops = &rrdma_blk_mq_ops;
	b->set.nr_hw_queues = 1;
	b->set.queue_depth = shape->depth;
	b->set.numa_node = NUMA_NO_NODE;
	b->set.cmd_size = sizeof(struct rrdma_blk_pdu);
	b->set.flags = BLK_MQ_F_BLOCKING;
#ifdef RRDMA_COMPAT_K6_12
	b->set.flags |= BLK_MQ_F_SHOULD_MERGE;
#endif
	ret = blk_mq_alloc_tag_set(&b->set);
	if (ret)
		goto free;
	b->disk = blk_mq_alloc_disk(&b->set, &lim, b);
	if (IS_ERR(b->disk)) {
		ret = PTR_ERR(b->disk);
		goto free_set;
	}
	b->disk->fops = &rrdma_blk_fops;
	snprintf(b->disk->disk_name, DISK_NAME_LEN, "rrdmab%u", index);
	set_capacity(b->disk, shape->sectors);
	set_disk_ro(b->disk, shape->read_only);
	ret = device_add_disk(NULL, b->disk, rrdma_shim_blk_groups);
	if (ret)
		goto put;
	return b;
put:
	put_disk(b->disk);
free_set:
	blk_mq_free_tag_set(&b->set);
free:
	kfree(b);
	*err = ret;
	return NULL;
}

void *rrdma_shim_blk_owner(struct gendisk *disk)
{
	struct rrdma_blk *b = disk->queue->queuedata;

	return b->owner;
}

bool rrdma_shim_capable_sys_admin(void)
{
	return capable(CAP_SYS_ADMIN);
}

/*
 * A disk holds the module: rmmod is refused until BLK_UNMAP removes it.
 * Taken in BLK_MAP, so the module is live.
 */
void rrdma_shim_module_get(void)
{
	__module_get(THIS_MODULE);
}

void rrdma_shim_module_put(void)
{
	module_put(THIS_MODULE);
}

int rrdma_shim_blk_close(struct rrdma_blk *b, bool force)
{
	int ret = 0;

	might_sleep();
	if (force) {
		/*
		 * First: a holder of the mutex below that waits for I/O (a
		 * last close's sync, a partition scan) must not wait for a
		 * connection that is down (rrdma_shim_blk_destroy() does it
		 * again).
		 */
		WRITE_ONCE(b->dying, true);
		blk_mq_kick_requeue_list(b->disk->queue);
	}
	/*
	 * Under the mutex that an open holds while it asks rrdma_blk_open():
	 * no open slips in between the count and the mark.
	 */
	mutex_lock(&b->disk->open_mutex);
	if (!force && disk_openers(b->disk))
		ret = -EBUSY;
	else
		b->closed = true;
	mutex_unlock(&b->disk->open_mutex);
	return ret;
}

void rrdma_shim_blk_destroy(struct rrdma_blk *b)
{
	might_sleep();
	/*
	 * Requests fail from now on rather than wait for a connection; the
	 * requeued ones are run again (to fail if it is still down).
	 * del_gendisk() has a file system still mounted write back its dirty
	 * data (what the connection carries lands), then waits for the
	 * requests in flight: their operations complete.
	 */
	WRITE_ONCE(b->dying, true);
	blk_mq_kick_requeue_list(b->disk->queue);
	del_gendisk(b->disk);
	put_disk(b->disk);
	blk_mq_free_tag_set(&b->set);
	kfree(b);
}
