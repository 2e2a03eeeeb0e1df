// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma-blk's sysfs files, /sys/block/rrdmabN/rrdma/: what an operator
 * needs to see of a disk the kernel keeps (its mapping process may be
 * gone).  One value per file; rrdma_rust_blk_status() reads them.
 *
 *  peer        the exporter's address (IP:PORT, [IPv6]:PORT)
 *  state       its connection: connected, reconnecting or down
 *  reconnects  times its connection came back (only grows)
 *  fences      flushes posted as fences on its import (only grows)
 *  zero_copy   reads and writes posted from or to their own pages (only
 *              grows; a request posted again counts again)
 *  staged      reads and writes posted through their staging slot: their
 *              queue pair could not reach their pages (an iWARP read
 *              whose pages have a gap between them; too many work
 *              requests; only grows)
 *  on_lanes    reads and writes posted on one of its connection's lanes,
 *              not on the connection's own queue pair (only grows; RoCE
 *              only: a zero-copy request goes on the lane its tag picks)
 *  reset       (write-only) any write ends the connection as a peer's
 *              disconnect would: it reconnects, I/O waits meanwhile
 *
 * The files go in del_gendisk(), which waits for a reader: the disk's
 * owner outlives them.
 */

#include <linux/blkdev.h>
#include <linux/socket.h>
#include <linux/sysfs.h>

#include "rrdma_shim.h"

static void rrdma_blk_status_of(struct device *dev,
				struct rrdma_shim_blk_status *s)
{
	memset(s, 0, sizeof(*s));
	rrdma_rust_blk_status(rrdma_shim_blk_owner(dev_to_disk(dev)), s);
}

static ssize_t peer_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	if (s.peer.family == AF_INET6)
		return sysfs_emit(buf, "[%pI6c]:%u\n", s.peer.addr,
				  s.peer.port);
	return sysfs_emit(buf, "%pI4:%u\n", s.peer.addr, s.peer.port);
}

static ssize_t state_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	static const char *const names[] = {
		[RRDMA_SHIM_BLK_UP] = "connected",
		[RRDMA_SHIM_BLK_RECONNECTING] = "reconnecting",
		[RRDMA_SHIM_BLK_DOWN] = "down",
	};
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	if (s.state >= ARRAY_SIZE(names))
		return -EIO;
	return sysfs_emit(buf, "%s\n", names[s.state]);
}

static ssize_t reconnects_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	return sysfs_emit(buf, "%llu\n", s.reconnects);
}

static ssize_t fences_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	return sysfs_emit(buf, "%llu\n", s.fences);
}

static ssize_t zero_copy_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	return sysfs_emit(buf, "%llu\n", s.zero_copy);
}

static ssize_t staged_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	return sysfs_emit(buf, "%llu\n", s.staged);
}

static ssize_t on_lanes_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	struct rrdma_shim_blk_status s;

	rrdma_blk_status_of(dev, &s);
	return sysfs_emit(buf, "%llu\n", s.on_lanes);
}

static ssize_t reset_store(struct device *dev, struct device_attribute *attr,
			   const char *buf, size_t count)
{
	rrdma_rust_blk_reset(rrdma_shim_blk_owner(dev_to_disk(dev)));
	return count;
}

static DEVICE_ATTR_RO(peer);
static DEVICE_ATTR_RO(state);
static DEVICE_ATTR_RO(reconnects);
static DEVICE_ATTR_RO(fences);
static DEVICE_ATTR_RO(zero_copy);
static DEVICE_ATTR_RO(staged);
static DEVICE_ATTR_RO(on_lanes);
static DEVICE_ATTR_WO(reset);

static struct attribute *rrdma_blk_attrs[] = {
	&dev_attr_peer.attr,
	&dev_attr_state.attr,
	&dev_attr_reconnects.attr,
	&dev_attr_fences.attr,
	&dev_attr_zero_copy.attr,
	&dev_attr_staged.attr,
	&dev_attr_on_lanes.attr,
	&dev_attr_reset.attr,
	NULL,
};

static const struct attribute_group rrdma_blk_group = {
	.name = "rrdma",
	.attrs = rrdma_blk_attrs,
};

const struct attribute_group *rrdma_shim_blk_groups[] = {
	&rrdma_blk_group,
	NULL,
};
