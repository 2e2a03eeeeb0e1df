// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Operations whose local side is a list of DMA segments rather than a
//! region (rrdma-blk's zero copy: a request's pages, mapped with the
//! device's local DMA key): each work request's piece stays inside one
//! segment and one remote chunk, so that it names one local address
//! range and one remote key.

/// One local DMA segment: its device address and length (the layout of
/// the module shim's `struct rrdma_shim_dma_seg`, which the module reads
/// as these).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaSeg {
    pub addr: u64,
    pub len: u32,
}

/// One work request's piece: `len` bytes from local device address
/// `addr` to remote offset `remote_off` (or back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaPiece {
    pub addr: u64,
    pub remote_off: u64,
    pub len: u32,
}

/// Cuts `segs`, laid end to end from remote offset `remote_off`, at every
/// remote chunk boundary (`1 << remote_shift`). Empty segments give no
/// piece.
pub fn dma_pieces(segs: &[DmaSeg], remote_off: u64, remote_shift: u32) -> DmaPieces<'_> {
    DmaPieces {
        segs,
        done_in_seg: 0,
        remote_off,
        remote_shift,
    }
}

/// How many pieces [`dma_pieces`] gives.
pub fn dma_piece_count(segs: &[DmaSeg], remote_off: u64, remote_shift: u32) -> u64 {
    let mut n = 0;
    let mut off = remote_off;
    for s in segs.iter().filter(|s| s.len > 0) {
        let end = off + u64::from(s.len);
        // Boundaries `b` with `off < b < end`, plus the piece itself.
        n += 1 + (((end - 1) >> remote_shift) - (off >> remote_shift));
        off = end;
    }
    n
}

/// The bytes `segs` hold, or `None` past `u64`.
pub fn dma_bytes(segs: &[DmaSeg]) -> Option<u64> {
    segs.iter()
        .try_fold(0u64, |acc, s| acc.checked_add(u64::from(s.len)))
}

/// Iterator returned by [`dma_pieces`].
#[derive(Clone, Debug)]
pub struct DmaPieces<'a> {
    segs: &'a [DmaSeg],
    /// Bytes of `segs[0]` already given.
    done_in_seg: u32,
    remote_off: u64,
    remote_shift: u32,
}

impl Iterator for DmaPieces<'_> {
    type Item = DmaPiece;

    fn next(&mut self) -> Option<DmaPiece> {
        loop {
            let (s, rest) = self.segs.split_first()?;
            let left = s.len - self.done_in_seg;
            if left == 0 {
                self.segs = rest;
                self.done_in_seg = 0;
                continue;
            }
            let size = 1u64 << self.remote_shift;
            let to_boundary = size - (self.remote_off & (size - 1));
            let len = u64::from(left).min(to_boundary) as u32;
            let piece = DmaPiece {
                addr: s.addr + u64::from(self.done_in_seg),
                remote_off: self.remote_off,
                len,
            };
            self.done_in_seg += len;
            self.remote_off += u64::from(len);
            return Some(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn seg(addr: u64, len: u32) -> DmaSeg {
        DmaSeg { addr, len }
    }

    #[test]
    fn a_segment_inside_one_chunk_is_one_piece() {
        let segs = [seg(0x1000, 4096)];
        let p: [DmaPiece; 1] = [DmaPiece {
            addr: 0x1000,
            remote_off: 8192,
            len: 4096,
        }];
        assert!(dma_pieces(&segs, 8192, 16).eq(p));
        assert_eq!(dma_piece_count(&segs, 8192, 16), 1);
    }

    #[test]
    fn a_remote_boundary_cuts_a_segment() {
        // 8 KiB from remote 60 KiB over 64 KiB chunks: 4 KiB each side.
        let segs = [seg(0x10_0000, 8192)];
        let got: [DmaPiece; 2] = [
            DmaPiece {
                addr: 0x10_0000,
                remote_off: 61440,
                len: 4096,
            },
            DmaPiece {
                addr: 0x10_1000,
                remote_off: 65536,
                len: 4096,
            },
        ];
        assert!(dma_pieces(&segs, 61440, 16).eq(got));
        assert_eq!(dma_piece_count(&segs, 61440, 16), 2);
    }

    #[test]
    fn segments_follow_each_other_remotely_and_empty_ones_vanish() {
        let segs = [seg(0x5000, 512), seg(0, 0), seg(0x9000, 1024)];
        let got: [DmaPiece; 2] = [
            DmaPiece {
                addr: 0x5000,
                remote_off: 0,
                len: 512,
            },
            DmaPiece {
                addr: 0x9000,
                remote_off: 512,
                len: 1024,
            },
        ];
        assert!(dma_pieces(&segs, 0, 12).eq(got));
        assert_eq!(dma_piece_count(&segs, 0, 12), 2);
        assert_eq!(dma_bytes(&segs), Some(1536));
        assert_eq!(dma_pieces(&[], 0, 12).count(), 0);
    }
}
