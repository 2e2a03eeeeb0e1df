// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The io_uring example of Documentation/rrdma.rst, in C with liburing, as a
 * user of the UAPI header would write it: one operation per SQE, submitted
 * and waited for one at a time.  The selftest runs it on a plain ring, an
 * IOPOLL ring, a hybrid IOPOLL ring (IORING_SETUP_HYBRID_IOPOLL, 6.13 and
 * later, which the Rust library's io-uring crate cannot set up), SQPOLL
 * rings, whose commands the kernel's SQ thread issues (and, with IOPOLL,
 * polls for), and DEFER_TASKRUN rings, whose completions' task work runs
 * only when the task waits for CQEs; and closes such rings with commands
 * in flight.
 */
#include <errno.h>
#include <liburing.h>
#include <string.h>
#include <time.h>

#include "rrdma.h"

#ifndef IORING_SETUP_HYBRID_IOPOLL
#define IORING_SETUP_HYBRID_IOPOLL (1U << 17)
#endif

/* Setup flags the caller may ask for, beyond IORING_SETUP_SQE128. */
#define UX_FLAGS (IORING_SETUP_IOPOLL | IORING_SETUP_HYBRID_IOPOLL | IORING_SETUP_SQPOLL | \
		  IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)

/* An SQ thread goes to sleep after this long without work (ms). */
#define UX_SQ_IDLE_MS 10

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int ux_init(struct io_uring *ring, unsigned int entries, unsigned int flags)
{
	struct io_uring_params p = {
		.flags = IORING_SETUP_SQE128 | flags,
		.sq_thread_idle = UX_SQ_IDLE_MS,
	};

	if (flags & ~UX_FLAGS)
		return -EINVAL;
	return io_uring_queue_init_params(entries, ring, &p);
}

static void ux_prep(struct io_uring_sqe *sqe, int fd, const struct rrdma_op *op)
{
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
	sqe->cmd_op = RRDMA_URING_CMD_OP;
	/* The ring slot may hold a former SQE's bytes: unused ones must be 0. */
	memset(sqe->cmd, 0, 80);	/* a 128-byte SQE's command area */
	memcpy(sqe->cmd, op, sizeof(*op));
	sqe->user_data = op->user_data;
}

/**
 * ux_run - run operations through a fresh io_uring, one at a time
 * @fd:		an open /dev/rrdma
 * @flags:	0, or IORING_SETUP_IOPOLL (alone, with
 *		IORING_SETUP_HYBRID_IOPOLL, or with IORING_SETUP_SQPOLL), or
 *		IORING_SETUP_SQPOLL; IORING_SETUP_SINGLE_ISSUER and
 *		IORING_SETUP_DEFER_TASKRUN with any but SQPOLL
 * @ops:	@n struct rrdma_op, as the selftest encoded them
 * @n:		number of operations
 * @res:	out: each operation's cqe->res
 * @ns:		out: each operation's time from submission to its CQE
 *
 * Return: 0; -EPROTO when a CQE's user_data is not its SQE's; the -errno
 * of io_uring_queue_init_params(), io_uring_submit() or
 * io_uring_wait_cqe().
 */
int ux_run(int fd, unsigned int flags, const struct rrdma_op *ops, unsigned int n,
	   int *res, unsigned long long *ns)
{
	struct io_uring ring;
	unsigned int i;
	int ret;

	ret = ux_init(&ring, 8, flags);
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe;
		unsigned long long t0 = now_ns();

		ux_prep(sqe, fd, &ops[i]);
		ret = io_uring_submit(&ring);
		if (ret < 0)
			break;
		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret < 0)
			break;
		ns[i] = now_ns() - t0;
		res[i] = cqe->res;
		if (cqe->user_data != ops[i].user_data)
			ret = -EPROTO;
		io_uring_cqe_seen(&ring, cqe);
		if (ret < 0)
			break;
	}
	io_uring_queue_exit(&ring);
	return ret < 0 ? ret : 0;
}

/**
 * ux_close_in_flight - submit operations and close the ring at once
 * @fd:		an open /dev/rrdma
 * @flags:	as for ux_run()
 * @ops:	@n struct rrdma_op
 * @n:		number of operations, at most 64
 *
 * io_uring's teardown of the ring waits for the commands in flight (on
 * an IOPOLL ring by polling them from its exit work).
 *
 * Return: the number of SQEs submitted, or the -errno of
 * io_uring_queue_init_params() or io_uring_submit().
 */
int ux_close_in_flight(int fd, unsigned int flags, const struct rrdma_op *ops,
		       unsigned int n)
{
	struct io_uring ring;
	unsigned int i;
	int ret;

	if (n > 64)
		return -EINVAL;
	ret = ux_init(&ring, 64, flags);
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++)
		ux_prep(io_uring_get_sqe(&ring), fd, &ops[i]);
	ret = io_uring_submit(&ring);
	io_uring_queue_exit(&ring);
	return ret;
}
