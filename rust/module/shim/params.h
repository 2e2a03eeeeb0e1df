/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma C shim, internal: the readers of the module parameters that C uses
 * (params.c); those Rust uses are declared in rrdma_shim.h.
 */
#ifndef RRDMA_SHIM_PARAMS_H
#define RRDMA_SHIM_PARAMS_H

#include <linux/types.h>

struct rrdma_shim_device_limits;

u16 rrdma_param_dev_mode(void);
void rrdma_param_limits(struct rrdma_shim_device_limits *clamp);
bool rrdma_param_cq_softirq(void);

#endif /* RRDMA_SHIM_PARAMS_H */
