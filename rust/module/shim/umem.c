// SPDX-License-Identifier: GPL-2.0
/*
 * Registered user memory (REGION_REGISTER): the caller's own pages, pinned
 * long term as ib_umem_get() pins them (FOLL_LONGTERM, so that they are
 * never migrated under the NIC, and FOLL_WRITE, so that a copy-on-write
 * page is broken before it is pinned: the region is the caller's memory,
 * not a page it shares with a fork).
 *
 * Only memory a NIC may keep is accepted, checked here before pinning so
 * that each refusal has its own errno and reason: anonymous, shmem and
 * hugetlb mappings, writable.  GUP refuses VM_IO/VM_PFNMAP and DAX on its
 * own, but not a shared file mapping without writeback (another driver's
 * pages, ramfs): a mapping that changed between the check and the pin is
 * caught by the check of each pinned page's folio afterwards.
 */

#include <linux/hugetlb.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/shmem_fs.h>

#include "rrdma_shim.h"

/* Pages pinned per call: a fatal signal is noticed between batches. */
#define RRDMA_PIN_BATCH 512

static const char *umem_refusal(struct vm_area_struct *vma, int *err)
{
	*err = -EOPNOTSUPP;
	if (vma->vm_flags & (VM_IO | VM_PFNMAP))
		return "device memory (VM_IO or VM_PFNMAP)";
	if (vma_is_dax(vma))
		return "DAX memory";
	if (!vma_is_anonymous(vma) && !is_vm_hugetlb_page(vma) &&
	    !(vma->vm_file && shmem_mapping(vma->vm_file->f_mapping)))
		return "file-backed memory other than shmem or hugetlb";
	*err = -EACCES;
	if (!(vma->vm_flags & VM_WRITE))
		return "a mapping that is not writable";
	*err = 0;
	return NULL;
}

/*
 * Checks that [@addr, @addr + @npages pages) is mapped, writable and of a
 * kind rrdma registers; 0, or a negative errno with *@why set.
 */
static int umem_check(unsigned long addr, unsigned long npages,
		      const char **why)
{
	struct mm_struct *mm = current->mm;
	unsigned long end = addr + (npages << PAGE_SHIFT);
	struct vm_area_struct *vma;
	int err = 0;

	if (!mm) {
		*why = "no address space";
		return -EFAULT;
	}
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	while (addr < end) {
		vma = vma_lookup(mm, addr);
		if (!vma) {
			*why = "part of the range is not mapped";
			err = -EFAULT;
			break;
		}
		*why = umem_refusal(vma, &err);
		if (err)
			break;
		addr = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return err;
}

/* A pinned page of a kind rrdma registers: anonymous, hugetlb or shmem. */
static bool umem_page_ok(struct page *page)
{
	struct folio *folio = page_folio(page);
	struct address_space *mapping;

	if (folio_test_anon(folio) || folio_test_hugetlb(folio))
		return true;
	mapping = READ_ONCE(folio->mapping);
	return mapping && shmem_mapping(mapping);
}

int rrdma_shim_umem_pin(u64 addr, unsigned long npages, struct page **pages,
			const char **why)
{
	unsigned long done = 0;
	int ret;

	*why = NULL;
	if (addr != (unsigned long)addr ||
	    npages > (TASK_SIZE - (unsigned long)addr) >> PAGE_SHIFT) {
		*why = "the range is outside the address space";
		return -EFAULT;
	}
	ret = umem_check(addr, npages, why);
	if (ret)
		return ret;
	while (done < npages) {
		int n = min_t(unsigned long, npages - done, RRDMA_PIN_BATCH);

		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		ret = pin_user_pages_fast(addr + (done << PAGE_SHIFT), n,
					  FOLL_WRITE | FOLL_LONGTERM,
					  pages + done);
		if (ret <= 0) {
			*why = "the pages could not be pinned";
			ret = ret ? ret : -EFAULT;
			break;
		}
		done += ret;
		ret = 0;
		cond_resched();
	}
	for (unsigned long i = 0; !ret && i < done; i++) {
		if (!umem_page_ok(pages[i])) {
			*why = "memory not anonymous, shmem or hugetlb (the mapping changed)";
			ret = -EOPNOTSUPP;
		}
	}
	if (ret && done)
		unpin_user_pages(pages, done);
	return ret;
}

void rrdma_shim_umem_unpin(struct page **pages, unsigned long npages)
{
	/* The NIC may have written them: dirty, so that shmem keeps it. */
	unpin_user_pages_dirty_lock(pages, npages, true);
}
