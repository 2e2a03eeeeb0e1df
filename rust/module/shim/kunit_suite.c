// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma_kunit.ko: registers rrdma's Rust KUnit cases through the C API,
 * because 6.12 has no #[kunit_tests].  The cases live in rrdma_kunit.rs.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "rrdma_kunit.h"

/* Called by the Rust cases for a failed expectation. */
void rrdma_kunit_fail(struct kunit *test, const char *file, int line,
		      const char *expr)
{
	KUNIT_FAIL(test, "%s:%d: expected %s", file, line, expr);
}

static struct kunit_case rrdma_kunit_cases[] = {
	KUNIT_CASE(rrdma_kt_ioctl_decode),
	KUNIT_CASE(rrdma_kt_ext_copy),
	KUNIT_CASE(rrdma_kt_info_validate),
	KUNIT_CASE(rrdma_kt_info_slots),
	KUNIT_CASE(rrdma_kt_codec),
	KUNIT_CASE(rrdma_kt_errno_mapping),
	KUNIT_CASE(rrdma_kt_release_guard),
	KUNIT_CASE(rrdma_kt_block_spans),
	KUNIT_CASE(rrdma_kt_handles),
	KUNIT_CASE(rrdma_kt_map_rules),
	KUNIT_CASE(rrdma_kt_wire),
	KUNIT_CASE(rrdma_kt_conn_machine),
	KUNIT_CASE(rrdma_kt_op_checks),
	KUNIT_CASE(rrdma_kt_segments),
	KUNIT_CASE(rrdma_kt_wc_errno),
	KUNIT_CASE(rrdma_kt_ring),
	KUNIT_CASE(rrdma_kt_op_limits),
	{}
};

static struct kunit_suite rrdma_kunit_suite = {
	.name = "rrdma",
	.test_cases = rrdma_kunit_cases,
};

kunit_test_suite(rrdma_kunit_suite);

/*
 * leak_on_purpose=1 leaks 16 small objects at load, so that the debug
 * guests can show their kmemleak check does report a leak
 * (tests/guest/basic.sh).  Several, because a stale copy of a pointer (a
 * register spilled to a stack that is cached for the next task) hides an
 * object from kmemleak until it is overwritten: one object alone went
 * unreported in one run of four.  The module keeps each pointer inverted,
 * a value kmemleak does not take for a reference, and frees the objects
 * at unload: an object a stale copy hid during the test is then not
 * reported by the scan at the end of the guest run, after the test.  Off
 * by default.
 */
#define RRDMA_KUNIT_LEAKS 16
static bool leak_on_purpose;
module_param(leak_on_purpose, bool, 0444);
MODULE_PARM_DESC(leak_on_purpose, "leak 16 small objects at load (tests of the leak check)");
static unsigned long rrdma_kunit_leaked[RRDMA_KUNIT_LEAKS];

static noinline unsigned long rrdma_kunit_leak(size_t size)
{
	char *p = kmalloc(size, GFP_KERNEL);

	if (p)
		memset(p, 0x5a, size);
	return p ? ~(unsigned long)p : 0;
}

static int __init rrdma_kunit_init(void)
{
	int i;

	if (leak_on_purpose) {
		for (i = 0; i < RRDMA_KUNIT_LEAKS; i++)
			rrdma_kunit_leaked[i] = rrdma_kunit_leak(64 + 8 * i);
		pr_info("rrdma_kunit: leaked 16 objects on purpose\n");
	}
	return 0;
}
module_init(rrdma_kunit_init);

static void __exit rrdma_kunit_exit(void)
{
	int i;

	for (i = 0; i < RRDMA_KUNIT_LEAKS; i++)
		if (rrdma_kunit_leaked[i])
			kfree((void *)~rrdma_kunit_leaked[i]);
}
module_exit(rrdma_kunit_exit);

MODULE_DESCRIPTION("KUnit tests of rrdma's logic");
MODULE_AUTHOR("The rrdma developers");
MODULE_LICENSE("GPL");
