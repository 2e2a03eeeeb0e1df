// SPDX-License-Identifier: GPL-2.0
/*
 * rrdma's tracepoints (shim/trace.h): the calls Rust fires them with.
 * Each is a static-key test while its event is off.  Any context.
 */
#define CREATE_TRACE_POINTS
#include "trace.h"

#include "rrdma_shim.h"

void rrdma_shim_trace_conn_new(u64 conn, const struct rrdma_shim_addr *peer,
			       bool active, bool disk)
{
	struct sockaddr_storage ss;

	if (!trace_rrdma_conn_new_enabled())
		return;
	rrdma_shim_addr_to_sockaddr(peer, &ss);
	trace_rrdma_conn_new(conn, &ss, active, disk);
}

void rrdma_shim_trace_conn_state(u64 conn, const char *event, int status,
				 const char *from, const char *to,
				 const char *action, int error)
{
	trace_rrdma_conn_state(conn, event, status, from, to, action, error);
}

void rrdma_shim_trace_reconnect_attempt(u64 conn, u32 attempt,
					const struct rrdma_shim_addr *peer)
{
	struct sockaddr_storage ss;

	if (!trace_rrdma_reconnect_attempt_enabled())
		return;
	rrdma_shim_addr_to_sockaddr(peer, &ss);
	trace_rrdma_reconnect_attempt(conn, attempt, &ss);
}

void rrdma_shim_trace_unexport(u64 token, u32 conns)
{
	trace_rrdma_unexport(token, conns);
}

void rrdma_shim_trace_import_revoked(u64 conn, u64 token)
{
	trace_rrdma_import_revoked(conn, token);
}

void rrdma_shim_trace_import_answer(u64 conn, u64 token, u32 first, u32 nkeys)
{
	trace_rrdma_import_answer(conn, token, first, nkeys);
}

void rrdma_shim_trace_op_failed(u64 conn, u32 opcode, int error, int wc_status)
{
	trace_rrdma_op_failed(conn, opcode, error, wc_status);
}

void rrdma_shim_trace_device_remove(const char *name)
{
	trace_rrdma_device_remove(name);
}
