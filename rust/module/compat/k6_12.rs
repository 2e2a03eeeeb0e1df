// SPDX-License-Identifier: GPL-2.0

//! Compatibility layer for Linux 6.12 LTS.
//!
//! 6.12's `uaccess::UserPtr` is a plain `usize`.

use kernel::uaccess::UserSlice;

/// A user memory range `[addr, addr + len)`.
pub(crate) fn user_slice(addr: u64, len: usize) -> UserSlice {
    // `usize` is 64 bits on every architecture rrdma builds for.
    UserSlice::new(addr as usize, len)
}
