// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fault suite's self-describing blocks and the rule that judges one.
//!
//! A block written by the workload carries its own identity: a magic, the
//! block's index, a generation (how many writes the block has had) and a
//! checksum of the rest, then a payload that the index and generation
//! determine. A read can therefore tell a block that holds a given write
//! from a stale, misplaced or torn one, without any other record than the
//! journal's two generations per block (`state.rs`).

/// Bytes per block (the exporter serves 4 KiB blocks).
pub(crate) const BLOCK: usize = 4096;
const MAGIC: &[u8; 8] = b"RRDMAFLT";
const HEADER: usize = 32;

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in *p {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Fills `buf` (one block) with write number `gen` of block `block`.
pub(crate) fn fill(buf: &mut [u8], block: u64, gen: u64) {
    let buf = &mut buf[..BLOCK];
    buf[..8].copy_from_slice(MAGIC);
    buf[8..16].copy_from_slice(&block.to_le_bytes());
    buf[16..24].copy_from_slice(&gen.to_le_bytes());
    let mut seed = (block << 40) ^ gen;
    for chunk in buf[HEADER..].chunks_mut(8) {
        let v = splitmix(&mut seed).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    let sum = fnv1a(&[&buf[..24], &buf[HEADER..]]);
    buf[24..32].copy_from_slice(&sum.to_le_bytes());
}

/// What a block's content says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Content {
    /// Write `gen` of this block, intact.
    Write(u64),
    /// Not a block the workload wrote (no magic): the exporter's own fill.
    Foreign,
    /// The magic, but another block's index, a bad checksum or a payload
    /// that is not the one its header names.
    Damaged,
}

/// Reads what `buf` holds, for block `block`.
pub(crate) fn content(buf: &[u8], block: u64) -> Content {
    let buf = &buf[..BLOCK];
    if &buf[..8] != MAGIC {
        return Content::Foreign;
    }
    let word = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or([0; 8]));
    let gen = word(16);
    if word(8) != block || word(24) != fnv1a(&[&buf[..24], &buf[HEADER..]]) {
        return Content::Damaged;
    }
    let mut want = [0u8; BLOCK];
    fill(&mut want, block, gen);
    if want[..] == buf[..] {
        Content::Write(gen)
    } else {
        Content::Damaged
    }
}

/// The verdict on one block against the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Never written by the workload: nothing to check.
    Unwritten,
    /// Holds the acknowledged write, or the one in flight when a fault hit.
    Holds,
    /// An acknowledged write is missing: an older one, or none, is there.
    Lost,
    /// The block is torn or misplaced.
    Damaged,
}

/// Judges `buf` for block `block` whose last acknowledged write is `acked`
/// and whose write `pending`, if above `acked`, was posted but never
/// acknowledged (it may or may not have landed: both are correct).
pub(crate) fn judge(buf: &[u8], block: u64, acked: u64, pending: u64) -> Verdict {
    if acked == 0 && pending == 0 {
        return Verdict::Unwritten;
    }
    match content(buf, block) {
        Content::Write(g) if g == acked || (pending > acked && g == pending) => Verdict::Holds,
        Content::Foreign if acked == 0 => Verdict::Holds,
        Content::Damaged => Verdict::Damaged,
        Content::Write(_) | Content::Foreign => Verdict::Lost,
    }
}

/// The generation the next write of a block uses: the unacknowledged one
/// again (a retry writes the same bytes), else the next.
pub(crate) fn next_gen(acked: u64, pending: u64) -> u64 {
    if pending > acked {
        pending
    } else {
        acked + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(b: u64, g: u64) -> Vec<u8> {
        let mut v = vec![0u8; BLOCK];
        fill(&mut v, b, g);
        v
    }

    #[test]
    fn a_block_reads_back_as_its_write() {
        assert_eq!(content(&block(7, 3), 7), Content::Write(3));
        assert_eq!(content(&vec![0x5a; BLOCK], 7), Content::Foreign);
    }

    #[test]
    fn misplaced_or_torn_blocks_are_damaged() {
        assert_eq!(content(&block(7, 3), 8), Content::Damaged);
        let mut torn = block(7, 3);
        torn[BLOCK - 1] ^= 1;
        assert_eq!(content(&torn, 7), Content::Damaged);
        // A torn write: the first half of write 4 over write 3.
        let mut mixed = block(7, 3);
        mixed[..BLOCK / 2].copy_from_slice(&block(7, 4)[..BLOCK / 2]);
        assert_eq!(content(&mixed, 7), Content::Damaged);
    }

    #[test]
    fn the_journal_accepts_the_acked_or_the_pending_write_only() {
        let b = block(1, 5);
        assert_eq!(judge(&b, 1, 5, 5), Verdict::Holds);
        assert_eq!(judge(&b, 1, 4, 5), Verdict::Holds);
        assert_eq!(judge(&b, 1, 5, 6), Verdict::Holds);
        assert_eq!(judge(&b, 1, 6, 6), Verdict::Lost);
        assert_eq!(judge(&b, 1, 3, 4), Verdict::Lost);
        assert_eq!(judge(&vec![0; BLOCK], 1, 0, 1), Verdict::Holds);
        assert_eq!(judge(&vec![0; BLOCK], 1, 1, 1), Verdict::Lost);
        assert_eq!(judge(&vec![0; BLOCK], 1, 0, 0), Verdict::Unwritten);
    }

    #[test]
    fn a_retry_rewrites_the_pending_generation() {
        assert_eq!(next_gen(0, 0), 1);
        assert_eq!(next_gen(4, 5), 5);
        assert_eq!(next_gen(5, 5), 6);
    }
}
