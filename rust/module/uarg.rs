// SPDX-License-Identifier: GPL-2.0

//! Size-extensible ioctl arguments in user memory.
//!
//! Implements the rules of `abi::ioctl::ext_copy` against real user memory:
//! read the caller's struct (zero-extended if shorter than ours), check that
//! a longer struct's unknown tail is zero, and write back no more than the
//! caller's size.

use kernel::prelude::*;

use crate::abi::Result;
use crate::abi::{self, ioctl::Decoded};
use crate::compat::user_slice;

/// Chunk used to check or clear unknown tails without a large stack buffer.
const CHUNK: usize = 64;

/// Reads the ioctl argument at `arg` into a zero-extended `N`-byte buffer.
pub(crate) fn read<const N: usize>(arg: u64, d: &Decoded) -> Result<[u8; N]> {
    read_sized(arg, d.user_size)
}

/// Reads a `user_size`-byte struct at `addr` into a zero-extended `N`-byte
/// buffer (an element of a user array, e.g. SUBMIT's operations).
pub(crate) fn read_sized<const N: usize>(addr: u64, user_size: usize) -> Result<[u8; N]> {
    let plan = abi::ioctl::ext_copy(user_size, N);
    let mut buf = [0u8; N];
    user_slice(addr, plan.copy_len)
        .reader()
        .read_slice(&mut buf[..plan.copy_len])?;
    if let Some((start, end)) = plan.unknown_tail {
        check_zero(addr.checked_add(start as u64).ok_or(EFAULT)?, end - start)?;
    }
    Ok(buf)
}

/// Writes `buf` back to the ioctl argument at `arg`, up to the caller's size.
pub(crate) fn write<const N: usize>(arg: u64, d: &Decoded, buf: &[u8; N]) -> Result {
    let plan = abi::ioctl::ext_copy(d.user_size, N);
    Ok(user_slice(arg, plan.copy_len)
        .writer()
        .write_slice(&buf[..plan.copy_len])?)
}

/// Fails with `E2BIG` unless the `len` user bytes at `addr` are all zero.
fn check_zero(addr: u64, len: usize) -> Result {
    let mut reader = user_slice(addr, len).reader();
    let mut chunk = [0u8; CHUNK];
    while !reader.is_empty() {
        let n = reader.len().min(CHUNK);
        reader.read_slice(&mut chunk[..n])?;
        abi::ioctl::check_unknown_tail(&chunk[..n])?;
    }
    Ok(())
}

/// Writes `len` zero bytes at user address `addr`.
pub(crate) fn clear(addr: u64, len: usize) -> Result {
    let mut writer = user_slice(addr, len).writer();
    let zeros = [0u8; CHUNK];
    let mut left = len;
    while left > 0 {
        let n = left.min(CHUNK);
        writer.write_slice(&zeros[..n])?;
        left -= n;
    }
    Ok(())
}
