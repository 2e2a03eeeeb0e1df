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
 * The Rust mirror of this header is rust/module/ffi/ (one file per concern);
 * every struct below that crosses by pointer, and every constant Rust uses,
 * is checked at build time on both sides (shim/layout.c, ffi/layout.rs).
 *
 * Calling contexts of the rrdma_rust_*() callbacks.  C never calls one with
 * a QP's @lock or @sinks_lock held (shim/qp_internal.h).  All run in process
 * context, and may sleep, except rrdma_rust_ops_done(), which a send CQ's
 * softirq poll calls too, and an unplug from schedule:
 *  - device add/remove (ib_client), file operations, VMA open/close/fault:
 *    process context, as ib_core, the VFS and the mm call them;
 *  - rrdma_rust_file_uring_op: io_uring's ->uring_cmd, process context
 *    (the submitting task, usually holding the ring's lock, or an io-wq
 *    worker); @nonblock: io_uring asks for an issue that does not wait;
 *  - rdma_cm events (rrdma_rust_conn_event, rrdma_rust_listen_*): the
 *    rdma_cm work queues, process context, with the id's handler mutex held:
 *    Rust must not call rdma_destroy_id() on that id from there, and must not
 *    hold its own locks across rdma_destroy_id() anywhere else;
 *  - a receive CQ's completions (rrdma_rust_ctrl_recv, _lane_recv,
 *    _qp_error): it is IB_POLL_UNBOUND_WORKQUEUE, so ib_comp_unbound_wq,
 *    process context;
 *  - a send CQ's completions other than an operation's that succeeded
 *    (rrdma_rust_ctrl_sent, _quiet_done, and failed operations'):
 *    its work item on rrdma's completion work queue (rrdma_shim_comp_wq(),
 *    shim/cq.c), process context, no shim lock held;
 *  - rrdma_rust_ops_done_atomic (the operation completions of one poll of
 *    a send CQ, as one batch, successful ones only): in softirq (the CQ's
 *    irq_poll) with the QP's @poll_lock held, or in a task that polls for
 *    its own operations (rrdma_shim_qp_poll(), _iopoll(); an IOPOLL one
 *    holds io_uring's ring lock) with @poll_lock held and softirqs off;
 *    rrdma_rust_ops_done: the same from the work item above (process
 *    context; a failed completion comes only this way).  Rust's atomic
 *    entry holds no proof of process context (rust/module/calling.rs), so
 *    it cannot reach what needs one; neither entry may sleep or take a
 *    mutex or a lock that is not softirq-safe where the atomic one can:
 *    what it reaches (Conn::slots_done, Conn::end_slot, Conn::heard,
 *    Conn::post_open_group, OpCtx::finish with SyncWait::set,
 *    UringCmd::complete and BlkRequest::end (rrdma_shim_blk_end(): a
 *    requeue, or blk_mq_complete_request()), Shared::complete, Shared::wake_readers,
 *    Conn::ask_followups) takes a path's lock, Shared::ring and
 *    SyncWait::status (softirq-safe spinlocks), posts (rrdma_shim_post(),
 *    under @lock), completes io_uring commands
 *    (rrdma_shim_uring_complete()), wakes a file's readers and queues
 *    work; what needs the connection's mutex is left to that work, and a
 *    batch with a failed completion (which does) comes only on the CQ's
 *    work item, through rrdma_rust_ops_done;
 *  - rrdma_rust_conn_timer: rrdma's work queue, process context;
 *  - rrdma_rust_iopoll_window_ns, _poll_mean_after: any context (pure
 *    arithmetic and a read of module parameters);
 *  - rrdma_rust_conn_unplug: the submitting task, in io_uring's submission
 *    with its plug closing (process context), or with @from_schedule on
 *    its way to sleep, where Rust must not sleep nor take a sleeping lock.
 */
#ifndef RRDMA_SHIM_H
#define RRDMA_SHIM_H

#include <linux/bits.h>
#include <linux/types.h>

struct ib_device;
struct ib_pd;
struct seq_file;
struct vm_area_struct;
struct page;
struct user_struct;
struct rdma_cm_id;
struct rrdma_shim_qp;
struct rrdma_shim_mr;
struct rrdma_shim_timer;
struct spinlock;
struct workqueue_struct;
struct io_uring_cmd;
struct io_comp_batch;
struct rrdma_op;

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

/**
 * struct rrdma_shim_device_limits - a device's limits rrdma respects
 * @max_qp_wr:		work requests per queue of a QP
 * @max_cqe:		entries per CQ
 * @max_send_sge:	SGEs per send work request
 * @max_recv_sge:	SGEs per receive work request
 * @max_sge_rd:		SGEs per RDMA READ
 * @max_fast_reg_pages:	pages per fast registration
 * @max_mr:		memory registrations on the device
 *
 * Filled with the device's own limits, or with the module's limit_*
 * parameters (0: no clamp); Rust takes the lower of each pair.
 */
struct rrdma_shim_device_limits {
	__u32 max_qp_wr;
	__u32 max_cqe;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 max_sge_rd;
	__u32 max_fast_reg_pages;
	__u32 max_mr;
};

/* Device queries and verbs (shim/verbs.c). */
void rrdma_shim_device_query(struct ib_device *dev,
			     struct rrdma_shim_device_attr *attr);
void rrdma_shim_device_limits(struct ib_device *dev,
			      struct rrdma_shim_device_limits *dev_limits,
			      struct rrdma_shim_device_limits *clamp);
int rrdma_shim_alloc_pd(struct ib_device *dev, struct ib_pd **pd);
void rrdma_shim_dealloc_pd(struct ib_pd *pd);

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
void rrdma_shim_vma_setup(struct vm_area_struct *vma, void *region);
struct user_struct *rrdma_shim_memlock_charge(unsigned long npages, int *err);
void rrdma_shim_memlock_uncharge(struct user_struct *user, unsigned long npages);
bool rrdma_shim_should_stop(void);
void rrdma_shim_seq_u64(struct seq_file *m, const char *key, u64 value);
unsigned long rrdma_shim_page_size(void);
struct page *rrdma_shim_alloc_chunk(unsigned int order);
void rrdma_shim_free_chunk(struct page *page, unsigned int order);
struct page *rrdma_shim_nth_page(struct page *page, unsigned long n);
u64 rrdma_shim_max_region_bytes(void);
u32 rrdma_shim_cap(u32 kind, bool user);
u32 rrdma_shim_blk_loss_timeout_ms(void);

/*
 * Registered user memory (shim/umem.c): pins @npages pages of the caller's
 * memory at @addr into @pages (0), or refuses with a negative errno and
 * *@why saying why (a static string); unpins them.  Process context.
 */
int rrdma_shim_umem_pin(u64 addr, unsigned long npages, struct page **pages,
			const char **why);
void rrdma_shim_umem_unpin(struct page **pages, unsigned long npages);

/**
 * struct rrdma_shim_addr - IP address and port; same layout as the UAPI's
 * struct rrdma_addr (family AF_INET/AF_INET6, port in host order, address
 * in network order)
 */
struct rrdma_shim_addr {
	__u16 family;
	__u16 port;
	__u32 scope_id;
	__u8 addr[16];
};

struct sockaddr_storage;
void rrdma_shim_addr_to_sockaddr(const struct rrdma_shim_addr *a,
				 struct sockaddr_storage *ss);

/*
 * Tracepoints (shim/trace.c, shim/trace.h): a connection by its serial
 * number; names are C strings the event copies.  Any context.
 */
void rrdma_shim_trace_conn_new(u64 conn, const struct rrdma_shim_addr *peer,
			       bool active, bool disk);
void rrdma_shim_trace_conn_state(u64 conn, const char *event, int status,
				 const char *from, const char *to,
				 const char *action, int error);
void rrdma_shim_trace_reconnect_attempt(u64 conn, u32 attempt,
					const struct rrdma_shim_addr *peer);
void rrdma_shim_trace_unexport(u64 token, u32 conns);
void rrdma_shim_trace_import_revoked(u64 conn, u64 token);
void rrdma_shim_trace_import_answer(u64 conn, u64 token, u32 first, u32 nkeys);
void rrdma_shim_trace_op_failed(u64 conn, u32 opcode, int error, int wc_status);
void rrdma_shim_trace_device_remove(const char *name);

/* Work requests and completion batches (wr_shim.h). */
#include "wr_shim.h"

/* Largest control message (the shim copies one to its stack). */
#define RRDMA_SHIM_CTRL_MAX	512

/* rdma_cm ids (shim/cm.c). */
int rrdma_shim_cm_create(void *owner, bool listener, struct rdma_cm_id **out);
int rrdma_shim_cm_resolve_addr(struct rdma_cm_id *id,
			       const struct rrdma_shim_addr *dst, u32 timeout_ms);
int rrdma_shim_cm_bind_listen(struct rdma_cm_id *id,
			      const struct rrdma_shim_addr *src, u32 backlog);
int rrdma_shim_cm_resolve_route(struct rdma_cm_id *id, u32 timeout_ms);
int rrdma_shim_cm_connect(struct rdma_cm_id *id, const void *pdata, u8 len);
/* The fail_at test hook's points (bits of the module parameter). */
#define RRDMA_SHIM_FAIL_ACCEPT		0 /* a connection's accept */
#define RRDMA_SHIM_FAIL_LANE_ACCEPT	1 /* a data lane's accept */
bool rrdma_shim_fail_at(u32 point);
int rrdma_shim_cm_accept(struct rdma_cm_id *id, const void *pdata, u8 len,
			 u8 peer_initiator, u8 peer_responder);
int rrdma_shim_cm_reject(struct rdma_cm_id *id, const void *pdata, u8 len);
int rrdma_shim_cm_disconnect(struct rdma_cm_id *id);
void rrdma_shim_cm_destroy_id(struct rdma_cm_id *id);
struct ib_device *rrdma_shim_cm_device(struct rdma_cm_id *id);
void rrdma_shim_cm_peer(struct rdma_cm_id *id, struct rrdma_shim_addr *out);

/*
 * Queue pairs (shim/qp.c), their send CQs (cq.c) and polling tasks (poll.c),
 * control messages (ctrl.c) and posting (post.c).
 */
int rrdma_shim_qp_create(struct rdma_cm_id *id, struct ib_pd *pd, void *owner,
			 u32 lane, u32 sq_depth, u32 nops, u32 nrecv,
			 u32 nrecv_idle, u32 nsend, u32 nsend_idle,
			 u32 msg_len, u32 nsinks, u32 data_sinks,
			 u32 sink_pages, u32 dma_sge, u32 dma_sge_rd,
			 struct rrdma_shim_qp **out);
int rrdma_shim_qp_ctrl_grow(struct rrdma_shim_qp *q);
int rrdma_shim_qp_stop(struct rrdma_shim_qp *q);
void rrdma_shim_qp_drain(struct rrdma_shim_qp *q);
u32 rrdma_shim_qp_destroy(struct rrdma_shim_qp *q);
int rrdma_shim_qp_sinks_alloc(struct rrdma_shim_qp *q);
bool rrdma_shim_qp_has_sinks(struct rrdma_shim_qp *q);
u32 rrdma_shim_qp_dma_sge(struct rrdma_shim_qp *q, bool read);
int rrdma_shim_qp_poll(struct rrdma_shim_qp *q);
void rrdma_shim_qp_poll_get(struct rrdma_shim_qp *q);
void rrdma_shim_qp_poll_put(struct rrdma_shim_qp *q);
/* For shim/uring.c's IOPOLL (C only): see shim/poll.c. */
void rrdma_shim_qp_iopoll_wake(struct rrdma_shim_qp *q);
int rrdma_shim_qp_iopoll(struct rrdma_shim_qp *q, const void *ring,
			 bool oneshot);
bool rrdma_shim_qp_iopolled(struct rrdma_shim_qp *q, const void *ring);
bool rrdma_shim_qp_poll_tryget(struct rrdma_shim_qp *q);
void rrdma_shim_qp_ref(struct rrdma_shim_qp *q);
void rrdma_shim_qp_unref(struct rrdma_shim_qp *q);
void rrdma_shim_sync_poll_params(bool *on, u32 *fixed_us);
void rrdma_shim_read_gather_params(bool *on, u32 *fixed_us);
void rrdma_shim_iopoll_params(bool *on, u32 *fixed_us);
u64 rrdma_shim_now_ns(void);
void rrdma_shim_yield(void);
int rrdma_shim_ctrl_send(struct rrdma_shim_qp *q, const void *msg, u32 len);
int rrdma_shim_post(struct rrdma_shim_qp *q, const struct rrdma_shim_wr *wrs,
		    u32 n, u32 *posted);

/* Fast-registration MRs (shim/mr.c). */
struct rrdma_shim_mr *rrdma_shim_mr_alloc(struct ib_pd *pd, struct page **pages,
					  u32 npages, u64 iova, int *err);
void rrdma_shim_mr_keys(struct rrdma_shim_mr *m, u32 *lkey, u32 *rkey);
void rrdma_shim_mr_free(struct rrdma_shim_mr *m);

/*
 * A connection's timer (shim/conn_timer.c), and the module parameters of
 * keepalive and reconnect (shim/params.c).
 */
void rrdma_shim_keepalive_params(u32 *ms, u32 *misses);
void rrdma_shim_reconnect_params(u32 *attempts, u32 *delay_ms,
				 u32 *max_delay_ms, u32 *max_teardowns);
u32 rrdma_shim_jiffies_to_msecs(unsigned long j);
struct rrdma_shim_timer *rrdma_shim_timer_new(void);
bool rrdma_shim_timer_arm(struct rrdma_shim_timer *t, void *ctx,
			  unsigned long delay, bool reset);
bool rrdma_shim_timer_cancel(struct rrdma_shim_timer *t);
void rrdma_shim_timer_free(struct rrdma_shim_timer *t);

/* Completion-ring wait queue for poll(2) (shim/chardev.c). */
void rrdma_shim_file_wake(void *waitq);

/* Registration of the ib_client and /dev/rrdma (shim/chardev.c). */
struct workqueue_struct *rrdma_shim_wq(void);
struct workqueue_struct *rrdma_shim_comp_wq(void);
int rrdma_shim_register(void *core);
void rrdma_shim_unregister(void);
bool rrdma_shim_warn_ratelimit(void);
unsigned long rrdma_shim_jiffies(void);

/*
 * io_uring commands (shim/uring.c): whether the kernel has io_uring; the
 * file's ->uring_cmd (0 or -errno from Rust becomes -EIOCBQUEUED or the
 * CQE's -errno) and ->uring_cmd_iopoll; the QP a queued command's
 * operation is posted on, told by Rust before it posts (an IOPOLL ring's
 * command polls that QP's send CQ); the CQE of a queued command, @res the
 * bytes moved or -errno, callable in process context or softirq (an
 * operation's completion), once per queued command, returning whether its
 * IOPOLL poller completed it in place (else task work posts it, or on an
 * IOPOLL ring its next poll).
 */
bool rrdma_shim_uring_supported(void);
int rrdma_shim_uring_issue(void *state, struct io_uring_cmd *cmd,
			   unsigned int issue_flags);
int rrdma_shim_uring_iopoll(struct io_uring_cmd *cmd,
			    struct io_comp_batch *iob,
			    unsigned int poll_flags);
void rrdma_shim_uring_poll_on(struct io_uring_cmd *cmd,
			      struct rrdma_shim_qp *q);
bool rrdma_shim_uring_complete(struct io_uring_cmd *cmd, s32 res);
/*
 * The current task's block plug (io_uring's submission of several SQEs):
 * registers @owner's unplug callback, rrdma_rust_conn_unplug(), on it.
 * Returns 0 without a plug, 1 if registered already, 2 if registered now:
 * the callback then holds a reference of @owner (a connection), which
 * Rust hands over.
 */
int rrdma_shim_plug(void *owner);

/* Implemented in Rust. */
int rrdma_rust_device_add(void *core, struct ib_device *dev, void **ctx);
void rrdma_rust_device_remove(void *core, struct ib_device *dev, void *ctx);
int rrdma_rust_file_open(void *core, void *waitq, void **file_state);
void rrdma_rust_file_release(void *file_state);
long rrdma_rust_file_ioctl(void *file_state, unsigned int cmd,
			   unsigned long arg);
int rrdma_rust_file_mmap(void *file_state, struct vm_area_struct *vma);
void rrdma_rust_file_show_fdinfo(void *file_state, struct seq_file *m);
long rrdma_rust_file_read(void *file_state, char __user *buf, size_t len,
			  bool nonblock);
bool rrdma_rust_file_readable(void *file_state);
int rrdma_rust_file_uring_op(void *file_state, struct io_uring_cmd *cmd,
			     const struct rrdma_op *op, bool nonblock);
int rrdma_rust_conn_event(void *conn, struct rdma_cm_id *id, int event,
			  int status, const void *pdata, u8 len);
void rrdma_rust_conn_unplug(void *conn, bool from_schedule);
int rrdma_rust_listen_event(void *listener, struct rdma_cm_id *id, int event);
int rrdma_rust_listen_request(void *listener, struct rdma_cm_id *child,
			      const void *pdata, u8 len, u8 peer_initiator,
			      u8 peer_responder, void **conn);
void rrdma_rust_qp_error(void *conn, u32 lane, int wc_status);
void rrdma_rust_conn_timer(void *conn);
u64 rrdma_rust_iopoll_window_ns(u64 mean_ns);
u64 rrdma_rust_poll_mean_after(u64 mean_ns, u64 sample_ns);
void rrdma_rust_ctrl_recv(void *conn, const void *msg, u32 len);
void rrdma_rust_ctrl_sent(void *conn, int wc_status);
void rrdma_rust_ops_done(void *conn, u32 lane, struct rrdma_shim_qp *q,
			 const struct rrdma_shim_done *done, u32 n);
void rrdma_rust_ops_done_atomic(void *conn, u32 lane, struct rrdma_shim_qp *q,
				const struct rrdma_shim_done *done, u32 n);
void rrdma_rust_quiet_done(void *conn, int wc_status);
void rrdma_rust_lane_recv(void *conn, u32 lane);
void rrdma_rust_region_get(void *region);
void rrdma_rust_region_put(void *region);
struct page *rrdma_rust_region_page(void *region, unsigned long pgoff);
u64 rrdma_shim_random_u64(void);
u32 rrdma_shim_queue_pairs(void);
u32 rrdma_shim_queue_pairs_param(void);
u32 rrdma_shim_this_cpu(void);
bool rrdma_shim_in_softirq(void);
unsigned int rrdma_shim_noio_save(void);
void rrdma_shim_noio_restore(unsigned int flags);
unsigned int rrdma_shim_reserves_save(void);
void rrdma_shim_reserves_restore(unsigned int flags);

/* owner.c: who opened a file (RRDMA_IOCTL_STATUS). */
struct pid;
struct pid *rrdma_shim_owner_pid(void);
void rrdma_shim_owner_put(struct pid *pid);
u32 rrdma_shim_owner_pid_nr(struct pid *pid);
u32 rrdma_shim_owner_kuid(void);
u32 rrdma_shim_owner_uid_nr(u32 kuid);
bool rrdma_shim_owner_admin(void);

/* sync_wait.c: a synchronous operation's killable wait. */
struct rrdma_shim_sync;
struct rrdma_shim_sync *rrdma_shim_sync_new(void);
void rrdma_shim_sync_free(struct rrdma_shim_sync *s);
void rrdma_shim_sync_done(struct rrdma_shim_sync *s);
int rrdma_shim_sync_wait(struct rrdma_shim_sync *s);

/* blk.c, blk_sysfs.c: rrdma-blk's disks. */
#include "blk_shim.h"

/* lock.c: softirq-safe spinlocks for Rust. */
void rrdma_shim_spin_lock_bh(struct spinlock *lock);
void rrdma_shim_spin_unlock_bh(struct spinlock *lock);
bool rrdma_shim_spin_trylock_bh(struct spinlock *lock);
void rrdma_shim_spin_assert_held(struct spinlock *lock);
int rrdma_shim_own_locks_held(void);
void rrdma_shim_assert_unlocked(const char *what);

#endif /* RRDMA_SHIM_H */
