// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Checks that run as an unprivileged user under a memlock limit: a
//! fork(2) child that prepares what it needs while still root (opening
//! `/dev/rrdma`, whose mode is 0600), drops to user and group 65534 with
//! `RLIMIT_MEMLOCK` set, runs the check and exits with its code.

use std::ffi::CString;

use crate::ensure;

/// Runs `f` while `/dev/rrdma` may be opened by anyone (mode 0666), so that
/// an [`unprivileged`] child can open a file of its own (charged to and
/// owned by its own uid); the node's mode is put back after.
pub(crate) fn open_to_all<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let node = CString::new(rrdma::DEFAULT_PATH).expect("path");
    // SAFETY: a plain C struct, for which all zero is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a stat buffer.
    if unsafe { libc::stat(node.as_ptr(), &mut st) } != 0 {
        return Err(format!("stat: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a NUL-terminated path.
    unsafe { libc::chmod(node.as_ptr(), 0o666) };
    let res = f();
    // SAFETY: a NUL-terminated path; the mode it had.
    unsafe { libc::chmod(node.as_ptr(), st.st_mode & 0o7777) };
    res
}

/// Runs `check` in a child as user 65534 with an `RLIMIT_MEMLOCK` of
/// `limit` bytes, on what `prepare` returned before the privileges went;
/// `Ok` if it exits 0. `codes` explains the check's exit codes (9: the
/// preparation failed, 10: the privileges could not be dropped).
pub(crate) fn unprivileged<T>(
    limit: u64,
    prepare: impl FnOnce() -> Option<T>,
    check: impl FnOnce(T) -> i32,
    codes: &str,
) -> Result<(), String> {
    // SAFETY: the child runs only system calls and ioctls, then exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let lim = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        let code = match prepare() {
            None => 9,
            Some(t) => {
                // SAFETY: plain system calls in the child.
                let dropped = unsafe {
                    libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) == 0
                        && libc::setgid(65534) == 0
                        && libc::setuid(65534) == 0
                };
                if dropped {
                    check(t)
                } else {
                    10
                }
            }
        };
        // SAFETY: exit the child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    ensure(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        format!("child exit status {status:#x} ({codes})"),
    )
}
