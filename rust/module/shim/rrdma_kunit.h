/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma_kunit.ko: the KUnit cases implemented in Rust (rrdma_kunit.rs) and
 * the helper they call to report a failed expectation.
 */
#ifndef RRDMA_KUNIT_H
#define RRDMA_KUNIT_H

struct kunit;

void rrdma_kunit_fail(struct kunit *test, const char *file, int line,
		      const char *expr);

void rrdma_kt_ioctl_decode(struct kunit *test);
void rrdma_kt_ext_copy(struct kunit *test);
void rrdma_kt_info_validate(struct kunit *test);
void rrdma_kt_info_slots(struct kunit *test);
void rrdma_kt_codec(struct kunit *test);
void rrdma_kt_errno_mapping(struct kunit *test);
void rrdma_kt_release_guard(struct kunit *test);
void rrdma_kt_block_spans(struct kunit *test);
void rrdma_kt_handles(struct kunit *test);
void rrdma_kt_map_rules(struct kunit *test);
void rrdma_kt_wire(struct kunit *test);
void rrdma_kt_conn_machine(struct kunit *test);
void rrdma_kt_op_checks(struct kunit *test);
void rrdma_kt_segments(struct kunit *test);
void rrdma_kt_wc_errno(struct kunit *test);
void rrdma_kt_ring(struct kunit *test);
void rrdma_kt_op_limits(struct kunit *test);

#endif /* RRDMA_KUNIT_H */
