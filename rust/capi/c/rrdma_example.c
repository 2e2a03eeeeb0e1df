// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rrdma-cexample: two programs' worth of librrdma, as a C user writes them.
 *
 *   rrdma-cexample serve RDMA_PORT TCP_PORT NBLOCKS
 *	creates a region of NBLOCKS 4 KiB blocks, exports it, and hands the
 *	token to one client over TCP (out of band, as rping and perftest
 *	exchange theirs); when the client says "VERIFY SEED", checks that
 *	every block holds what the client wrote, answers, and exits.
 *
 *   rrdma-cexample client PEER RDMA_PORT TCP_PORT
 *	takes the token, connects, imports the region, writes every block in
 *	batches (rrdma_submit, rrdma_wait), fences, reads them back through an
 *	io_uring ring (or synchronously where io_uring is off), compares, and
 *	asks the server to verify its memory.
 *
 * Exit status 0 only when everything matched and every object was freed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rrdma.h>

#define BS 4096u
#define OPS_PER_BATCH 32u
#define BLOCKS_PER_OP 4u

static int die(const char *what, int err)
{
	fprintf(stderr, "rrdma-cexample: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* The byte every client writes at offset @i of block @b, from @seed. */
static uint8_t pattern(uint64_t seed, uint64_t b, size_t i)
{
	uint64_t x = seed ^ (b * 0x9e3779b97f4a7c15ULL) ^ (i * 0xbf58476d1ce4e5b9ULL);

	return (uint8_t)(x ^ (x >> 29) ^ (x >> 47));
}

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (ip && inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		die("address", EINVAL);
	return a;
}

static FILE *tcp_accept_one(int port)
{
	struct sockaddr_in a = addr_of(NULL, port);
	int one = 1, ls, s;

	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1))
		die("tcp listen", errno);
	s = accept(ls, NULL, NULL);
	if (s < 0)
		die("tcp accept", errno);
	close(ls);
	return fdopen(s, "r+");
}

static FILE *tcp_connect(const char *ip, int port)
{
	struct sockaddr_in a = addr_of(ip, port);
	int s, i;

	for (i = 0; i < 150; i++) {	/* the server may not listen yet */
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0)
			die("socket", errno);
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			return fdopen(s, "r+");
		close(s);
		usleep(200000);
	}
	die("tcp connect", errno);
	return NULL;
}

static int serve(int rdma_port, int tcp_port, uint64_t nblocks)
{
	struct sockaddr_in any = addr_of(NULL, rdma_port);
	struct rrdma_listener *lst;
	struct rrdma_region *reg;
	struct rrdma_conn *conn;
	struct rrdma *dev;
	uint64_t token, seed, b;
	char line[128];
	uint8_t *mem;
	FILE *ctl;
	size_t i;
	int bad = 0;

	dev = rrdma_open(NULL);
	if (!dev)
		die("rrdma_open", errno);
	reg = rrdma_region_create(dev, BS, nblocks);
	if (!reg)
		die("rrdma_region_create", errno);
	lst = rrdma_listen(dev, (struct sockaddr *)&any, sizeof(any), 0);
	if (!lst)
		die("rrdma_listen", errno);
	if (rrdma_export_region(reg, RRDMA_ACCESS_READ | RRDMA_ACCESS_WRITE, NULL, &token))
		die("rrdma_export_region", errno);

	ctl = tcp_accept_one(tcp_port);
	fprintf(ctl, "TOKEN %016" PRIx64 " BLOCKS %" PRIu64 "\n", token, nblocks);
	fflush(ctl);
	/* The kernel accepted the client's connection itself; take it. */
	conn = rrdma_accept(lst, 30000);
	if (!conn)
		die("rrdma_accept", errno);
	if (!fgets(line, sizeof(line), ctl) ||
	    sscanf(line, "VERIFY %" SCNu64, &seed) != 1)
		die("client's VERIFY", EPROTO);

	mem = rrdma_region_addr(reg);
	for (b = 0; b < nblocks && !bad; b++)
		for (i = 0; i < BS; i++)
			if (mem[b * BS + i] != pattern(seed, b, i)) {
				fprintf(ctl, "BAD block %" PRIu64 " byte %zu\n", b, i);
				bad = 1;
				break;
			}
	if (!bad)
		fprintf(ctl, "OK %" PRIu64 "\n", nblocks);
	fclose(ctl);
	printf("exporter: %s %" PRIu64 " blocks written by the client\n",
	       bad ? "MISMATCH in" : "verified", nblocks);

	if (rrdma_unexport(dev, token) || rrdma_disconnect(conn) ||
	    rrdma_listener_close(lst) || rrdma_region_destroy(reg))
		die("teardown", errno);
	if (rrdma_close(dev))
		die("rrdma_close", errno);
	return bad;
}

/* Runs @n ops (each one completion); returns after all completed. */
static void run_batch(struct rrdma *dev, struct rrdma_op *ops, unsigned int n)
{
	struct rrdma_completion c[OPS_PER_BATCH];
	unsigned int done = 0, k;
	uint32_t seen = 0;
	int r;

	r = rrdma_submit(dev, ops, n, NULL);
	if (r != (int)n)
		die("rrdma_submit", r < 0 ? r : EAGAIN);
	while (done < n) {
		r = rrdma_wait(dev, c, OPS_PER_BATCH, 10000);
		if (r <= 0)
			die("rrdma_wait", r ? r : ETIMEDOUT);
		for (k = 0; k < (unsigned int)r; k++) {
			if (c[k].status)
				die("write completion", c[k].status);
			if (c[k].user_data >= n || (seen & (1u << c[k].user_data)) ||
			    c[k].bytes != BLOCKS_PER_OP * BS)
				die("completion not once, or short", EPROTO);
			seen |= 1u << c[k].user_data;
		}
		done += r;
	}
}

static int client(const char *peer, int rdma_port, int tcp_port)
{
	struct sockaddr_in to = addr_of(peer, rdma_port);
	struct rrdma_op ops[OPS_PER_BATCH];
	struct rrdma_cqe cqe[OPS_PER_BATCH];
	uint64_t token, nblocks, b, back, seed = 0x5eed0000c0ffeeULL;
	struct rrdma_region *local;
	struct rrdma_remote *rem;
	struct rrdma_uring *ring;
	struct rrdma_conn *conn;
	struct rrdma *dev;
	unsigned int n, got, tries;
	int ring_errno;
	char line[128];
	uint8_t *mem;
	FILE *ctl;
	size_t i;
	int r;

	ctl = tcp_connect(peer, tcp_port);
	if (!fgets(line, sizeof(line), ctl) ||
	    sscanf(line, "TOKEN %" SCNx64 " BLOCKS %" SCNu64, &token, &nblocks) != 2 ||
	    nblocks % (OPS_PER_BATCH * BLOCKS_PER_OP))
		die("server's TOKEN", EPROTO);

	dev = rrdma_open(NULL);
	if (!dev)
		die("rrdma_open", errno);
	conn = rrdma_connect(dev, (struct sockaddr *)&to, sizeof(to), 5000, NULL);
	if (!conn)
		die("rrdma_connect", errno);
	rem = rrdma_import_region(conn, token, 5000);
	if (!rem)
		die("rrdma_import_region", errno);
	if (rrdma_remote_nblocks(rem) != nblocks || rrdma_remote_block_size(rem) != BS ||
	    !rrdma_remote_writable(rem))
		die("import's geometry", EPROTO);
	/* Blocks [0, nblocks) are written from, [nblocks, 2 nblocks) read into. */
	local = rrdma_region_create(dev, BS, 2 * nblocks);
	if (!local)
		die("rrdma_region_create", errno);
	mem = rrdma_region_addr(local);
	for (b = 0; b < nblocks; b++)
		for (i = 0; i < BS; i++)
			mem[b * BS + i] = pattern(seed, b, i);

	for (b = 0; b < nblocks; b += n * BLOCKS_PER_OP) {
		for (n = 0; n < OPS_PER_BATCH; n++)
			if (rrdma_prep_write(&ops[n], rem, b + n * BLOCKS_PER_OP, local,
					     b + n * BLOCKS_PER_OP, BLOCKS_PER_OP, n))
				die("rrdma_prep_write", errno);
		run_batch(dev, ops, n);
	}
	if (rrdma_fence(rem))
		die("rrdma_fence", errno);
	printf("importer: wrote %" PRIu64 " blocks in batches of %u ops\n", nblocks, n);

	ring = rrdma_uring_create(dev, 64, 0);
	ring_errno = errno;
	if (ring) {
		for (b = 0; b < nblocks; b += n * BLOCKS_PER_OP) {
			for (n = 0; n < OPS_PER_BATCH; n++)
				rrdma_prep_read(&ops[n], rem, b + n * BLOCKS_PER_OP, local,
						nblocks + b + n * BLOCKS_PER_OP, BLOCKS_PER_OP, n);
			if (rrdma_uring_push(ring, ops, n) != (int)n)
				die("rrdma_uring_push", ENOSPC);
			r = rrdma_uring_submit(ring, n, 10000);
			if (r != (int)n)
				die("rrdma_uring_submit", r < 0 ? r : EAGAIN);
			for (got = 0, tries = 0; got < n; got += r) {
				if (++tries > 100)
					die("ring completions", ETIMEDOUT);
				r = rrdma_uring_reap(ring, cqe, OPS_PER_BATCH);
				if (r < 0)
					die("rrdma_uring_reap", r);
				for (i = 0; i < (size_t)r; i++)
					if (cqe[i].res != BLOCKS_PER_OP * BS)
						die("ring completion",
						    cqe[i].res < 0 ? cqe[i].res : EPROTO);
				if (!r && rrdma_uring_submit(ring, n - got, 10000) < 0)
					die("rrdma_uring_submit", errno);
			}
		}
		if (rrdma_uring_destroy(ring))
			die("rrdma_uring_destroy", errno);
		printf("importer: read %" PRIu64 " blocks back through io_uring\n", nblocks);
	} else {
		/* io_uring off (ENOSYS, EPERM): one synchronous call instead. */
		if (rrdma_read(rem, 0, local, nblocks, nblocks))
			die("rrdma_read", errno);
		printf("importer: read %" PRIu64 " blocks back synchronously (io_uring: %s)\n",
		       nblocks, strerror(ring_errno));
	}
	for (back = 0; back < nblocks * BS; back++)
		if (mem[nblocks * BS + back] != mem[back])
			die("read back differs from what was written", EIO);
	printf("importer: %" PRIu64 " blocks read back equal\n", nblocks);

	fprintf(ctl, "VERIFY %" PRIu64 "\n", seed);
	fflush(ctl);
	if (!fgets(line, sizeof(line), ctl) || strncmp(line, "OK ", 3))
		die("server's verification", EIO);
	printf("importer: server says %s", line);
	fclose(ctl);

	if (rrdma_unimport(rem) || rrdma_disconnect(conn) || rrdma_region_destroy(local))
		die("teardown", errno);
	if (rrdma_close(dev))
		die("rrdma_close", errno);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "serve"))
		return serve(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: %s serve RDMA_PORT TCP_PORT NBLOCKS\n"
		"       %s client PEER RDMA_PORT TCP_PORT\n(librrdma %s)\n",
		argv[0], argv[0], rrdma_version());
	return 2;
}
