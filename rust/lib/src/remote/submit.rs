// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Block operations in batches: SUBMIT, RW_SYNC and reading completions,
//! and the error of a refused SUBMIT.

use std::io;
use std::time::Duration;

use rrdma_abi::uapi::{self, Completion, Op, Submit};

use crate::Rrdma;

impl Rrdma {
    /// Submits `ops` (in order); returns how many were posted. Each posted
    /// operation yields one completion from [`Rrdma::completions`].
    pub fn submit(&self, ops: &[Op]) -> io::Result<usize> {
        let bytes: Vec<u8> = ops.iter().flat_map(|o| o.encode()).collect();
        let out = self.submit_raw(&Submit {
            ops: bytes.as_ptr() as u64,
            count: ops.len() as u32,
            op_size: Op::SIZE as u32,
            ..Submit::zeroed()
        })?;
        Ok(out.submitted as usize)
    }

    /// Issues `SUBMIT` with `req` as is; on failure the kernel's
    /// `submitted` (the refused operation's index) is in the error's
    /// second member.
    pub fn submit_raw(&self, req: &Submit) -> io::Result<Submit> {
        let mut b = req.encode();
        self.ioctl_bytes(uapi::IOCTL_SUBMIT, &mut b).map_err(|e| {
            io::Error::new(
                e.kind(),
                SubmitError {
                    err: e,
                    index: Submit::decode(&b).submitted,
                },
            )
        })?;
        Ok(Submit::decode(&b))
    }

    /// Runs one operation synchronously.
    pub fn rw_sync(&self, op: &Op) -> io::Result<()> {
        let mut b = op.encode();
        self.ioctl_bytes(uapi::IOCTL_RW_SYNC, &mut b)
    }

    /// Reads completions into `out`, waiting at most `timeout` (`None`:
    /// until at least one arrives) for the first; returns how many. On a
    /// file opened `O_NONBLOCK`, several threads may wait at once: one
    /// that finds the completions taken by another waits on.
    pub fn completions(
        &self,
        out: &mut [Completion],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let deadline = timeout.map(|d| std::time::Instant::now() + d);
        let mut buf = vec![0u8; out.len() * Completion::SIZE];
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let mut pfd = libc::pollfd {
                fd: self.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let t = left.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as i32);
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, t) };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            if r == 0 {
                return Ok(0);
            }
            // SAFETY: `buf` is valid for writes of its length.
            let n = unsafe { libc::read(self.raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EAGAIN) {
                    return Err(e);
                }
                // Another reader took them: wait for more, until the
                // deadline.
                if left.is_some_and(|d| d.is_zero()) {
                    return Ok(0);
                }
                continue;
            }
            let n = n as usize / Completion::SIZE;
            for (i, c) in out.iter_mut().take(n).enumerate() {
                let mut rec = [0u8; Completion::SIZE];
                rec.copy_from_slice(&buf[i * Completion::SIZE..(i + 1) * Completion::SIZE]);
                *c = Completion::decode(&rec);
            }
            return Ok(n);
        }
    }
}

/// A refused `SUBMIT`: the errno and the index of the refused operation.
#[derive(Debug)]
pub struct SubmitError {
    /// The errno.
    pub err: io::Error,
    /// Index of the refused operation (or operations posted).
    pub index: u32,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (operation {})", self.err, self.index)
    }
}

impl std::error::Error for SubmitError {}

/// The errno of an I/O error, looking through [`SubmitError`].
pub fn errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()
            .and_then(|x| x.downcast_ref::<SubmitError>())
            .and_then(|s| s.err.raw_os_error())
    })
}
