/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma C shim: the narrow interface between the Rust crate and the parts of
 * the kernel that Rust cannot reach on every supported kernel.
 *
 * Why C: the RDMA verbs are not in the kernel crate's bindings, many of them
 * are static inlines (ib_alloc_pd, ib_alloc_cq, ...), and struct layouts such
 * as struct ib_port_attr differ between kernel versions.  The misc device and
 * its file_operations live here too so that 6.12 (no Rust miscdevice) and 7.x
 * share one path.
 *
 * Conventions: functions named rrdma_shim_*() are C called by Rust; functions
 * named rrdma_rust_*() are Rust (#[no_mangle] extern "C") called by C.  Every
 * kernel object crosses as an opaque pointer; errors cross as negative errno.
 * The Rust mirror of this header is rust/module/ffi.rs.
 */
#ifndef RRDMA_SHIM_H
#define RRDMA_SHIM_H

#include <linux/bits.h>
#include <linux/types.h>

struct ib_device;
struct ib_pd;
struct ib_cq;
struct seq_file;
struct vm_area_struct;
struct page;
struct user_struct;

#define RRDMA_SHIM_NAME_MAX 64

/* rrdma_shim_device_attr.caps */
#define RRDMA_SHIM_CAP_MEM_MGT_EXT BIT(0) /* fast registration (FRWR) */

/**
 * struct rrdma_shim_device_attr - what rrdma needs to know of an ib_device
 * @name:	device name, NUL-terminated
 * @index:	kernel device index
 * @node_type:	enum rdma_node_type
 * @port_count:	number of ports
 * @port_state:	enum ib_port_state of the first port (IB_PORT_NOP if unknown)
 * @link_layer:	IB_LINK_LAYER_* of the first port
 * @caps:	RRDMA_SHIM_CAP_*
 * @node_guid:	node GUID as the kernel keeps it (big endian)
 */
struct rrdma_shim_device_attr {
	char name[RRDMA_SHIM_NAME_MAX];
	__u32 index;
	__u32 node_type;
	__u32 port_count;
	__u32 port_state;
	__u32 link_layer;
	__u32 caps;
	__u64 node_guid;
};

/* Device queries and verbs (shim/verbs.c). */
void rrdma_shim_device_query(struct ib_device *dev,
			     struct rrdma_shim_device_attr *attr);
int rrdma_shim_alloc_pd(struct ib_device *dev, struct ib_pd **pd);
void rrdma_shim_dealloc_pd(struct ib_pd *pd);
int rrdma_shim_alloc_cq(struct ib_device *dev, int nr_cqe, struct ib_cq **cq);
void rrdma_shim_free_cq(struct ib_cq *cq);

/**
 * struct rrdma_shim_vma_info - what Rust needs to check a mapping request
 * @start:	first address of the VMA
 * @end:	address past the VMA
 * @pgoff:	offset requested, in pages
 * @shared:	VM_SHARED is set
 * @exec:	VM_EXEC is set
 * @page_shift:	PAGE_SHIFT
 */
struct rrdma_shim_vma_info {
	__u64 start;
	__u64 end;
	__u64 pgoff;
	__u32 shared;
	__u32 exec;
	__u32 page_shift;
	__u32 pad;
};

/* Memory helpers for regions (shim/mm.c). */
void rrdma_shim_vma_info(struct vm_area_struct *vma,
			 struct rrdma_shim_vma_info *info);
int rrdma_shim_vma_map_pages(struct vm_area_struct *vma, struct page **pages,
			     unsigned long npages);
struct user_struct *rrdma_shim_memlock_charge(unsigned long npages, int *err);
void rrdma_shim_memlock_uncharge(struct user_struct *user, unsigned long npages);
bool rrdma_shim_should_stop(void);
void rrdma_shim_seq_u64(struct seq_file *m, const char *key, u64 value);
unsigned long rrdma_shim_page_size(void);
u64 rrdma_shim_max_region_bytes(void);

/* Registration of the ib_client and /dev/rrdma (shim/chardev.c). */
int rrdma_shim_register(void *core);
void rrdma_shim_unregister(void);
bool rrdma_shim_warn_ratelimit(void);

/* Implemented in Rust. */
int rrdma_rust_device_add(void *core, struct ib_device *dev, void **ctx);
void rrdma_rust_device_remove(void *core, struct ib_device *dev, void *ctx);
int rrdma_rust_file_open(void *core, void **file_state);
void rrdma_rust_file_release(void *file_state);
long rrdma_rust_file_ioctl(void *file_state, unsigned int cmd,
			   unsigned long arg);
int rrdma_rust_file_mmap(void *file_state, struct vm_area_struct *vma);
void rrdma_rust_file_show_fdinfo(void *file_state, struct seq_file *m);

#endif /* RRDMA_SHIM_H */
