// SPDX-License-Identifier: GPL-2.0
/*
 * Who opened a file, for RRDMA_IOCTL_STATUS: the opener's thread group as
 * a struct pid (shown in the pid namespace of whoever asks) and its
 * effective uid (shown in the asker's user namespace), and whether the
 * asker may see every file's objects (CAP_NET_ADMIN, as for the RDMA
 * netlink's resource dumps).
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>

#include "rrdma_shim.h"

struct pid *rrdma_shim_owner_pid(void)
{
	return get_task_pid(current, PIDTYPE_TGID);
}

void rrdma_shim_owner_put(struct pid *pid)
{
	put_pid(pid);
}

/* 0 once the process is gone: its number may be another's by then. */
u32 rrdma_shim_owner_pid_nr(struct pid *pid)
{
	u32 nr = 0;

	rcu_read_lock();
	if (pid && pid_task(pid, PIDTYPE_TGID))
		nr = pid_vnr(pid);
	rcu_read_unlock();
	return nr;
}

u32 rrdma_shim_owner_kuid(void)
{
	return __kuid_val(current_euid());
}

u32 rrdma_shim_owner_uid_nr(u32 kuid)
{
	return from_kuid_munged(current_user_ns(), KUIDT_INIT(kuid));
}

/*
 * In the initial user namespace: the view is host-wide.  No audit record
 * for the unprivileged callers it turns away.
 */
bool rrdma_shim_owner_admin(void)
{
	return ns_capable_noaudit(&init_user_ns, CAP_NET_ADMIN);
}
