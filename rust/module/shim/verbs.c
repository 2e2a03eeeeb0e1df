// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: RDMA verbs and device queries for the Rust crate.
 *
 * Only thin wrappers live here: each one turns an inline verb or an
 * ERR_PTR-returning call into something Rust can call through extern "C".
 */
#include <linux/err.h>
#include <linux/module.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

#include "params.h"
#include "rrdma_shim.h"

/* struct ib_device_attr has int limits; a negative one reads as 0. */
static u32 lim(int v)
{
	return v < 0 ? 0 : v;
}

void rrdma_shim_device_limits(struct ib_device *dev,
			      struct rrdma_shim_device_limits *dev_limits,
			      struct rrdma_shim_device_limits *clamp)
{
	const struct ib_device_attr *a = &dev->attrs;

	dev_limits->max_qp_wr = lim(a->max_qp_wr);
	dev_limits->max_cqe = lim(a->max_cqe);
	dev_limits->max_send_sge = lim(a->max_send_sge);
	dev_limits->max_recv_sge = lim(a->max_recv_sge);
	dev_limits->max_sge_rd = lim(a->max_sge_rd);
	dev_limits->max_fast_reg_pages = a->max_fast_reg_page_list_len;
	dev_limits->max_mr = lim(a->max_mr);
	rrdma_param_limits(clamp);
}

void rrdma_shim_device_query(struct ib_device *dev,
			     struct rrdma_shim_device_attr *attr)
{
	struct ib_port_attr port = {};
	u32 first = rdma_start_port(dev);

	memset(attr, 0, sizeof(*attr));
	strscpy(attr->name, dev_name(&dev->dev), sizeof(attr->name));
	attr->index = dev->index;
	attr->node_type = dev->node_type;
	attr->port_count = rdma_end_port(dev) - first + 1;
	attr->node_guid = (__force __u64)dev->node_guid;
	if (dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)
		attr->caps |= RRDMA_SHIM_CAP_MEM_MGT_EXT;
	/* A failed query leaves IB_PORT_NOP: "state unknown". */
	if (!ib_query_port(dev, first, &port))
		attr->port_state = port.state;
	attr->link_layer = rdma_port_get_link_layer(dev, first);
}

int rrdma_shim_alloc_pd(struct ib_device *dev, struct ib_pd **pd)
{
	struct ib_pd *p = ib_alloc_pd(dev, 0);

	if (IS_ERR(p))
		return PTR_ERR(p);
	*pd = p;
	return 0;
}

void rrdma_shim_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}
