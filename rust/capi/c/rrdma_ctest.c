// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rrdma-ctest: librrdma's own tests, as TAP lines, on one host: one
 * struct rrdma exports, another imports over a connection to this host's
 * own address (loopback through the RDMA device).
 *
 *   rrdma-ctest SELF_IP PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rrdma.h>

#define BS 4096u
#define NB 64u

static int n_test, n_failed;

static void result(int ok, const char *name, const char *why)
{
	n_test++;
	if (ok) {
		printf("ok %d - %s\n", n_test, name);
	} else {
		n_failed++;
		printf("not ok %d - %s # %s\n", n_test, name, why);
	}
	fflush(stdout);
}

/* Checks @cond; on failure says what errno was after it ran. */
#define CHECK(cond, name) do { \
	int ok_ = !!(cond), e_ = errno; char w_[64]; \
	snprintf(w_, sizeof(w_), "errno %d (%s)", e_, strerror(e_)); \
	result(ok_, name, w_); \
} while (0)

static void *mapping(size_t len, int memfd)
{
	int fd = -1;
	void *p;

	if (memfd) {
		fd = memfd_create("rrdma-ctest", 0);
		if (fd < 0 || ftruncate(fd, len))
			return NULL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 memfd ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
	if (fd >= 0)
		close(fd);
	return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char **argv)
{
	struct sockaddr_in self = { .sin_family = AF_INET };
	struct rrdma_region *xr, *lr, *mr, *tmp;
	struct rrdma_remote *rw, *ro, *none;
	struct rrdma_completion c[32];
	struct rrdma_op ops[16];
	struct rrdma_cqe cqe[16];
	struct rrdma_uring *ring;
	struct rrdma_listener *lst;
	struct rrdma_conn *conn, *acc;
	struct rrdma *a, *b;
	uint64_t tok_rw, tok_ro, seen;
	unsigned int refused, i;
	uint8_t *xm, *lm, *mm, *anon, *shm;
	const char *v;
	int r, n, k, got;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &self.sin_addr) != 1) {
		fprintf(stderr, "usage: %s SELF_IP PORT\n", argv[0]);
		return 2;
	}
	self.sin_port = htons(atoi(argv[2]));

	v = rrdma_version();
	CHECK(v && strchr(v, '.'), "rrdma_version is a version string");

	/* The conventions: -errno returned and errno set, NULL and errno. */
	errno = 0;
	CHECK(rrdma_close(NULL) == -EINVAL && errno == EINVAL, "NULL device: -EINVAL and errno");
	errno = 0;
	CHECK(!rrdma_region_create(NULL, BS, 1) && errno == EINVAL, "NULL device: NULL and errno");
	errno = 0;
	CHECK(!rrdma_open("/nonexistent/rrdma") && errno == ENOENT,
	      "open of a missing node: ENOENT");

	a = rrdma_open(NULL);
	b = rrdma_open(NULL);
	CHECK(a && b, "open /dev/rrdma twice");
	if (!a || !b)
		return 1;
	CHECK(rrdma_fd(a) >= 0 && rrdma_fd(a) != rrdma_fd(b), "rrdma_fd: one descriptor each");

	errno = 0;
	CHECK(!rrdma_region_create(a, 1000, 1) && errno == EINVAL, "block size 1000: EINVAL");
	xr = rrdma_region_create(a, BS, NB);
	CHECK(xr && rrdma_region_len(xr) == BS * NB && rrdma_region_nblocks(xr) == NB &&
	      rrdma_region_block_size(xr) == BS, "created region: its geometry");
	if (!xr)
		return 1;
	xm = rrdma_region_addr(xr);
	for (i = 0, r = 0; i < BS * NB; i++)
		r |= xm[i];
	CHECK(r == 0, "created region: mapped and zeroed");

	/* The importer's local side: the caller's own memory, both kinds. */
	anon = mapping(BS * NB, 0);
	shm = mapping(BS * NB, 1);
	lr = anon ? rrdma_region_register(b, anon, BS * NB, BS) : NULL;
	CHECK(lr && rrdma_region_addr(lr) == anon, "register anonymous memory");
	mr = shm ? rrdma_region_register(b, shm, BS * NB, BS) : NULL;
	CHECK(mr && rrdma_region_addr(mr) == shm, "register memfd memory");
	if (!lr || !mr)
		return 1;
	errno = 0;
	CHECK(!rrdma_region_register(b, anon + 1, BS, BS) && errno == EINVAL,
	      "register an unaligned address: EINVAL");
	lm = anon;
	mm = shm;

	errno = 0;
	CHECK(rrdma_close(b) == -EBUSY && errno == EBUSY && rrdma_fd(b) >= 0,
	      "close with live objects: -EBUSY, still open");

	lst = rrdma_listen(a, (struct sockaddr *)&self, sizeof(self), 0);
	CHECK(lst, "listen on the host's own address");
	CHECK(!rrdma_export_region(xr, RRDMA_ACCESS_READ | RRDMA_ACCESS_WRITE, NULL, &tok_rw) &&
	      !rrdma_export_region(xr, RRDMA_ACCESS_READ, NULL, &tok_ro) && tok_rw != tok_ro,
	      "export read-write and read-only: two tokens");
	errno = 0;
	CHECK(rrdma_export_region(xr, RRDMA_ACCESS_WRITE, NULL, &seen) == -EINVAL,
	      "export write without read: -EINVAL");
	conn = rrdma_connect(b, (struct sockaddr *)&self, sizeof(self), 5000, NULL);
	CHECK(conn, "connect to the listener");
	if (!lst || !conn)
		return 1;
	errno = 0;
	CHECK(rrdma_export_region(xr, RRDMA_ACCESS_READ, conn, &seen) == -EINVAL,
	      "export restricted to another file's connection: -EINVAL");
	acc = rrdma_accept(lst, 5000);
	CHECK(acc, "rrdma_accept: the listener's side of the connection");
	errno = 0;
	CHECK(!rrdma_accept(lst, 0) && errno == ETIMEDOUT,
	      "rrdma_accept with none waiting: ETIMEDOUT");
	{
		struct rrdma_connect_opts bad = { .flags = RRDMA_CONNECT_NO_KEEPALIVE,
						  .keepalive_ms = 500 };
		struct rrdma_connect_opts rsv = { .reserved = { 1 } };
		struct rrdma_connect_opts rc = { .flags = RRDMA_CONNECT_RECONNECT,
						 .keepalive_ms = 1000, .keepalive_misses = 3 };
		struct rrdma_conn *c2;

		errno = 0;
		CHECK(!rrdma_connect(b, (struct sockaddr *)&self, sizeof(self), 5000, &bad) &&
		      errno == EINVAL, "connect opts: keepalive fields with NO_KEEPALIVE: EINVAL");
		errno = 0;
		CHECK(!rrdma_connect(b, (struct sockaddr *)&self, sizeof(self), 5000, &rsv) &&
		      errno == EINVAL, "connect opts: reserved non-zero: EINVAL");
		c2 = rrdma_connect(b, (struct sockaddr *)&self, sizeof(self), 5000, &rc);
		CHECK(c2 && rrdma_disconnect(c2) == 0,
		      "connect with reconnect and keepalive options");
	}
	rw = rrdma_import_region(conn, tok_rw, 5000);
	ro = rrdma_import_region(conn, tok_ro, 5000);
	CHECK(rw && ro && rrdma_remote_nblocks(rw) == NB && rrdma_remote_block_size(rw) == BS &&
	      rrdma_remote_writable(rw) && !rrdma_remote_writable(ro) &&
	      rrdma_remote_max_op_blocks(rw) > 0, "import both: geometry and access");
	if (!rw || !ro)
		return 1;
	errno = 0;
	none = rrdma_import_region(conn, tok_rw ^ tok_ro ^ 1, 5000);
	CHECK(!none && errno == ENOENT, "import of an unknown token: ENOENT");

	/* Synchronous write lands in the exporter's memory; read comes back. */
	for (i = 0; i < BS * 4; i++)
		lm[i] = (uint8_t)(i * 7 + 3);
	CHECK(rrdma_write(rw, 8, lr, 0, 4) == 0 && !memcmp(xm + 8 * BS, lm, 4 * BS),
	      "rrdma_write: placed in the exporter's region");
	CHECK(rrdma_read(ro, 8, mr, 0, 4) == 0 && !memcmp(mm, lm, 4 * BS),
	      "rrdma_read through the read-only import: the same bytes");
	errno = 0;
	r = rrdma_write(ro, 0, lr, 0, 1);
	CHECK(r == -EPERM && errno == EPERM, "write through the read-only import: -EPERM");
	errno = 0;
	CHECK(rrdma_prep_read(&ops[0], rw, 0, xr, 0, 1, 0) == -EINVAL,
	      "op between objects of two files: -EINVAL");

	/* A batch: every op completes exactly once, with its bytes. */
	for (i = 0; i < 16; i++) {
		memset(lm + (16 + i) * BS, 0xa0 + i, BS);
		rrdma_prep_write(&ops[i], rw, 32 + i, lr, 16 + i, 1, 100 + i);
	}
	r = rrdma_submit(b, ops, 16, NULL);
	CHECK(r == 16, "submit 16 writes: all posted");
	seen = 0;
	for (n = 0; n < 16;) {
		r = rrdma_wait(b, c, 32, 10000);
		if (r <= 0)
			break;
		for (i = 0; i < (unsigned int)r; i++) {
			if (c[i].status || c[i].bytes != BS || c[i].opcode != RRDMA_OP_WRITE ||
			    c[i].user_data < 100 || c[i].user_data >= 116 ||
			    (seen & (1ull << (c[i].user_data - 100))))
				seen |= 1ull << 63;
			else
				seen |= 1ull << (c[i].user_data - 100);
		}
		n += r;
	}
	CHECK(n == 16 && seen == 0xffff, "16 completions, each op's once, status 0, bytes");
	CHECK(rrdma_wait(b, c, 32, 200) == 0, "no completion more");
	CHECK(rrdma_wait(b, c, 32, 0) == 0, "rrdma_wait with timeout 0 returns at once");

	/* Writes that complete once sent, then a fence: all placed after it. */
	for (i = 0; i < 4; i++) {
		memset(lm + (40 + i) * BS, 0x50 + i, BS);
		rrdma_prep_write_sent(&ops[i], rw, 48 + i, lr, 40 + i, 1, 300 + i);
	}
	rrdma_prep_fence(&ops[4], rw, 304);
	r = rrdma_submit(b, ops, 5, NULL);
	for (n = 0, seen = 0; r == 5 && n < 5;) {
		int got = rrdma_wait(b, c, 32, 10000);

		if (got <= 0)
			break;
		for (i = 0; i < (unsigned int)got; i++)
			if (!c[i].status && c[i].user_data >= 300 && c[i].user_data <= 304)
				seen |= 1ull << (c[i].user_data - 300);
		n += got;
	}
	for (i = 0; i < 4; i++)
		if (xm[(48 + i) * BS + 9] != 0x50 + i)
			seen = 0;
	CHECK(r == 5 && seen == 0x1f, "4 writes completing once sent, a fence: all placed");
	CHECK(rrdma_fence(rw) == 0, "rrdma_fence");
	for (i = 0, r = 0; i < 16; i++)
		r |= xm[(32 + i) * BS + 17] != 0xa0 + i;
	CHECK(r == 0, "the batch's blocks are in the exporter's region");

	/* A refused op: nothing posted, its index told. */
	rrdma_prep_read(&ops[0], rw, 0, mr, 0, 1, 1);
	rrdma_prep_read(&ops[1], rw, 1, mr, 1, 1, 2);
	rrdma_prep_read(&ops[2], rw, NB, mr, 2, 1, 3);
	refused = 99;
	r = rrdma_submit(b, ops, 3, &refused);
	CHECK(r == -ERANGE && refused == 2, "out-of-bounds op: -ERANGE, its index stored");
	CHECK(rrdma_wait(b, c, 32, 200) == 0, "nothing of the refused batch posted");

	/* io_uring: the same ops through a ring, plain and polled. */
	for (n = 0; n < 2; n++) {
		ring = rrdma_uring_create(b, 16, n ? RRDMA_URING_IOPOLL : 0);
		if (!ring) {
			printf("ok %d - io_uring ring %d # SKIP %s\n", ++n_test, n,
			       strerror(errno));
			continue;
		}
		memset(mm, 0, 16 * BS);
		for (i = 0; i < 8; i++)
			rrdma_prep_read(&ops[i], rw, 32 + i, mr, i, 1, 200 + i);
		r = rrdma_uring_push(ring, ops, 8);
		if (r == 8)
			r = rrdma_uring_submit(ring, 8, 10000);
		seen = 0;
		for (i = 0; i < 50 && r >= 0; i++) {
			int j, nr = rrdma_uring_reap(ring, cqe, 16);

			for (j = 0; j < nr; j++)
				if (cqe[j].res == (int)BS && cqe[j].user_data >= 200 &&
				    cqe[j].user_data < 208)
					seen |= 1ull << (cqe[j].user_data - 200);
			if (seen == 0xff)
				break;
			rrdma_uring_submit(ring, 1, 200);
		}
		for (i = 0; i < 8; i++)
			if (mm[i * BS] != 0xa0 + i)
				seen = 0;
		CHECK(seen == 0xff, n ? "io_uring IOPOLL ring: 8 reads, right bytes"
				      : "io_uring ring: 8 reads, right bytes");
		if (!n) {
			/* Reap 2 of 8; the 6 left count for the next submit. */
			struct timespec t0, t1;

			for (i = 0; i < 8; i++)
				rrdma_prep_read(&ops[i], rw, 32 + i, mr, i, 1, 400 + i);
			r = rrdma_uring_push(ring, ops, 8);
			if (r == 8)
				r = rrdma_uring_submit(ring, 8, 10000);
			k = rrdma_uring_reap(ring, cqe, 2);
			clock_gettime(CLOCK_MONOTONIC, &t0);
			rrdma_uring_submit(ring, 6, 3000);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			got = rrdma_uring_reap(ring, cqe, 16);
			CHECK(r == 8 && k == 2 && got == 6 && t1.tv_sec - t0.tv_sec < 2,
			      "io_uring: completions reaped later count for submit's wait");
		}
		CHECK(rrdma_uring_destroy(ring) == 0, "rrdma_uring_destroy");
	}

	/* A block device from the import, and back. */
	r = rrdma_blk_map(rw, 1, &i);
	if (r == 0) {
		char path[32];
		struct stat st;
		int found = 0;

		snprintf(path, sizeof(path), "/dev/rrdmab%u", i);
		for (n = 0; n < 50 && !found; n++) {
			found = !stat(path, &st) && S_ISBLK(st.st_mode);
			if (!found)
				usleep(100000);
		}
		CHECK(found, "rrdma_blk_map: /dev/rrdmabN appears");
		CHECK(rrdma_blk_unmap(a, i, 0) == 0, "rrdma_blk_unmap");
	} else {
		CHECK(r == 0, "rrdma_blk_map");
	}

	/* An exported region stays until unexported; unexport revokes. */
	errno = 0;
	tmp = xr;
	CHECK(rrdma_region_destroy(xr) == -EBUSY && rrdma_region_addr(xr) == xm &&
	      xm[8 * BS] == lm[0], "destroy while exported: -EBUSY, region intact");
	CHECK(rrdma_unexport(a, tok_rw) == 0, "rrdma_unexport");
	errno = 0;
	r = rrdma_read(rw, 0, mr, 0, 1);
	CHECK(r == -EKEYREVOKED && errno == EKEYREVOKED, "read after unexport: -EKEYREVOKED");
	CHECK(rrdma_unexport(a, tok_rw) < 0, "second unexport of the token fails");
	CHECK(rrdma_unexport(a, tok_ro) == 0, "unexport the read-only token");

	CHECK(rrdma_unimport(rw) == 0 && rrdma_unimport(ro) == 0 && rrdma_disconnect(conn) == 0 &&
	      (!acc || rrdma_disconnect(acc) == 0), "unimport and disconnect");
	CHECK(rrdma_listener_close(lst) == 0 && rrdma_region_destroy(tmp) == 0,
	      "listener closed, region destroyed");
	/* What the test left there: lm[0] = 3 written, mm[0] read back 0xa0. */
	CHECK(rrdma_region_destroy(lr) == 0 && rrdma_region_destroy(mr) == 0 &&
	      anon[0] == 3 && shm[0] == 0xa0,
	      "registered regions destroyed, their memory still mapped and as left");
	CHECK(rrdma_close(a) == 0 && rrdma_close(b) == 0, "both closed: no object left");
	munmap(anon, BS * NB);
	munmap(shm, BS * NB);

	printf("1..%d\n", n_test);
	return n_failed != 0;
}
