// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The io_uring engine: block operations submitted as io_uring commands
//! (`RRDMA_URING_CMD_OP`) on a ring of 128-byte SQEs, completed by CQEs
//! whose `res` is the bytes moved or `-errno` (see the UAPI header). No
//! system call per operation: one `io_uring_enter` submits a batch and
//! reaps what completed. [`UringEngine::with_iopoll`] sets the ring up with
//! `IORING_SETUP_IOPOLL` (`RRDMA_FEATURE_URING_IOPOLL`): waiting for CQEs
//! then polls the queue pairs' completion queues in the kernel instead of
//! sleeping until a wake-up. [`UringEngine::with_sqpoll`] sets it up with
//! `IORING_SETUP_SQPOLL`: a kernel thread takes the SQEs from the ring, so
//! submitting needs no system call while that thread is awake.

use std::io;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::abi::uapi::{Op, URING_CMD_OP};
use crate::Rrdma;

/// One CQE: the SQE's `user_data` and the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringCompletion {
    /// The submitted operation's `user_data`.
    pub user_data: u64,
    /// Bytes moved, or the negative errno.
    pub res: i32,
}

/// An io_uring instance submitting operations to one `/dev/rrdma` file.
pub struct UringEngine {
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    fd: i32,
    iopoll: bool,
    /// SQEs pushed since the last [`Self::submit`], on an SQPOLL ring
    /// (whose SQ thread takes every one): what that submit reports.
    sq_pushed: Option<usize>,
}

impl UringEngine {
    /// A ring of `entries` SQEs for `dev`'s file.
    pub fn new(dev: &Rrdma, entries: u32) -> io::Result<Self> {
        Ok(Self {
            ring: IoUring::builder().build(entries)?,
            fd: dev.raw_fd(),
            iopoll: false,
            sq_pushed: None,
        })
    }

    /// A ring of `entries` SQEs for `dev`'s file, set up with
    /// `IORING_SETUP_IOPOLL`: [`Self::submit`] busy-polls for completions
    /// (one CPU spins while it waits).
    pub fn with_iopoll(dev: &Rrdma, entries: u32) -> io::Result<Self> {
        Ok(Self {
            ring: IoUring::builder().setup_iopoll().build(entries)?,
            fd: dev.raw_fd(),
            iopoll: true,
            sq_pushed: None,
        })
    }

    /// A ring of `entries` SQEs for `dev`'s file, set up with
    /// `IORING_SETUP_SQPOLL`: the process's SQ thread issues the commands,
    /// and goes to sleep after `idle` without any (one CPU spins while it
    /// is awake).
    pub fn with_sqpoll(dev: &Rrdma, entries: u32, idle: Duration) -> io::Result<Self> {
        let idle_ms = u32::try_from(idle.as_millis()).unwrap_or(u32::MAX);
        Ok(Self {
            ring: IoUring::builder().setup_sqpoll(idle_ms).build(entries)?,
            fd: dev.raw_fd(),
            iopoll: false,
            sq_pushed: Some(0),
        })
    }

    /// Whether the ring polls (`IORING_SETUP_IOPOLL`).
    pub fn iopoll(&self) -> bool {
        self.iopoll
    }

    /// Whether a kernel thread takes the SQEs (`IORING_SETUP_SQPOLL`).
    pub fn sqpoll(&self) -> bool {
        self.sq_pushed.is_some()
    }

    /// The SQE carrying `op`, with `op.user_data` as the SQE's.
    pub fn entry(fd: i32, op: &Op) -> squeue::Entry128 {
        let mut cmd = [0u8; 80];
        cmd[..Op::SIZE].copy_from_slice(&op.encode());
        opcode::UringCmd80::new(types::Fd(fd), URING_CMD_OP)
            .cmd(cmd)
            .build()
            .user_data(op.user_data)
    }

    /// Queues `ops` (as many as the submission queue has room for);
    /// returns how many. Nothing reaches the kernel before [`Self::submit`].
    pub fn push(&mut self, ops: &[Op]) -> usize {
        let mut sq = self.ring.submission();
        let mut n = 0;
        for op in ops {
            let e = Self::entry(self.fd, op);
            // SAFETY: the entry refers to no user memory (the operation is
            // copied into the SQE; its regions are the kernel's).
            if unsafe { sq.push(&e) }.is_err() {
                break;
            }
            n += 1;
        }
        if let Some(p) = self.sq_pushed.as_mut() {
            *p += n;
        }
        n
    }

    /// Submits what was pushed and waits until at least `want` CQEs are
    /// ready, or `timeout` passed (then `Ok` all the same: [`Self::reap`]
    /// tells what came); returns how many SQEs the kernel took.
    pub fn submit(&mut self, want: usize, timeout: Duration) -> io::Result<usize> {
        if self.iopoll {
            return self.submit_polled(want, timeout);
        }
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        let taken = loop {
            match self.ring.submitter().submit_with_args(want, &args) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => break 0,
                r => break r?,
            }
        };
        // On an SQPOLL ring `io_uring_enter` reports the SQEs waiting in
        // the ring, which the SQ thread may not have taken yet (and which
        // the next call would report again): count each pushed SQE once.
        Ok(self.sq_pushed.as_mut().map_or(taken, core::mem::take))
    }

    /// [`Self::submit`] on an IOPOLL ring. Its `io_uring_enter` polls until
    /// `want` CQEs are ready but returns early when the task should
    /// reschedule, and ignores a timeout: ask again until they are there
    /// or `timeout` passed.
    fn submit_polled(&mut self, want: usize, timeout: Duration) -> io::Result<usize> {
        let start = Instant::now();
        let mut taken = 0;
        loop {
            match self.ring.submitter().submit_and_wait(want) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
                Ok(n) => taken += n,
            }
            if self.ring.completion().len() >= want || start.elapsed() >= timeout {
                return Ok(taken);
            }
        }
    }

    /// Moves the ready CQEs into `out`; returns how many.
    pub fn reap(&mut self, out: &mut Vec<UringCompletion>) -> usize {
        let before = out.len();
        out.extend(self.ring.completion().map(|c| UringCompletion {
            user_data: c.user_data(),
            res: c.result(),
        }));
        out.len() - before
    }
}
