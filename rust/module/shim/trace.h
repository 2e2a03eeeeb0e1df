/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrdma's tracepoints (TRACE_SYSTEM rrdma), defined in shim/trace.c and
 * fired by Rust through the rrdma_shim_trace_*() calls there: a
 * connection's life (rrdma_conn_new, rrdma_conn_state for every step of
 * its state machine, rrdma_reconnect_attempt), revocation on both sides
 * (rrdma_unexport, rrdma_import_revoked), operations that fail
 * (rrdma_op_failed) and device removal (rrdma_device_remove).  A
 * connection is named by its serial number (unique, never reused); no
 * key is recorded, the peer's address only by rrdma_conn_new and
 * rrdma_reconnect_attempt.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rrdma

#if !defined(_TRACE_RRDMA_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_RRDMA_H

#include <linux/in6.h>
#include <linux/socket.h>
#include <linux/tracepoint.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
/* rdma_show_wc_status(), whose enum tables need the three above. */
#include <trace/misc/rdma.h>

TRACE_EVENT(rrdma_conn_new,
	TP_PROTO(u64 conn, const struct sockaddr_storage *peer, bool active,
		 bool disk),
	TP_ARGS(conn, peer, active, disk),
	TP_STRUCT__entry(
		__field(u64, conn)
		__array(unsigned char, peer, sizeof(struct sockaddr_in6))
		__field(bool, active)
		__field(bool, disk)
	),
	TP_fast_assign(
		__entry->conn = conn;
		memcpy(__entry->peer, peer, sizeof(struct sockaddr_in6));
		__entry->active = active;
		__entry->disk = disk;
	),
	TP_printk("conn=%llu peer=%pISpc %s%s", __entry->conn, __entry->peer,
		  __entry->active ? "connect" : "accept",
		  __entry->disk ? " (a disk's)" : "")
);

TRACE_EVENT(rrdma_conn_state,
	TP_PROTO(u64 conn, const char *event, int status, const char *from,
		 const char *to, const char *action, int error),
	TP_ARGS(conn, event, status, from, to, action, error),
	TP_STRUCT__entry(
		__field(u64, conn)
		__string(event, event)
		__field(int, status)
		__string(from, from)
		__string(to, to)
		__string(action, action)
		__field(int, error)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__assign_str(event);
		__entry->status = status;
		__assign_str(from);
		__assign_str(to);
		__assign_str(action);
		__entry->error = error;
	),
	TP_printk("conn=%llu event=%s status=%d %s->%s action=%s error=%d",
		  __entry->conn, __get_str(event), __entry->status,
		  __get_str(from), __get_str(to), __get_str(action),
		  __entry->error)
);

TRACE_EVENT(rrdma_reconnect_attempt,
	TP_PROTO(u64 conn, u32 attempt, const struct sockaddr_storage *peer),
	TP_ARGS(conn, attempt, peer),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, attempt)
		__array(unsigned char, peer, sizeof(struct sockaddr_in6))
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->attempt = attempt;
		memcpy(__entry->peer, peer, sizeof(struct sockaddr_in6));
	),
	TP_printk("conn=%llu attempt=%u peer=%pISpc", __entry->conn,
		  __entry->attempt, __entry->peer)
);

TRACE_EVENT(rrdma_unexport,
	TP_PROTO(u64 token, u32 conns),
	TP_ARGS(token, conns),
	TP_STRUCT__entry(
		__field(u64, token)
		__field(u32, conns)
	),
	TP_fast_assign(
		__entry->token = token;
		__entry->conns = conns;
	),
	TP_printk("token=%#llx revoked on %u connections", __entry->token,
		  __entry->conns)
);

TRACE_EVENT(rrdma_import_revoked,
	TP_PROTO(u64 conn, u64 token),
	TP_ARGS(conn, token),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u64, token)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->token = token;
	),
	TP_printk("conn=%llu token=%#llx", __entry->conn, __entry->token)
);

TRACE_EVENT(rrdma_import_answer,
	TP_PROTO(u64 conn, u64 token, u32 first, u32 nkeys),
	TP_ARGS(conn, token, first, nkeys),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u64, token)
		__field(u32, first)
		__field(u32, nkeys)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->token = token;
		__entry->first = first;
		__entry->nkeys = nkeys;
	),
	TP_printk("conn=%llu token=%#llx first=%u nkeys=%u", __entry->conn,
		  __entry->token, __entry->first, __entry->nkeys)
);

TRACE_EVENT(rrdma_op_failed,
	TP_PROTO(u64 conn, u32 opcode, int error, int wc_status),
	TP_ARGS(conn, opcode, error, wc_status),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, opcode)
		__field(int, error)
		__field(int, wc_status)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->opcode = opcode;
		__entry->error = error;
		__entry->wc_status = wc_status;
	),
	TP_printk("conn=%llu opcode=%u error=%d wc=%s", __entry->conn,
		  __entry->opcode, __entry->error,
		  rdma_show_wc_status(__entry->wc_status))
);

TRACE_EVENT(rrdma_device_remove,
	TP_PROTO(const char *name),
	TP_ARGS(name),
	TP_STRUCT__entry(
		__string(name, name)
	),
	TP_fast_assign(
		__assign_str(name);
	),
	TP_printk("device=%s", __get_str(name))
);

#endif /* _TRACE_RRDMA_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
