// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The open device and raw ioctl access.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// An open `/dev/rrdma`.
#[derive(Debug)]
pub struct Rrdma {
    file: File,
}

impl Rrdma {
    /// Opens [`crate::DEFAULT_PATH`].
    pub fn open() -> io::Result<Self> {
        Self::open_path(crate::DEFAULT_PATH)
    }

    /// Opens the device node at `path`.
    pub fn open_path(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| {
                let hint = match e.kind() {
                    io::ErrorKind::NotFound => " (is rrdma.ko loaded?)",
                    io::ErrorKind::PermissionDenied => " (see the dev_mode module parameter)",
                    _ => "",
                };
                io::Error::new(e.kind(), format!("{}: {e}{hint}", path.display()))
            })?;
        Ok(Self { file })
    }

    /// An `Rrdma` on `file`, an open `/dev/rrdma` (the C library opens
    /// its own, non-blocking).
    pub fn from_file(file: File) -> Self {
        Self { file }
    }

    /// The raw file descriptor (for mmap and tests).
    pub fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// The file's fdinfo entries that rrdma adds (`rrdma-*`), as key/value.
    pub fn fdinfo(&self) -> io::Result<Vec<(String, u64)>> {
        let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", self.raw_fd()))?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.starts_with("rrdma-")
                    .then(|| Some((k.to_string(), v.trim().parse().ok()?)))?
            })
            .collect())
    }

    /// One fdinfo counter, 0 if absent.
    pub fn fdinfo_value(&self, key: &str) -> io::Result<u64> {
        Ok(self
            .fdinfo()?
            .into_iter()
            .find(|(k, _)| k == key)
            .map_or(0, |(_, v)| v))
    }

    /// Issues `cmd` with the argument bytes in `arg`.
    ///
    /// The size encoded in `cmd` must not exceed `arg.len()`: the kernel
    /// reads and writes that many bytes.
    pub fn ioctl_bytes(&self, cmd: u32, arg: &mut [u8]) -> io::Result<()> {
        let size = rrdma_abi::ioctl::size(cmd);
        if size > arg.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ioctl argument shorter than its command says",
            ));
        }
        // SAFETY: `arg` is valid for reads and writes of `size` bytes, which
        // is all the kernel touches for this command.
        unsafe { self.ioctl_raw(cmd, arg.as_mut_ptr() as u64) }
    }

    /// Issues `cmd` with an arbitrary argument value, for tests of bad input.
    ///
    /// # Safety
    ///
    /// The kernel may write through `arg` as `cmd` describes: `arg` must be
    /// an address the caller is prepared to have written (or an invalid one).
    pub unsafe fn ioctl_raw(&self, cmd: u32, arg: u64) -> io::Result<()> {
        // SAFETY: by the function's safety requirements.
        let ret = unsafe { libc::ioctl(self.file.as_raw_fd(), cmd as _, arg as libc::c_ulong) };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}
