// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: the ib_client and the /dev/rrdma misc device.
 *
 * Both registrations are plain C so that every supported kernel takes the
 * same path; each callback forwards to Rust with the opaque core pointer
 * that rrdma_shim_register() was given.
 */
#include <linux/fs.h>
#include <linux/io_uring/cmd.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/ratelimit.h>
#include <linux/seq_file.h>
#include <rdma/ib_verbs.h>

#include "params.h"
#include "rrdma_shim.h"
#include "uapi/rrdma.h"

/* Keep the C header and the Rust mirror (rust/abi/src/uapi.rs) in step. */
static_assert(sizeof(struct rrdma_info) == RRDMA_INFO_SIZE_VER0);
static_assert(sizeof(struct rrdma_device_info) == RRDMA_DEVICE_INFO_SIZE_VER0);
static_assert(sizeof(struct rrdma_region_create) ==
	      RRDMA_REGION_CREATE_SIZE_VER0);
static_assert(sizeof(struct rrdma_region_destroy) ==
	      RRDMA_REGION_DESTROY_SIZE_VER0);
static_assert(sizeof(struct rrdma_region_register) ==
	      RRDMA_REGION_REGISTER_SIZE_VER0);
static_assert(sizeof(struct rrdma_addr) == 24);
static_assert(sizeof(struct rrdma_listen) == 40);
static_assert(sizeof(struct rrdma_accept) == 40);
static_assert(sizeof(struct rrdma_connect) == 40);
static_assert(sizeof(struct rrdma_handle_arg) == 8);
static_assert(sizeof(struct rrdma_export) == 24);
static_assert(sizeof(struct rrdma_unexport) == 16);
static_assert(sizeof(struct rrdma_import) == 48);
static_assert(RRDMA_IMPORT_SIZE_VER0 == 40);
static_assert(sizeof(struct rrdma_op) == RRDMA_OP_SIZE_VER0);
static_assert(sizeof(struct rrdma_submit) == 24);
static_assert(sizeof(struct rrdma_completion) == 24);

MODULE_AUTHOR("The rrdma developers");

/* Set while registered; the callbacks below only run in that window. */
static void *rrdma_core;

/*
 * Connection teardowns that an rdma_cm event or a completion starts run
 * here (they drain queue pairs and destroy cm_ids, which neither context
 * may do).  Destroyed after the ib_client: it drains what is left before
 * the module's code goes.
 */
static struct workqueue_struct *rrdma_wq;

struct workqueue_struct *rrdma_shim_wq(void)
{
	return rrdma_wq;
}

/*
 * The work items of the queue pairs' send CQs (shim/cq.c): the polls of
 * completions that need process context (all polls with cq_softirq off),
 * as the RDMA core's ib_comp_wq (not exported) runs its own: per CPU,
 * high priority, so a poll runs on the CPU its completion event came in
 * on.  Destroyed after the ib_client: every queue pair is gone by then.
 */
static struct workqueue_struct *rrdma_comp_wq;

struct workqueue_struct *rrdma_shim_comp_wq(void)
{
	return rrdma_comp_wq;
}

static struct ib_client rrdma_ib_client;

static int rrdma_ib_add(struct ib_device *dev)
{
	void *ctx;
	int ret;

	ret = rrdma_rust_device_add(rrdma_core, dev, &ctx);
	if (ret)
		return ret;
	ib_set_client_data(dev, &rrdma_ib_client, ctx);
	return 0;
}

static void rrdma_ib_remove(struct ib_device *dev, void *client_data)
{
	rrdma_rust_device_remove(rrdma_core, dev, client_data);
}

static struct ib_client rrdma_ib_client = {
	.name = "rrdma",
	.add = rrdma_ib_add,
	.remove = rrdma_ib_remove,
};

/**
 * struct rrdma_file - what an open /dev/rrdma points to
 * @state:	the Rust FileState
 * @waitq:	woken when completions arrive (read(2) and poll(2) sleep here)
 */
struct rrdma_file {
	void *state;
	wait_queue_head_t waitq;
};

void rrdma_shim_file_wake(void *waitq)
{
	wake_up_interruptible_all(waitq);
}

u64 rrdma_shim_random_u64(void)
{
	return get_random_u64();
}

static int rrdma_open(struct inode *inode, struct file *file)
{
	struct rrdma_file *f;
	int ret;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	init_waitqueue_head(&f->waitq);
	ret = rrdma_rust_file_open(rrdma_core, &f->waitq, &f->state);
	if (ret) {
		kfree(f);
		return ret;
	}
	file->private_data = f;
	return 0;
}

static int rrdma_release(struct inode *inode, struct file *file)
{
	struct rrdma_file *f = file->private_data;

	/* Tears down every object; no completion wakes @waitq afterwards. */
	rrdma_rust_file_release(f->state);
	kfree(f);
	return 0;
}

static long rrdma_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct rrdma_file *f = file->private_data;

	return rrdma_rust_file_ioctl(f->state, cmd, arg);
}

static int rrdma_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct rrdma_file *f = file->private_data;

	return rrdma_rust_file_mmap(f->state, vma);
}

static void rrdma_show_fdinfo(struct seq_file *m, struct file *file)
{
	struct rrdma_file *f = file->private_data;

	rrdma_rust_file_show_fdinfo(f->state, m);
}

static ssize_t rrdma_read(struct file *file, char __user *buf, size_t len,
			  loff_t *ppos)
{
	struct rrdma_file *f = file->private_data;
	bool nonblock = file->f_flags & O_NONBLOCK;
	long ret;

	for (;;) {
		ret = rrdma_rust_file_read(f->state, buf, len, nonblock);
		if (ret != -EAGAIN || nonblock)
			return ret;
		ret = wait_event_interruptible(f->waitq,
					       rrdma_rust_file_readable(f->state));
		if (ret)
			return ret;
	}
}

static __poll_t rrdma_poll(struct file *file, struct poll_table_struct *pt)
{
	struct rrdma_file *f = file->private_data;

	poll_wait(file, &f->waitq, pt);
	return rrdma_rust_file_readable(f->state) ? EPOLLIN | EPOLLRDNORM : 0;
}

static int rrdma_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct rrdma_file *f = cmd->file->private_data;

	return rrdma_shim_uring_issue(f->state, cmd, issue_flags);
}

static const struct file_operations rrdma_fops = {
	.owner = THIS_MODULE,
	.open = rrdma_open,
	.release = rrdma_release,
	.unlocked_ioctl = rrdma_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = rrdma_mmap,
	.show_fdinfo = rrdma_show_fdinfo,
	.read = rrdma_read,
	.poll = rrdma_poll,
	.uring_cmd = rrdma_uring_cmd,
	.uring_cmd_iopoll = rrdma_shim_uring_iopoll,
	.llseek = noop_llseek,
};

static struct miscdevice rrdma_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "rrdma",
	.fops = &rrdma_fops,
};

bool rrdma_shim_warn_ratelimit(void)
{
	static DEFINE_RATELIMIT_STATE(rs, DEFAULT_RATELIMIT_INTERVAL,
				      DEFAULT_RATELIMIT_BURST);

	return __ratelimit(&rs);
}

unsigned long rrdma_shim_jiffies(void)
{
	return jiffies;
}

int rrdma_shim_register(void *core)
{
	u16 dev_mode = rrdma_param_dev_mode();
	int ret;

	/* _IOWR() is not an integer constant expression; it folds here. */
	BUILD_BUG_ON(RRDMA_IOCTL_GET_INFO != 0xC028E700);
	BUILD_BUG_ON(RRDMA_IOCTL_REGION_CREATE != 0xC028E701);
	BUILD_BUG_ON(RRDMA_IOCTL_REGION_DESTROY != 0x4008E702);
	BUILD_BUG_ON(RRDMA_IOCTL_SUBMIT != 0xC018E70C);
	BUILD_BUG_ON(RRDMA_IOCTL_RW_SYNC != 0x4030E70D);
	BUILD_BUG_ON(RRDMA_IOCTL_REGION_REGISTER != 0xC028E70E);

	if (dev_mode & ~0666) {
		pr_warn("dev_mode %#o has bits outside 0666\n", dev_mode);
		return -EINVAL;
	}
	rrdma_misc.mode = dev_mode;
	rrdma_core = core;
	/*
	 * WQ_MEM_RECLAIM: a disk's reconnect, teardown and completions run
	 * here, and reclaim may wait for that disk (swap): both queues keep a
	 * rescuer thread for when no worker can be created.
	 */
	rrdma_wq = alloc_workqueue("rrdma", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!rrdma_wq) {
		ret = -ENOMEM;
		goto out_core;
	}
	rrdma_comp_wq = alloc_workqueue("rrdma_comp",
					WQ_HIGHPRI | WQ_PERCPU | WQ_MEM_RECLAIM, 0);
	if (!rrdma_comp_wq) {
		ret = -ENOMEM;
		goto out_wq;
	}

	/* Devices first: /dev/rrdma must not answer before they are known. */
	ret = ib_register_client(&rrdma_ib_client);
	if (ret) {
		pr_warn("ib_register_client failed: %d\n", ret);
		goto out_wq;
	}
	ret = misc_register(&rrdma_misc);
	if (ret) {
		pr_warn("misc_register failed: %d\n", ret);
		goto out_client;
	}
	return 0;

out_client:
	ib_unregister_client(&rrdma_ib_client);
out_wq:
	if (rrdma_comp_wq)
		destroy_workqueue(rrdma_comp_wq);
	rrdma_comp_wq = NULL;
	destroy_workqueue(rrdma_wq);
	rrdma_wq = NULL;
out_core:
	rrdma_core = NULL;
	return ret;
}

void rrdma_shim_unregister(void)
{
	/* No open file can remain: each holds a reference on this module. */
	misc_deregister(&rrdma_misc);
	/* Calls rrdma_ib_remove() for every device, which waits for its users. */
	ib_unregister_client(&rrdma_ib_client);
	destroy_workqueue(rrdma_comp_wq);
	rrdma_comp_wq = NULL;
	destroy_workqueue(rrdma_wq);
	rrdma_wq = NULL;
	rrdma_core = NULL;
}
