// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Operation stamps: block contents that say which operation wrote them.
//!
//! A writer stamps each source block with its operation's number before
//! posting it; whoever holds the destination can then tell, block by
//! block, which operation's data is there, whether a block holds parts of
//! two operations (torn), and, since no two operations carry the same
//! bytes, that any later write changes the memory. Tests use it to see
//! writes that land when they must not (after UNEXPORT returned).
//!
//! Layout, little-endian 64-bit words: word 0 is [`MAGIC`], word 1 the
//! operation's number, word `i >= 2` the number times an odd constant xor
//! `i` (so that a tear at any word boundary shows).

/// Word 0 of a stamped block ("RRDMASTP").
pub const MAGIC: u64 = 0x5054_5341_4d44_5252;

const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// Word `i` (`i >= 2`) of a block stamped by operation `op`.
fn word(op: u64, i: usize) -> u64 {
    op.wrapping_mul(MIX) ^ i as u64
}

/// Stamps `block` (a multiple of 8 bytes, at least 16) as written by
/// operation `op`.
pub fn stamp(block: &mut [u8], op: u64) {
    for (i, w) in block.chunks_exact_mut(8).enumerate() {
        let v = match i {
            0 => MAGIC,
            1 => op,
            _ => word(op, i),
        };
        w.copy_from_slice(&v.to_le_bytes());
    }
}

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// The whole block as operation `n` stamped it.
    Op(u64),
    /// A stamp's first words, but not the rest of the same operation:
    /// parts of two writes, or a write placed only in part.
    Torn,
    /// No stamp at all.
    None,
}

/// Reads the stamp of `block` (as [`stamp`] wrote it).
pub fn read(block: &[u8]) -> Stamp {
    let at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&block[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    };
    if block.len() < 16 || at(0) != MAGIC {
        return Stamp::None;
    }
    let op = at(1);
    if (2..block.len() / 8).all(|i| at(i) == word(op, i)) {
        Stamp::Op(op)
    } else {
        Stamp::Torn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tears() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        assert_eq!(read(&a), Stamp::None);
        stamp(&mut a, 7);
        stamp(&mut b, 8);
        assert_eq!(read(&a), Stamp::Op(7));
        assert_eq!(read(&b), Stamp::Op(8));
        assert_ne!(a, b);
        // Any tear at a word boundary past the first two words shows.
        for cut in [16, 24, 1024, 4088] {
            let mut t = a.clone();
            t[cut..].copy_from_slice(&b[cut..]);
            assert_eq!(read(&t), Stamp::Torn, "cut at {cut}");
        }
        // The head of one operation on the body of another.
        let mut t = b.clone();
        t[..16].copy_from_slice(&a[..16]);
        assert_eq!(read(&t), Stamp::Torn);
        // A block of another kind of content.
        let mut t = a.clone();
        t[0] ^= 1;
        assert_eq!(read(&t), Stamp::None);
        assert_eq!(read(&a[..8]), Stamp::None);
    }
}
