// SPDX-License-Identifier: GPL-2.0

//! Compatibility layer for Linux 7.x (verified on 7.3).
//!
//! 7.x wraps user addresses in the `uaccess::UserPtr` newtype.

use kernel::uaccess::{UserPtr, UserSlice};

/// A user memory range `[addr, addr + len)`.
pub(crate) fn user_slice(addr: u64, len: usize) -> UserSlice {
    // `usize` is 64 bits on every architecture rrdma builds for.
    UserSlice::new(UserPtr::from_addr(addr as usize), len)
}

/// Removes and returns the last element.
pub(crate) fn vec_pop<T>(v: &mut kernel::alloc::KVec<T>) -> Option<T> {
    v.pop()
}
