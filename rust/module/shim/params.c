// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: every module parameter of rrdma.ko, with its description
 * and its reader, so that all knobs are in one place.  Rust reads its own
 * through rrdma_shim.h, C through params.h.  (rrdma_kunit.ko's one,
 * leak_on_purpose, stays with its suite in kunit_suite.c.)
 */
#include <linux/bits.h>
#include <linux/cpumask.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/time64.h>

#include "params.h"
#include "rrdma_shim.h"

/* ---- /dev/rrdma and regions ---- */

static ushort dev_mode = 0600;
module_param(dev_mode, ushort, 0444);
MODULE_PARM_DESC(dev_mode,
		 "Permission bits of /dev/rrdma (default 0600; at most 0666)");

static uint max_region_mb = 1024;
module_param(max_region_mb, uint, 0644);
MODULE_PARM_DESC(max_region_mb,
		 "Largest region one REGION_CREATE may allocate, in MiB (default 1024)");

u64 rrdma_shim_max_region_bytes(void)
{
	return (u64)READ_ONCE(max_region_mb) << 20;
}

/* Read once, when /dev/rrdma is registered (shim/chardev.c). */
u16 rrdma_param_dev_mode(void)
{
	return dev_mode;
}

/* ---- caps on what a file and a user hold (rust/abi/src/caps.rs) ---- */

static uint max_file_conns = 4096;
module_param(max_file_conns, uint, 0644);
MODULE_PARM_DESC(max_file_conns,
		 "Connections one file may hold, accepted ones included (default 4096; 0: 1048576, the most); beyond, ENOSPC");
static uint max_file_regions = 65536;
module_param(max_file_regions, uint, 0644);
MODULE_PARM_DESC(max_file_regions,
		 "Regions one file may hold (default 65536; 0: 1048576, the most); beyond, ENOSPC");
static uint max_file_exports = 4096;
module_param(max_file_exports, uint, 0644);
MODULE_PARM_DESC(max_file_exports,
		 "Exports one file may hold (default 4096; 0: 1048576, the most); beyond, ENOSPC");
static uint max_user_conns = 8192;
module_param(max_user_conns, uint, 0644);
MODULE_PARM_DESC(max_user_conns,
		 "Connections the files of one user may hold together (default 8192; 0: 1048576); beyond, EDQUOT");
static uint max_user_regions = 262144;
module_param(max_user_regions, uint, 0644);
MODULE_PARM_DESC(max_user_regions,
		 "Regions the files of one user may hold together (default 262144; 0: 1048576); beyond, EDQUOT");
static uint max_user_exports = 65536;
module_param(max_user_exports, uint, 0644);
MODULE_PARM_DESC(max_user_exports,
		 "Exports the files of one user may hold together (default 65536; 0: 1048576); beyond, EDQUOT");

/* The raw cap of @kind (0 connections, 1 regions, 2 exports) per file or per @user. */
u32 rrdma_shim_cap(u32 kind, bool user)
{
	static const uint *const caps[2][3] = {
		{ &max_file_conns, &max_file_regions, &max_file_exports },
		{ &max_user_conns, &max_user_regions, &max_user_exports },
	};

	return kind < 3 ? READ_ONCE(*caps[user][kind]) : 0;
}

/* ---- device limits ---- */

/*
 * Clamps of the device limits (0: the device's own), so that a guest on
 * siw or rxe behaves as a small NIC would.  Read when a device is added.
 */
static unsigned int limit_qp_wr;
module_param(limit_qp_wr, uint, 0444);
MODULE_PARM_DESC(limit_qp_wr, "Clamp of max_qp_wr, work requests per queue (0: the device's)");
static unsigned int limit_cqe;
module_param(limit_cqe, uint, 0444);
MODULE_PARM_DESC(limit_cqe, "Clamp of max_cqe, entries per completion queue (0: the device's)");
static unsigned int limit_send_sge;
module_param(limit_send_sge, uint, 0444);
MODULE_PARM_DESC(limit_send_sge, "Clamp of max_send_sge (0: the device's)");
static unsigned int limit_recv_sge;
module_param(limit_recv_sge, uint, 0444);
MODULE_PARM_DESC(limit_recv_sge, "Clamp of max_recv_sge (0: the device's)");
static unsigned int limit_sge_rd;
module_param(limit_sge_rd, uint, 0444);
MODULE_PARM_DESC(limit_sge_rd, "Clamp of max_sge_rd, SGEs per RDMA READ (0: the device's)");
static unsigned int limit_fast_reg_pages;
module_param(limit_fast_reg_pages, uint, 0444);
MODULE_PARM_DESC(limit_fast_reg_pages,
		 "Clamp of max_fast_reg_page_list_len, pages per registration (0: the device's)");
static unsigned int limit_mr;
module_param(limit_mr, uint, 0444);
MODULE_PARM_DESC(limit_mr, "Clamp of max_mr, registrations per device (0: the device's)");

/* The clamps of a device's limits (shim/verbs.c). */
void rrdma_param_limits(struct rrdma_shim_device_limits *clamp)
{
	clamp->max_qp_wr = limit_qp_wr;
	clamp->max_cqe = limit_cqe;
	clamp->max_send_sge = limit_send_sge;
	clamp->max_recv_sge = limit_recv_sge;
	clamp->max_sge_rd = limit_sge_rd;
	clamp->max_fast_reg_pages = limit_fast_reg_pages;
	clamp->max_mr = limit_mr;
}

/* ---- connections: queue pairs, keepalive, reconnect ---- */

static uint queue_pairs;
module_param(queue_pairs, uint, 0644);
MODULE_PARM_DESC(queue_pairs,
		 "Queue pairs for a connection's operations: 0 (default) one per online CPU; 1 its own; 2 to 15 data lanes beside its own small one (a disk's: its own and one lane fewer)");

/* Queue pairs a new connection offers or grants, at least 1. */
u32 rrdma_shim_queue_pairs(void)
{
	u32 n = READ_ONCE(queue_pairs);

	return n ? n : num_online_cpus();
}

/* The parameter as set: 0 is the default. */
u32 rrdma_shim_queue_pairs_param(void)
{
	return READ_ONCE(queue_pairs);
}

static uint keepalive_ms = 5000;
module_param(keepalive_ms, uint, 0644);
MODULE_PARM_DESC(keepalive_ms,
		 "Keepalive interval of accepted connections and CONNECTs that set none, in ms (default 5000, 0: off, 100 to 65535)");

static uint keepalive_misses = 6;
module_param(keepalive_misses, uint, 0644);
MODULE_PARM_DESC(keepalive_misses,
		 "Intervals without an answer before a peer is taken as gone (default 6, 2 to 255)");

void rrdma_shim_keepalive_params(u32 *ms, u32 *misses)
{
	*ms = READ_ONCE(keepalive_ms);
	*misses = READ_ONCE(keepalive_misses);
}

static uint reconnect_attempts = 10;
module_param(reconnect_attempts, uint, 0644);
MODULE_PARM_DESC(reconnect_attempts,
		 "Reconnect attempts after one failure of a RRDMA_CONNECT_RECONNECT connection (default 10, 1 to 1000)");

static uint reconnect_delay_ms = 200;
module_param(reconnect_delay_ms, uint, 0644);
MODULE_PARM_DESC(reconnect_delay_ms,
		 "First reconnect delay in ms, doubled per attempt, with jitter (default 200, 10 to 600000)");

static uint reconnect_max_delay_ms = 10000;
module_param(reconnect_max_delay_ms, uint, 0644);
MODULE_PARM_DESC(reconnect_max_delay_ms,
		 "Longest reconnect delay in ms (default 10000)");

static uint accept_max_teardowns = 64;
module_param(accept_max_teardowns, uint, 0644);
MODULE_PARM_DESC(accept_max_teardowns,
		 "A listener refuses connect requests while this many of its file's connections are being torn down (default 64, 0: no limit)");

void rrdma_shim_reconnect_params(u32 *attempts, u32 *delay_ms,
				 u32 *max_delay_ms, u32 *max_teardowns)
{
	*attempts = READ_ONCE(reconnect_attempts);
	*delay_ms = READ_ONCE(reconnect_delay_ms);
	*max_delay_ms = READ_ONCE(reconnect_max_delay_ms);
	*max_teardowns = READ_ONCE(accept_max_teardowns);
}

/* ---- rrdma-blk ---- */

static uint blk_loss_timeout_ms = 60000;
module_param(blk_loss_timeout_ms, uint, 0644);
MODULE_PARM_DESC(blk_loss_timeout_ms,
		 "Milliseconds a disk's I/O waits for its connection to come back before it fails (default 60000)");

u32 rrdma_shim_blk_loss_timeout_ms(void)
{
	return READ_ONCE(blk_loss_timeout_ms);
}

/* ---- completions and polling ---- */

static bool sync_poll = true;
module_param(sync_poll, bool, 0644);
MODULE_PARM_DESC(sync_poll,
		 "Synchronous operations poll their queue pair's completions before they sleep (default Y; N: never)");

static uint sync_poll_us;
module_param(sync_poll_us, uint, 0644);
MODULE_PARM_DESC(sync_poll_us,
		 "Microseconds a synchronous operation polls before it sleeps (0, default: twice its connection's mean completion time, if that is at most 500 us; at most 1000)");

/* The two parameters above (rust/abi/src/poll.rs turns them into a mode). */
void rrdma_shim_sync_poll_params(bool *on, u32 *fixed_us)
{
	*on = READ_ONCE(sync_poll);
	*fixed_us = READ_ONCE(sync_poll_us);
}

static bool cq_softirq = true;
module_param(cq_softirq, bool, 0644);
MODULE_PARM_DESC(cq_softirq,
		 "Poll queue pairs' send completions in softirq (default Y); N: on the rrdma_comp work queue, as before 2026-11-27 (for comparison)");

static bool iopoll_spin = true;
module_param(iopoll_spin, bool, 0644);
MODULE_PARM_DESC(iopoll_spin,
		 "An IOPOLL ring's poll spins a while when it finds nothing before it sleeps until the queue pair's next completion (default Y; N: sleeps at once)");

static uint iopoll_spin_us;
module_param(iopoll_spin_us, uint, 0644);
MODULE_PARM_DESC(iopoll_spin_us,
		 "Microseconds an IOPOLL ring's poll spins while it finds nothing (0, default: twice the queue pair's mean wait for its next completion, at least 50; 50 when that mean is unknown or above 500 us)");

/* Whether a send CQ's event schedules its softirq poll (shim/cq.c). */
bool rrdma_param_cq_softirq(void)
{
	return READ_ONCE(cq_softirq);
}

/* The two parameters above (rust/abi/src/poll.rs turns them into a mode). */
void rrdma_shim_iopoll_params(bool *on, u32 *fixed_us)
{
	*on = READ_ONCE(iopoll_spin);
	*fixed_us = READ_ONCE(iopoll_spin_us);
}

static bool read_gather;
module_param(read_gather, bool, 0644);
MODULE_PARM_DESC(read_gather,
		 "A read(2) that found completions while more operations are in flight waits a while for more, spinning (default N: returns at once; Y pays only with CPUs to spare)");

static uint read_gather_us;
module_param(read_gather_us, uint, 0644);
MODULE_PARM_DESC(read_gather_us,
		 "Microseconds read(2) waits for the next completion (0, default: twice the file's mean gap between completions, if that is at most 500 us; at most 1000)");

/* The two parameters above (rust/abi/src/gather.rs). */
void rrdma_shim_read_gather_params(bool *on, u32 *fixed_us)
{
	*on = READ_ONCE(read_gather);
	*fixed_us = READ_ONCE(read_gather_us);
}

/* ---- test hooks ---- */

static uint fail_at;
module_param(fail_at, uint, 0644);
MODULE_PARM_DESC(fail_at,
		 "Test hook: accepts that fail with EIO once their queue pair is built, as bits: 1 a connection's, 2 a data lane's (default 0)");

/* Whether the test hook fails accept step @point (RRDMA_SHIM_FAIL_*). */
bool rrdma_shim_fail_at(u32 point)
{
	return READ_ONCE(fail_at) & BIT(point);
}
