// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: the ib_client and the /dev/rrdma misc device.
 *
 * Both registrations are plain C so that every supported kernel takes the
 * same path; each callback forwards to Rust with the opaque core pointer
 * that rrdma_shim_register() was given.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/ratelimit.h>
#include <linux/seq_file.h>
#include <rdma/ib_verbs.h>

#include "rrdma_shim.h"
#include "uapi/rrdma.h"

/* Keep the C header and the Rust mirror (rust/abi/src/uapi.rs) in step. */
static_assert(sizeof(struct rrdma_info) == RRDMA_INFO_SIZE_VER0);
static_assert(sizeof(struct rrdma_device_info) == RRDMA_DEVICE_INFO_SIZE_VER0);
static_assert(sizeof(struct rrdma_region_create) ==
	      RRDMA_REGION_CREATE_SIZE_VER0);
static_assert(sizeof(struct rrdma_region_destroy) ==
	      RRDMA_REGION_DESTROY_SIZE_VER0);

MODULE_AUTHOR("The rrdma developers");

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

/* Set while registered; the callbacks below only run in that window. */
static void *rrdma_core;

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

static int rrdma_open(struct inode *inode, struct file *file)
{
	void *state;
	int ret;

	ret = rrdma_rust_file_open(rrdma_core, &state);
	if (ret)
		return ret;
	file->private_data = state;
	return 0;
}

static int rrdma_release(struct inode *inode, struct file *file)
{
	rrdma_rust_file_release(file->private_data);
	return 0;
}

static long rrdma_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return rrdma_rust_file_ioctl(file->private_data, cmd, arg);
}

static int rrdma_mmap(struct file *file, struct vm_area_struct *vma)
{
	return rrdma_rust_file_mmap(file->private_data, vma);
}

static void rrdma_show_fdinfo(struct seq_file *m, struct file *file)
{
	rrdma_rust_file_show_fdinfo(file->private_data, m);
}

static const struct file_operations rrdma_fops = {
	.owner = THIS_MODULE,
	.open = rrdma_open,
	.release = rrdma_release,
	.unlocked_ioctl = rrdma_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = rrdma_mmap,
	.show_fdinfo = rrdma_show_fdinfo,
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

int rrdma_shim_register(void *core)
{
	int ret;

	/* _IOWR() is not an integer constant expression; it folds here. */
	BUILD_BUG_ON(RRDMA_IOCTL_GET_INFO != 0xC028E700);
	BUILD_BUG_ON(RRDMA_IOCTL_REGION_CREATE != 0xC028E701);
	BUILD_BUG_ON(RRDMA_IOCTL_REGION_DESTROY != 0x4008E702);

	if (dev_mode & ~0666) {
		pr_warn("dev_mode %#o has bits outside 0666\n", dev_mode);
		return -EINVAL;
	}
	rrdma_misc.mode = dev_mode;
	rrdma_core = core;

	/* Devices first: /dev/rrdma must not answer before they are known. */
	ret = ib_register_client(&rrdma_ib_client);
	if (ret) {
		pr_warn("ib_register_client failed: %d\n", ret);
		goto out_core;
	}
	ret = misc_register(&rrdma_misc);
	if (ret) {
		pr_warn("misc_register failed: %d\n", ret);
		goto out_client;
	}
	return 0;

out_client:
	ib_unregister_client(&rrdma_ib_client);
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
	rrdma_core = NULL;
}
