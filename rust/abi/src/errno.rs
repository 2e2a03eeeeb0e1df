// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Linux errno values used by the ABI rules.
//!
//! One error type for the whole module: [`Errno`], a positive errno number.
//! The pure code returns it; the kernel side converts it to and from
//! `kernel::error::Error` (`From` both ways, so `?` works across the two),
//! and userspace compares [`Errno::get`] with `errno` from the failed
//! `ioctl(2)`.

/// A Linux errno.
///
/// # Invariants
///
/// The number is in `1..=MAX_ERRNO` (4095), as the kernel's error pointers
/// and `ERR_PTR` require.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Errno(i32);

/// The largest errno number (the kernel's `MAX_ERRNO`).
pub const MAX_ERRNO: i32 = 4095;

impl Errno {
    /// The errno `n` (positive), or `None` if `n` is out of range.
    pub const fn new(n: i32) -> Option<Self> {
        if n >= 1 && n <= MAX_ERRNO {
            // INVARIANT: checked just above.
            Some(Errno(n))
        } else {
            None
        }
    }

    /// The errno of a status that may be negative (kernel convention) or
    /// positive (some rdma_cm events); `None` for 0 or out of range.
    pub const fn from_status(status: i32) -> Option<Self> {
        match status.checked_abs() {
            Some(n) => Self::new(n),
            None => None,
        }
    }

    /// The positive errno number.
    pub const fn get(self) -> i32 {
        self.0
    }
}

impl From<Errno> for i32 {
    fn from(e: Errno) -> i32 {
        e.0
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "errno {}", self.0)
    }
}

/// Defines errno constants (numbers from include/uapi/asm-generic/errno*.h).
macro_rules! errnos {
    ($($(#[$doc:meta])* $name:ident = $n:literal;)*) => {
        $($(#[$doc])* pub const $name: Errno = Errno($n);)*
    };
}

errnos! {

    /// Bad address: a user pointer could not be read or written.
    EFAULT = 14;
    /// Argument list too long: a larger struct than known with a non-zero tail.
    E2BIG = 7;
    /// Invalid argument: a reserved field, unknown flag or bad value.
    EINVAL = 22;
    /// Inappropriate ioctl for device: unknown command.
    ENOTTY = 25;
    /// Operation not supported: an io_uring ring rrdma cannot serve (IOPOLL).
    EOPNOTSUPP = 95;
    /// Kernel-internal, never seen by userspace: a signal (or task work,
    /// e.g. io_uring's) interrupted a wait; the system call restarts after
    /// it, or returns `EINTR` to a handler without `SA_RESTART`.
    ERESTARTSYS = 512;
    /// Value too large: arithmetic on user-supplied numbers overflowed.
    EOVERFLOW = 75;
    /// No such device: the RDMA device is going away.
    ENODEV = 19;
    /// Result out of range: a block range outside its region.
    ERANGE = 34;
    /// Protocol error: a malformed message from the peer.
    EPROTO = 71;
    /// Protocol not supported: the peer speaks no version we know.
    EPROTONOSUPPORT = 93;
    /// Operation not permitted.
    EPERM = 1;
    /// No such object: a handle that names nothing (0, stale, destroyed).
    ENOENT = 2;
    /// No such device or address: an mmap offset that names no region.
    ENXIO = 6;
    /// No space left: a table or the mmap offset space is full, or the
    /// file holds as many of a kind of object as its cap allows.
    ENOSPC = 28;
    /// Quota exceeded: the user's files hold as many of a kind of object
    /// as the per-user cap allows.
    EDQUOT = 122;
    /// Network unreachable.
    ENETUNREACH = 101;
    /// Connection aborted: the QP failed (e.g. a peer's access error).
    ECONNABORTED = 103;
    /// Connection reset: the peer went away.
    ECONNRESET = 104;
    /// Connection timed out.
    ETIMEDOUT = 110;
    /// Connection refused: the peer rejected us.
    ECONNREFUSED = 111;
    /// No route to host.
    EHOSTUNREACH = 113;
    /// Out of memory.
    ENOMEM = 12;

    /// Permission denied: the peer's NIC refused the access.
    EACCES = 13;
    /// Device or resource busy.
    EBUSY = 16;
    /// Try again: queues full, or nothing to wait for without blocking.
    EAGAIN = 11;
    /// Interrupted by a signal.
    EINTR = 4;
    /// I/O error.
    EIO = 5;
    /// Kernel-internal, never seen by userspace ("cross-device"): a disk
    /// request's queue pair cannot reach its own pages; its bytes are
    /// staged instead (rrdma-blk's zero copy).
    EXDEV = 18;
    /// Transport endpoint is not connected.
    ENOTCONN = 107;
    /// Operation canceled: flushed by a disconnect or close.
    ECANCELED = 125;
    /// Key has been revoked: the export was unexported.
    EKEYREVOKED = 128;
    /// Address family not supported.
    EAFNOSUPPORT = 97;
    /// Address already in use.
    EADDRINUSE = 98;
    /// Cannot assign the requested address: no free local port.
    EADDRNOTAVAIL = 99;
    /// Read-only file system: a write to a read-only disk.
    EROFS = 30;
}
