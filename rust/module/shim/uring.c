// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma shim: io_uring command passthrough on /dev/rrdma.
 *
 * A 128-byte SQE carries one struct rrdma_op in its command area.  It is
 * copied once here (the SQE is in memory userspace can still write) and
 * handed to Rust, which checks and posts it like one operation of SUBMIT.
 * The SQE's fields this command does not use must be zero (as every unused
 * field of the ABI, so that it can grow): the command area after the
 * operation, addr, len, buf_index, file_index and uring_cmd_flags (no
 * registered buffers).  io_uring itself refuses a non-zero ioprio and
 * __pad1 (off's upper half) for this opcode; the rest (opcode, flags, fd,
 * cmd_op, user_data, personality) is io_uring's or names the command.
 * Its completion (the completion handler, or the teardown's flush) comes
 * back through rrdma_shim_uring_complete(), which posts the CQE from the
 * submitting task's task work, as nvme's passthrough does.
 *
 * IOPOLL: on a ring set up with IORING_SETUP_IOPOLL the command's pdu holds
 * the QP its operation is posted on (Rust tells it before it posts, under
 * the connection's lock), and ->uring_cmd_iopoll polls that QP's send CQ
 * in the reaping task (rrdma_shim_qp_iopoll()).  A completion that this
 * poll finds posts the CQE in place; one found elsewhere (the CQ's work
 * item, a synchronous caller's poll, the teardown) is left in the pdu
 * (@done) for the command's next poll to post, as nvme's polled requests
 * are completed only by polls.  io_uring reaps an IOPOLL ring's commands
 * only by polling them, its teardown of a closed ring too, which on 6.12
 * runs none of a DEFER_TASKRUN ring's task work meanwhile: a CQE that
 * waited there for task work never came, and the teardown spun.
 * The pointer's lifetime: the command holds a reference of the QP struct
 * (rrdma_shim_qp_ref()) and drops it when it completes, after clearing the
 * pointer; the struct is freed after an RCU grace period, so a poller that
 * read the pointer under rcu_read_lock() may still take a poll reference,
 * which fails once the QP is destroyed.
 *
 * The completion API differs between the kernels rrdma supports: 6.12's
 * task-work callback takes (cmd, issue_flags) and io_uring_cmd_done() a
 * res2; 6.13+ (verified on 7.3) take an io_tw_req and no res2.  Kbuild
 * defines RRDMA_COMPAT_K6_12 for the former (the Rust compat layer's
 * choice).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/io_uring/cmd.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <uapi/rrdma.h>
#include "rrdma_shim.h"

/* Per-command state, in the io_uring_cmd's pdu. */
struct rrdma_uring_pdu {
	struct rrdma_shim_qp *qp; /* IOPOLL: polled for it (RCU) */
	s32 res;
	bool iopoll;
	bool done; /* IOPOLL: @res is in, for the next poll to post */
};

static struct rrdma_uring_pdu *rrdma_uring_pdu(struct io_uring_cmd *cmd)
{
	return io_uring_cmd_to_pdu(cmd, struct rrdma_uring_pdu);
}

/*
 * The command no longer polls its QP: the pointer is cleared before the
 * reference goes, so a poller that reads it later finds NULL.
 */
static void rrdma_uring_unbind(struct rrdma_uring_pdu *pdu)
{
	struct rrdma_shim_qp *q = pdu->qp;

	WRITE_ONCE(pdu->qp, NULL);
	rrdma_shim_qp_unref(q);
}

/* The command area of a 128-byte SQE: the operation, then zeros. */
#define RRDMA_URING_CMD_AREA \
	(2 * sizeof(struct io_uring_sqe) - offsetof(struct io_uring_sqe, cmd))

/*
 * The name of the first field of @cmd's SQE that the command does not use
 * and is not zero, or NULL.  @area is the copy of its command area.  Each
 * field is read once (the SQE may still be in memory userspace writes).
 */
static const char *rrdma_uring_unused(struct io_uring_cmd *cmd, const u8 *area)
{
	const struct io_uring_sqe *sqe = cmd->sqe;

	if (READ_ONCE(sqe->addr))
		return "addr";
	if (READ_ONCE(sqe->len))
		return "len";
	/* Read once by io_uring's prep, which refused unknown bits. */
	if (cmd->flags & IORING_URING_CMD_MASK)
		return "uring_cmd_flags";
	if (READ_ONCE(sqe->buf_index))
		return "buf_index";
	if (READ_ONCE(sqe->file_index))
		return "file_index";
	if (memchr_inv(area + sizeof(struct rrdma_op), 0,
		       RRDMA_URING_CMD_AREA - sizeof(struct rrdma_op)))
		return "cmd (after struct rrdma_op)";
	return NULL;
}

bool rrdma_shim_uring_supported(void)
{
	return IS_ENABLED(CONFIG_IO_URING);
}

int rrdma_shim_uring_issue(void *state, struct io_uring_cmd *cmd,
			   unsigned int issue_flags)
{
	struct rrdma_uring_pdu *pdu = rrdma_uring_pdu(cmd);
	u8 area[RRDMA_URING_CMD_AREA];
	const char *unused;
	struct rrdma_op op;
	int ret;

	/* The operation needs the 80-byte command area of a 128-byte SQE. */
	if (!(issue_flags & IO_URING_F_SQE128))
		return -EINVAL;
	if (cmd->cmd_op != RRDMA_URING_CMD_OP)
		return -ENOTTY;
	BUILD_BUG_ON(sizeof(op) > RRDMA_URING_CMD_AREA);
	BUILD_BUG_ON(sizeof(struct rrdma_uring_pdu) >
		     sizeof_field(struct io_uring_cmd, pdu));
	memcpy(area, cmd->sqe->cmd, sizeof(area));
	unused = rrdma_uring_unused(cmd, area);
	if (unused) {
		if (rrdma_shim_warn_ratelimit())
			pr_warn("io_uring: SQE field %s is not zero: EINVAL\n",
				unused);
		return -EINVAL;
	}
	memcpy(&op, area, sizeof(op));
	pdu->qp = NULL;
	pdu->iopoll = issue_flags & IO_URING_F_IOPOLL;
	pdu->done = false;
	ret = rrdma_rust_file_uring_op(state, cmd, &op,
				       !!(issue_flags & IO_URING_F_NONBLOCK));
	if (!ret)
		return -EIOCBQUEUED;
	/*
	 * Not posted (a refused post may have told its QP already).  Not on
	 * io_uring's poll list yet: no poller reads the pointer.
	 */
	if (pdu->qp)
		rrdma_uring_unbind(pdu);
	/*
	 * A worker's issue (not NONBLOCK) returns EAGAIN only while the
	 * connection reconnects: the command's result, as for any operation
	 * then.  io-wq would issue a command of an IOPOLL ring again at once,
	 * for as long as the reconnect takes, so its poll posts the EAGAIN.
	 */
	if (ret == -EAGAIN && pdu->iopoll &&
	    !(issue_flags & IO_URING_F_NONBLOCK)) {
		pdu->res = ret;
		/* Pairs with the poll's smp_load_acquire(): @res is in first. */
		smp_store_release(&pdu->done, true);
		return -EIOCBQUEUED;
	}
	return ret;
}

void rrdma_shim_uring_poll_on(struct io_uring_cmd *cmd,
			      struct rrdma_shim_qp *q)
{
	struct rrdma_uring_pdu *pdu = rrdma_uring_pdu(cmd);

	if (!pdu->iopoll || WARN_ON_ONCE(pdu->qp))
		return;
	rrdma_shim_qp_ref(q);
	WRITE_ONCE(pdu->qp, q);
}

#ifdef RRDMA_COMPAT_K6_12
#define rrdma_uring_cmd_done(cmd, res, flags) \
	io_uring_cmd_done(cmd, res, 0, flags)

static void rrdma_uring_task_cb(struct io_uring_cmd *cmd,
				unsigned int issue_flags)
{
	io_uring_cmd_done(cmd, rrdma_uring_pdu(cmd)->res, 0, issue_flags);
}
#else
#define rrdma_uring_cmd_done(cmd, res, flags) io_uring_cmd_done(cmd, res, flags)

static void rrdma_uring_task_cb(struct io_tw_req tw_req, io_tw_token_t tw)
{
	struct io_uring_cmd *cmd = io_uring_cmd_from_tw(tw_req);

	io_uring_cmd_done(cmd, rrdma_uring_pdu(cmd)->res,
			  IO_URING_CMD_TASK_WORK_ISSUE_FLAGS);
}
#endif

int rrdma_shim_uring_iopoll(struct io_uring_cmd *cmd,
			    struct io_comp_batch *iob, unsigned int poll_flags)
{
	struct rrdma_uring_pdu *pdu = rrdma_uring_pdu(cmd);
	struct rrdma_shim_qp *q;
	int n;

	/*
	 * Completed elsewhere (rrdma_shim_uring_complete()): this poll,
	 * under the ring's lock, posts it.  Acquire: @res is read after.
	 */
	if (smp_load_acquire(&pdu->done)) {
		rrdma_uring_cmd_done(cmd, pdu->res, 0);
		return 1;
	}
	rcu_read_lock();
	q = READ_ONCE(pdu->qp);
	if (q && !rrdma_shim_qp_poll_tryget(q))
		q = NULL;
	rcu_read_unlock();
	if (!q)
		return 0;
	n = rrdma_shim_qp_iopoll(q, cmd_to_io_kiocb(cmd)->ctx,
				 poll_flags & BLK_POLL_ONESHOT);
	rrdma_shim_qp_poll_put(q);
	return n;
}

bool rrdma_shim_uring_complete(struct io_uring_cmd *cmd, s32 res)
{
	struct rrdma_uring_pdu *pdu = rrdma_uring_pdu(cmd);
	struct rrdma_shim_qp *q = pdu->qp;

	if (!pdu->iopoll) {
		pdu->res = res;
		io_uring_cmd_do_in_task_lazy(cmd, rrdma_uring_task_cb);
		return false;
	}
	if (q && rrdma_shim_qp_iopolled(q, cmd_to_io_kiocb(cmd)->ctx)) {
		/*
		 * Found by this task's IOPOLL poll of the command's own ring,
		 * which holds the ring's lock: the CQE is posted in place, as
		 * io_uring_cmd_iopoll_done() does.  The poller's reference
		 * keeps @q until it returns.
		 */
		rrdma_uring_unbind(pdu);
		rrdma_uring_cmd_done(cmd, res, 0);
		return true;
	}
	/*
	 * Found elsewhere: the command's next poll posts it.  Once @done is
	 * set, that poll may end @cmd at any time: the pdu is left alone.
	 */
	WRITE_ONCE(pdu->qp, NULL);
	pdu->res = res;
	/* Pairs with the poll's smp_load_acquire(): @res is in first. */
	smp_store_release(&pdu->done, true);
	if (q) {
		rrdma_shim_qp_iopoll_wake(q);
		rrdma_shim_qp_unref(q);
	}
	return false;
}

/*
 * One write fence per io_uring submission (iWARP).  io_uring opens a block
 * plug around a submission of more than two SQEs whose opcode asks for one
 * (IORING_OP_URING_CMD does) and closes it once it has issued them all.
 * An iWARP write issued under the plug registers its connection's callback
 * on it (blk_check_plugged(), as md does), which runs when the plug closes,
 * or earlier if the task sleeps with it open (from_schedule: nothing may
 * sleep then, Rust queues a work item).  The writes go unsignaled into
 * their connection's open group and the callback posts the group's fence.
 * The callback holds a reference to the connection: Rust hands one over
 * when rrdma_shim_plug() returns 2 and takes it back in
 * rrdma_rust_conn_unplug().  The module stays loaded meanwhile: the
 * submission's requests hold the file, and a file's last reference is
 * dropped in task work, after the plug has closed.
 */
#ifdef CONFIG_BLOCK
struct rrdma_plug {
	struct blk_plug_cb cb;
	bool armed;
};

static void rrdma_unplug(struct blk_plug_cb *cb, bool from_schedule)
{
	void *owner = cb->data;

	kfree(container_of(cb, struct rrdma_plug, cb));
	rrdma_rust_conn_unplug(owner, from_schedule);
}

int rrdma_shim_plug(void *owner)
{
	struct blk_plug_cb *cb;
	struct rrdma_plug *p;

	cb = blk_check_plugged(rrdma_unplug, owner, sizeof(*p));
	if (!cb)
		return 0;
	p = container_of(cb, struct rrdma_plug, cb);
	if (p->armed)
		return 1;
	p->armed = true;
	return 2;
}
#else
int rrdma_shim_plug(void *owner)
{
	return 0;
}
#endif
