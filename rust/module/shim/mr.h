/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma C shim, internal: the layout of a fast-registration MR, shared by
 * mr.c (which owns it) and post.c (which posts its registration).  Rust sees
 * the type as opaque (rrdma_shim.h).
 */
#ifndef RRDMA_SHIM_MR_H
#define RRDMA_SHIM_MR_H

#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>

/**
 * struct rrdma_shim_mr - one fast-registration MR over a run of pages
 * @mr:		the MR
 * @dev:	its device
 * @sgt:	the pages, DMA-mapped for as long as the MR lives
 */
struct rrdma_shim_mr {
	struct ib_mr *mr;
	struct ib_device *dev;
	struct sg_table sgt;
};

#endif /* RRDMA_SHIM_MR_H */
