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

/// Removes and returns the last element (6.12's `Vec` has no `pop`).
pub(crate) fn vec_pop<T>(v: &mut kernel::alloc::KVec<T>) -> Option<T> {
    let len = v.len();
    if len == 0 {
        return None;
    }
    // SAFETY: index `len - 1` is initialised; after `set_len` the vector no
    // longer owns it, so reading it out moves it without a double drop.
    unsafe {
        let last = core::ptr::read(v.as_ptr().add(len - 1));
        v.set_len(len - 1);
        Some(last)
    }
}
