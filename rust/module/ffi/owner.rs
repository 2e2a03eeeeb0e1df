// SPDX-License-Identifier: GPL-2.0

//! Who opened a file ([`Owner`]), as `RRDMA_IOCTL_STATUS` shows it, and
//! whether the caller may see every file's objects ([`sees_all`]).

use kernel::ffi::c_void;

/// The task that opened a file: its thread group (a reference to its
/// `struct pid`, so that the number shown is the one the asker's pid
/// namespace gives) and its effective uid.
pub(crate) struct Owner {
    /// A counted `struct pid`, or NULL; put on drop.
    pid: *mut c_void,
    kuid: u32,
}

// SAFETY: a `struct pid` reference may be held and put from any task.
unsafe impl Send for Owner {}
// SAFETY: `&Owner` only reads the number through `pid_vnr()`, which any
// task may call concurrently.
unsafe impl Sync for Owner {}

impl Owner {
    /// The current task (process context: the opener of a file).
    pub(crate) fn current() -> Self {
        // SAFETY: no preconditions; returns a counted reference or NULL.
        let pid = unsafe { rrdma_shim_owner_pid() };
        // SAFETY: no preconditions.
        let kuid = unsafe { rrdma_shim_owner_kuid() };
        // INVARIANT: `pid` is counted (or NULL) and put only on drop.
        Self { pid, kuid }
    }

    /// The owner's process id in the current task's pid namespace (0 if
    /// it is not visible there, or gone).
    pub(crate) fn pid(&self) -> u32 {
        // SAFETY: `pid` is NULL or counted by `self` (invariant).
        unsafe { rrdma_shim_owner_pid_nr(self.pid) }
    }

    /// The owner's uid in the current task's user namespace.
    pub(crate) fn uid(&self) -> u32 {
        // SAFETY: no preconditions.
        unsafe { rrdma_shim_owner_uid_nr(self.kuid) }
    }

    /// The owner's kuid (namespace-independent).
    pub(crate) fn kuid(&self) -> u32 {
        self.kuid
    }

    /// Whether the current task's effective uid is the owner's.
    pub(crate) fn is_current_user(&self) -> bool {
        // SAFETY: no preconditions.
        self.kuid == unsafe { rrdma_shim_owner_kuid() }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // SAFETY: counted by `self` (invariant), not used after this;
        // `put_pid(NULL)` does nothing.
        unsafe { rrdma_shim_owner_put(self.pid) };
    }
}

/// Whether the current task sees every file's objects (`CAP_NET_ADMIN`).
pub(crate) fn sees_all() -> bool {
    // SAFETY: no preconditions.
    unsafe { rrdma_shim_owner_admin() }
}

extern "C" {
    fn rrdma_shim_owner_pid() -> *mut c_void;
    fn rrdma_shim_owner_put(pid: *mut c_void);
    fn rrdma_shim_owner_pid_nr(pid: *mut c_void) -> u32;
    fn rrdma_shim_owner_kuid() -> u32;
    fn rrdma_shim_owner_uid_nr(kuid: u32) -> u32;
    fn rrdma_shim_owner_admin() -> bool;
}
