// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What each call of the fuzzer may fail with: one table per call, built
//! from what the documentation promises (`include/uapi/rrdma.h`, its
//! kernel-doc and head comment; `Documentation/rrdma.rst`, "Userspace ABI"
//! and its errno tables; the brief's rules for bad inputs) and from the
//! system calls' own manual pages where the call is not rrdma's.
//!
//! An errno outside its call's table is a finding: either the
//! documentation is incomplete (fix it there, then here) or the kernel is
//! wrong. Never widen a table without a line of the documentation to cite.
//!
//! What a call may return depends on what its descriptor named: a file of
//! `/dev/rrdma` (the tables below), no file (`EBADF`), another file
//! (`/dev/null`: [`foreign`]), or something that changed during the call
//! (another thread closed the descriptor and its number may have been
//! reused: any of these).

use libc::*;

/// Errnos that share one reason in the documentation.
type Group = &'static [i32];

/// The ABI's framing rules (rrdma.h head comment; rrdma.rst, "Userspace
/// ABI", Conventions): a struct shorter than version 1, a reserved field
/// or an unknown flag is EINVAL, a longer struct with a non-zero tail
/// E2BIG, an argument the kernel cannot read or write back EFAULT.
const FRAMING: Group = &[EINVAL, E2BIG, EFAULT];
/// Handles (rrdma.h head comment; rrdma.rst region and connection
/// tables): 0, unknown, stale or of another file ENOENT, of the wrong
/// kind EINVAL.
const HANDLE: Group = &[ENOENT, EINVAL];
/// A file holds at most 2^20 objects (rrdma.rst, regions table: ENOSPC).
const FULL: Group = &[ENOSPC];
/// Long waits are interruptible (brief, "Rules for the ABI"; rrdma.h
/// CONNECT: EINTR).
const WAIT: Group = &[EINTR];
/// A completion's status (rrdma.h `struct rrdma_completion` and rrdma.rst,
/// "Completion statuses": EKEYREVOKED, EACCES, ECONNRESET, ECONNABORTED,
/// ECANCELED, EIO, ENODEV for a removed device, ETIMEDOUT from keepalive).
pub(super) const COMPLETION: Group = &[
    EKEYREVOKED,
    EACCES,
    ECONNRESET,
    ECONNABORTED,
    ECANCELED,
    EIO,
    ENODEV,
    ETIMEDOUT,
];
/// An operation or IMPORT on a connection that ended: "ENOTCONN or its
/// close errno" (rrdma.rst, operation errors); a connection ends with the
/// status of the completion that failed (rrdma.rst: "A failed operation
/// takes its connection down"), ECONNRESET (the peer's disconnect),
/// ETIMEDOUT (keepalive) or ENODEV (device removal).
const CLOSED: Group = &[
    ENOTCONN,
    EKEYREVOKED,
    EACCES,
    ECONNRESET,
    ECONNABORTED,
    ECANCELED,
    EIO,
    ENODEV,
    ETIMEDOUT,
];
/// One operation's checks (rrdma.rst, "Block operations" and the
/// operation errors table): outside a region ERANGE, `first + count`
/// overflows EOVERFLOW, zero blocks, another block size or a bad opcode
/// EINVAL, a write to a read-only export EPERM, a revoked import
/// EKEYREVOKED, more than `max_op_blocks` E2BIG; queues full or the
/// connection reconnecting EAGAIN; larger than the connection's own
/// queue pair takes with no data lane up ENOSPC (rrdma.h SUBMIT and
/// CONNECT).
const OP: Group = &[
    ERANGE,
    EOVERFLOW,
    EINVAL,
    EPERM,
    EKEYREVOKED,
    E2BIG,
    EAGAIN,
    ENOSPC,
];
/// CONNECT (rrdma.h and rrdma.rst, Connections): nobody listens
/// ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, no usable device ENODEV, no
/// local port EADDRNOTAVAIL, unknown family EAFNOSUPPORT.
const CONNECT: Group = &[
    ECONNREFUSED,
    // rrdma.rst, CONNECT: iWARP's stream reset before the MPA reply.
    ECONNRESET,
    ETIMEDOUT,
    EHOSTUNREACH,
    ENODEV,
    EADDRNOTAVAIL,
    EAFNOSUPPORT,
];
/// CONNECT returns the peer's errno if its reject carried one (rrdma.h
/// CONNECT); a listener rejects with EBUSY (backlog full, or the
/// reconnect-storm guard), ENODEV, EPROTO or EPROTONOSUPPORT (a bad
/// handshake), ENOMEM (no snapshot for the fence) (rrdma.rst,
/// Connections, LISTEN and Reconnect).
const PEER_REJECT: Group = &[EBUSY, ENODEV, EPROTO, EPROTONOSUPPORT, ENOMEM];

/// One call's table.
struct Entry {
    call: &'static str,
    groups: &'static [Group],
}

const TABLE: &[Entry] = &[
    // Calls of no file, or whose failures rrdma.h and rrdma.rst do not
    // foresee: open(2), close(2) and dup (fcntl F_DUPFD) of our own
    // descriptors, fork(2) and waitpid(2), munmap(2) of our own mappings,
    // touching a live mapping (recorded as success).
    Entry {
        call: "open",
        groups: &[],
    },
    Entry {
        call: "close",
        groups: &[],
    },
    Entry {
        call: "dup",
        groups: &[],
    },
    Entry {
        call: "fork",
        groups: &[],
    },
    Entry {
        call: "waitpid",
        groups: &[],
    },
    Entry {
        call: "munmap",
        groups: &[],
    },
    Entry {
        call: "touch",
        groups: &[],
    },
    // poll(2) of one descriptor fails only for bad arguments.
    Entry {
        call: "poll",
        groups: &[],
    },
    // rrdma.rst, regions table: an offset naming no region ENXIO, the
    // wrong length or MAP_PRIVATE EINVAL, PROT_EXEC EPERM; mmap(2): an
    // offset not a multiple of the page size EINVAL.
    Entry {
        call: "mmap",
        groups: &[&[ENXIO, EINVAL, EPERM]],
    },
    // rrdma.rst, regions: 7.3 refuses MADV_DOFORK with EINVAL.
    Entry {
        call: "madvise",
        groups: &[&[EINVAL]],
    },
    // rrdma.h `struct rrdma_completion`: a buffer smaller than a record
    // EINVAL, nothing to read with O_NONBLOCK EAGAIN; an unwritable
    // buffer EFAULT (read(2)).
    Entry {
        call: "read",
        groups: &[&[EINVAL, EAGAIN, EFAULT], WAIT],
    },
    // A command the driver does not know, or of the wrong direction, is
    // ENOTTY (rrdma.rst, Conventions); one it knows, drawn at random, is
    // checked against that command's table (see [`command`]).
    Entry {
        call: "raw",
        groups: &[&[ENOTTY]],
    },
    // rrdma.rst, GET_INFO table: an array range that wraps EOVERFLOW.
    Entry {
        call: "GET_INFO",
        groups: &[FRAMING, &[EOVERFLOW]],
    },
    // rrdma.rst, regions table: size overflow or above max_region_mb
    // EOVERFLOW, over RLIMIT_MEMLOCK ENOMEM, a fatal signal EINTR.
    Entry {
        call: "REGION_CREATE",
        groups: &[FRAMING, &[EOVERFLOW, ENOMEM, EINTR], FULL],
    },
    // rrdma.h REGION_REGISTER: part of the range unmapped EFAULT, a
    // mapping not writable EACCES, memory that cannot be pinned
    // EOPNOTSUPP, size above max_region_mb EOVERFLOW, over RLIMIT_MEMLOCK
    // ENOMEM, a fatal signal EINTR.
    Entry {
        call: "REGION_REGISTER",
        groups: &[
            FRAMING,
            &[EFAULT, EACCES, EOPNOTSUPP, EOVERFLOW, ENOMEM, EINTR],
            FULL,
        ],
    },
    // rrdma.rst, operation errors: destroy of an exported region EBUSY.
    Entry {
        call: "REGION_DESTROY",
        groups: &[FRAMING, HANDLE, &[EBUSY]],
    },
    // rrdma.rst, operation errors: unknown family EAFNOSUPPORT, port 0,
    // bytes past an IPv4 address or a bad backlog EINVAL, port in use
    // EADDRINUSE or EADDRNOTAVAIL (also rrdma.h LISTEN).
    Entry {
        call: "LISTEN",
        groups: &[FRAMING, &[EAFNOSUPPORT, EADDRINUSE, EADDRNOTAVAIL], FULL],
    },
    // rrdma.h ACCEPT: nothing queued in time EAGAIN; rrdma.rst, LISTEN: a
    // request never established is dropped by ACCEPT with ETIMEDOUT.
    Entry {
        call: "ACCEPT",
        groups: &[FRAMING, HANDLE, &[EAGAIN, ETIMEDOUT], WAIT, FULL],
    },
    Entry {
        call: "CONNECT",
        groups: &[FRAMING, CONNECT, PEER_REJECT, WAIT, FULL],
    },
    Entry {
        call: "DISCONNECT",
        groups: &[FRAMING, HANDLE],
    },
    Entry {
        call: "UNLISTEN",
        groups: &[FRAMING, HANDLE],
    },
    Entry {
        call: "UNIMPORT",
        groups: &[FRAMING, HANDLE],
    },
    // rrdma.h EXPORT: at most 4096 exports ENOSPC; access not READ or
    // READ|WRITE EINVAL.
    Entry {
        call: "EXPORT",
        groups: &[FRAMING, HANDLE, FULL],
    },
    // rrdma.rst, operation errors: unknown or revoked token ENOENT.
    Entry {
        call: "UNEXPORT",
        groups: &[FRAMING, &[ENOENT]],
    },
    // rrdma.h IMPORT: no answer in time ETIMEDOUT; rrdma.rst: unknown or
    // revoked token ENOENT; reconnecting EAGAIN (rrdma.h CONNECT).
    Entry {
        call: "IMPORT",
        groups: &[FRAMING, HANDLE, &[ETIMEDOUT, EAGAIN], CLOSED, WAIT, FULL],
    },
    // rrdma.h SUBMIT and rrdma.rst, operation errors.
    Entry {
        call: "SUBMIT",
        groups: &[FRAMING, HANDLE, OP, CLOSED],
    },
    // rrdma.h RW_SYNC: one operation, waited for: its status.
    Entry {
        call: "RW_SYNC",
        groups: &[FRAMING, HANDLE, OP, CLOSED, COMPLETION, WAIT],
    },
    // rrdma.h BLK_MAP: no CAP_SYS_ADMIN EPERM; an unknown import ENOENT;
    // flags, reserved, an import the disk cannot have or one over an
    // accepted connection EINVAL; 256 disks ENOSPC; the staging region
    // over RLIMIT_MEMLOCK ENOMEM, a fatal signal while it is allocated
    // EINTR; the disk's own connection and import: CONNECT's and IMPORT's.
    Entry {
        call: "BLK_MAP",
        groups: &[
            FRAMING,
            HANDLE,
            &[EPERM, ENOMEM, EINTR, ETIMEDOUT, EAGAIN],
            FULL,
            CONNECT,
            PEER_REJECT,
            CLOSED,
            WAIT,
        ],
    },
    // rrdma.h BLK_UNMAP: EPERM; no such disk ENOENT; open, or being mapped
    // or unmapped, EBUSY; unknown flags EINVAL.
    Entry {
        call: "BLK_UNMAP",
        groups: &[FRAMING, &[EPERM, ENOENT, EBUSY]],
    },
    // rrdma.h STATUS: an array whose range wraps EOVERFLOW; its snapshot
    // ENOMEM.
    Entry {
        call: "STATUS",
        groups: &[FRAMING, &[EOVERFLOW, ENOMEM]],
    },
    // rrdma.h, io_uring: the CQE's res is -errno of SUBMIT or of a
    // completion; another cmd_op ENOTTY; a worker's wait for room ends
    // with EINTR on a signal.
    Entry {
        call: "io_uring",
        groups: &[FRAMING, HANDLE, OP, CLOSED, COMPLETION, &[ENOTTY, EINTR]],
    },
];

/// The command `cmd` names on `/dev/rrdma` (type, number and direction:
/// rrdma.rst, "Userspace ABI", commands table), for command numbers drawn
/// at random: their errnos are that command's; `None` for an unknown
/// command (ENOTTY, checked as `raw`).
pub(super) fn command(cmd: u32) -> Option<&'static str> {
    use rrdma::abi::ioctl::{dir, nr, ty, IOC_READ as R, IOC_WRITE as W};
    const COMMANDS: [(u8, u32, &str); 18] = [
        (0x00, R | W, "GET_INFO"),
        (0x01, R | W, "REGION_CREATE"),
        (0x02, W, "REGION_DESTROY"),
        (0x03, R | W, "LISTEN"),
        (0x04, R | W, "ACCEPT"),
        (0x05, R | W, "CONNECT"),
        (0x06, W, "DISCONNECT"),
        (0x07, R | W, "EXPORT"),
        (0x08, W, "UNEXPORT"),
        (0x09, R | W, "IMPORT"),
        (0x0a, W, "UNIMPORT"),
        (0x0b, W, "UNLISTEN"),
        (0x0c, R | W, "SUBMIT"),
        (0x0d, W, "RW_SYNC"),
        (0x0e, R | W, "REGION_REGISTER"),
        (0x0f, R | W, "BLK_MAP"),
        (0x10, W, "BLK_UNMAP"),
        (0x11, R | W, "STATUS"),
    ];
    if ty(cmd) != rrdma::abi::uapi::IOCTL_MAGIC {
        return None;
    }
    COMMANDS
        .iter()
        .find(|c| c.0 == nr(cmd) && c.1 == dir(cmd))
        .map(|c| c.2)
}

/// What a call's descriptor named, before and after the call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Target {
    /// A file of `/dev/rrdma` (its file number in the run).
    Rrdma(u64),
    /// The call takes no descriptor (fork, munmap...).
    NoFd,
    /// No open file (-1).
    Closed,
    /// An open file that is not `/dev/rrdma`.
    Foreign,
    /// It changed during the call: any of the above.
    Unknown,
}

impl Target {
    /// What it was, for a finding.
    pub(super) fn what(self) -> &'static str {
        match self {
            Target::Rrdma(_) => "on /dev/rrdma",
            Target::NoFd => "",
            Target::Closed => "on no file",
            Target::Foreign => "on another file",
            Target::Unknown => "on a descriptor closed during the call",
        }
    }
}

/// Errnos of a call on a file that is not `/dev/rrdma`: `/dev/null`, or
/// an io_uring ring (whose number may replace a closed file's). ioctl(2)
/// of a file without the command: ENOTTY; mmap(2) of a file without mmap
/// (`/dev/null`): ENODEV, a ring's offsets: EINVAL; read(2) of a ring:
/// EINVAL (`/dev/null` reads nothing); io_uring command to a file
/// without `->uring_cmd`: EOPNOTSUPP (`/dev/null` has one on recent
/// kernels, which succeeds); poll(2), dup, fork, waitpid succeed.
fn foreign(call: &str) -> &'static [i32] {
    match call {
        "mmap" => &[ENODEV, EINVAL],
        "io_uring" => &[EOPNOTSUPP],
        "read" => &[EINVAL],
        "poll" | "dup" | "fork" | "waitpid" | "madvise" | "close" => &[],
        _ => &[ENOTTY],
    }
}

/// True if `call` (a name of the table) may fail with `e` on `target`.
pub(super) fn documented(call: &str, target: Target, e: i32) -> bool {
    let rrdma = || {
        TABLE
            .iter()
            .find(|x| x.call == call)
            .is_some_and(|x| x.groups.iter().any(|g| g.contains(&e)))
    };
    match target {
        Target::Rrdma(_) | Target::NoFd => rrdma(),
        Target::Closed => e == EBADF,
        Target::Foreign => foreign(call).contains(&e),
        Target::Unknown => e == EBADF || foreign(call).contains(&e) || rrdma(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables() {
        assert!(documented("SUBMIT", Target::Rrdma(1), ERANGE));
        assert!(!documented("SUBMIT", Target::Rrdma(1), EBADF));
        assert!(documented("SUBMIT", Target::Closed, EBADF));
        assert!(!documented("GET_INFO", Target::Rrdma(1), ENOMEM));
        assert!(documented("GET_INFO", Target::Foreign, ENOTTY));
        assert!(documented("mmap", Target::Unknown, ENODEV));
        assert_eq!(command(rrdma::abi::uapi::IOCTL_CONNECT), Some("CONNECT"));
        assert_eq!(command(0xdead), None);
        assert!(documented("raw", Target::Rrdma(1), ENOTTY));
        assert!(!documented("raw", Target::Rrdma(1), EINVAL));
        for e in TABLE {
            assert_eq!(TABLE.iter().filter(|x| x.call == e.call).count(), 1);
        }
    }
}
