// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma C shim: memory management helpers for regions.
 *
 * - mapping a region into a VMA (VMA operations that hold the region and
 *   fault its pages in, and the VMA flags that keep the mapping exactly what
 *   was registered);
 * - charging pinned pages to the caller's RLIMIT_MEMLOCK, the way
 *   ib_umem_get() and io_uring do;
 * - small helpers Rust cannot reach on every kernel (fdinfo, signals).
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/seq_file.h>

#include "rrdma_shim.h"

void rrdma_shim_vma_info(struct vm_area_struct *vma,
			 struct rrdma_shim_vma_info *info)
{
	info->start = vma->vm_start;
	info->end = vma->vm_end;
	info->pgoff = vma->vm_pgoff;
	info->shared = !!(vma->vm_flags & VM_SHARED);
	info->exec = !!(vma->vm_flags & VM_EXEC);
	info->page_shift = PAGE_SHIFT;
}

/*
 * Region mappings.  Each VMA of a region holds a reference on the region
 * (vm_private_data) from mmap(2), or from the split or move that made it,
 * until munmap: the region, its pages and its RLIMIT_MEMLOCK charge last as
 * long as any mapping does.  Pages are inserted on fault (not up front with
 * vm_insert_pages(), which makes the VMA VM_MIXEDMAP and fork copies the page
 * tables of such VMAs).  So a copy of the VMA in a fork(2) child - possible
 * once madvise(MADV_DOFORK) has cleared VM_DONTCOPY - has no page table
 * entries and no region, and its faults get SIGBUS: a mapping is never
 * inherited.
 */
static void rrdma_vm_open(struct vm_area_struct *vma)
{
	/* fork: dup_mmap() runs in the parent for the child's copy. */
	if (vma->vm_mm != current->mm) {
		vma->vm_private_data = NULL;
		return;
	}
	if (vma->vm_private_data)
		rrdma_rust_region_get(vma->vm_private_data);
}

static void rrdma_vm_close(struct vm_area_struct *vma)
{
	if (vma->vm_private_data)
		rrdma_rust_region_put(vma->vm_private_data);
}

static vm_fault_t rrdma_vm_fault(struct vm_fault *vmf)
{
	void *region = vmf->vma->vm_private_data;
	struct page *page;

	if (!region)
		return VM_FAULT_SIGBUS;
	page = rrdma_rust_region_page(region, vmf->pgoff);
	if (!page)
		return VM_FAULT_SIGBUS;
	get_page(page);
	vmf->page = page;
	return 0;
}

static const struct vm_operations_struct rrdma_vm_ops = {
	.open = rrdma_vm_open,
	.close = rrdma_vm_close,
	.fault = rrdma_vm_fault,
};

void rrdma_shim_vma_setup(struct vm_area_struct *vma, void *region)
{
	/*
	 * Not inherited by fork (see above), never grown by mremap, never
	 * executable, and not dumped.
	 */
	vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	vm_flags_clear(vma, VM_MAYEXEC);
	vma->vm_ops = &rrdma_vm_ops;
	vma->vm_private_data = region;
}

struct user_struct *rrdma_shim_memlock_charge(unsigned long npages, int *err)
{
	struct user_struct *user = get_uid(current_user());
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long cur = atomic_long_read(&user->locked_vm);
	unsigned long new;

	do {
		new = cur + npages;
		if (new < cur || (new > limit && !capable(CAP_IPC_LOCK))) {
			free_uid(user);
			*err = -ENOMEM;
			return NULL;
		}
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
	*err = 0;
	return user;
}

void rrdma_shim_memlock_uncharge(struct user_struct *user, unsigned long npages)
{
	atomic_long_sub(npages, &user->locked_vm);
	free_uid(user);
}

bool rrdma_shim_should_stop(void)
{
	cond_resched();
	return fatal_signal_pending(current);
}

void rrdma_shim_seq_u64(struct seq_file *m, const char *key, u64 value)
{
	seq_printf(m, "%s:\t%llu\n", key, value);
}

/*
 * Region memory in physically contiguous chunks: fewer descriptors to keep
 * (the module's memory per region) and to register.  The chunk is split, so
 * each page has its own reference count and maps, and frees, on its own.
 * Orders above 0 neither retry hard nor warn: the caller falls back.  The
 * pages are charged to the caller's memory cgroup (__GFP_ACCOUNT), like
 * io_uring's and ib_umem's pinned memory is.
 */
struct page *rrdma_shim_alloc_chunk(unsigned int order)
{
	gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_ZERO;
	struct page *page;

	if (order)
		gfp |= __GFP_NORETRY | __GFP_NOWARN;
	page = alloc_pages(gfp, order);
	if (page && order)
		split_page(page, order);
	return page;
}

void rrdma_shim_free_chunk(struct page *page, unsigned int order)
{
	unsigned long i;

	for (i = 0; i < (1UL << order); i++)
		put_page(page + i);
}

/*
 * A buddy allocation never crosses a memory section, so the struct pages of
 * one chunk are contiguous (newer kernels dropped nth_page() for that
 * reason).
 */
struct page *rrdma_shim_nth_page(struct page *page, unsigned long n)
{
	return page + n;
}

unsigned long rrdma_shim_page_size(void)
{
	return PAGE_SIZE;
}
