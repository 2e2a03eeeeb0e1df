// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: fast-registration memory regions over runs of a region's
 * pages (allocated, DMA-mapped and mapped into the MR here; registered on
 * the wire by a REG_MR work request that post.c posts).
 */
#include <linux/dma-mapping.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "rrdma_shim.h"
#include "mr.h"

struct rrdma_shim_mr *rrdma_shim_mr_alloc(struct ib_pd *pd, struct page **pages,
					  u32 npages, u64 iova, int *err)
{
	struct rrdma_shim_mr *m;
	int ret, n;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	m->dev = pd->device;
	ret = sg_alloc_table_from_pages(&m->sgt, pages, npages, 0,
					(unsigned long)npages << PAGE_SHIFT,
					GFP_KERNEL);
	if (ret)
		goto free;
	ret = ib_dma_map_sgtable_attrs(m->dev, &m->sgt, DMA_BIDIRECTIONAL, 0);
	if (ret)
		goto free_table;
	m->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(m->mr)) {
		ret = PTR_ERR(m->mr);
		goto unmap;
	}
	n = ib_map_mr_sg(m->mr, m->sgt.sgl, m->sgt.nents, NULL, PAGE_SIZE);
	if (n != m->sgt.nents) {
		ret = n < 0 ? n : -EINVAL;
		goto dereg;
	}
	/* Addresses on the wire are offsets in the region, not kernel VAs. */
	m->mr->iova = iova;
	/* A fresh key for this registration. */
	ib_update_fast_reg_key(m->mr, ib_inc_rkey(m->mr->rkey));
	return m;

dereg:
	ib_dereg_mr(m->mr);
unmap:
	ib_dma_unmap_sgtable_attrs(m->dev, &m->sgt, DMA_BIDIRECTIONAL, 0);
free_table:
	sg_free_table(&m->sgt);
free:
	kfree(m);
	*err = ret;
	return NULL;
}

void rrdma_shim_mr_keys(struct rrdma_shim_mr *m, u32 *lkey, u32 *rkey)
{
	*lkey = m->mr->lkey;
	*rkey = m->mr->rkey;
}

void rrdma_shim_mr_free(struct rrdma_shim_mr *m)
{
	ib_dereg_mr(m->mr);
	ib_dma_unmap_sgtable_attrs(m->dev, &m->sgt, DMA_BIDIRECTIONAL, 0);
	sg_free_table(&m->sgt);
	kfree(m);
}
