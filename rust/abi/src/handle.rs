// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Object handles: small integers in a per-file namespace.
//!
//! A handle is `index + 1` in its low [`INDEX_BITS`] bits (so 0 is never a
//! handle) and the slot's generation in the high bits, so a handle kept
//! after its object was destroyed does not silently name the slot's next
//! occupant (until the 8-bit generation wraps).

/// Bits of a handle that hold the slot index (plus one).
pub const INDEX_BITS: u32 = 24;
/// Most slots a file can have.
pub const MAX_SLOTS: u32 = (1 << INDEX_BITS) - 1;

/// The handle of slot `index` at generation `generation`.
pub fn encode(index: u32, generation: u8) -> u32 {
    debug_assert!(index < MAX_SLOTS);
    ((generation as u32) << INDEX_BITS) | (index + 1)
}

/// The `(index, generation)` a handle names; `None` for 0 or a malformed one.
pub fn decode(handle: u32) -> Option<(u32, u8)> {
    let low = handle & MAX_SLOTS;
    if low == 0 {
        return None;
    }
    Some((low - 1, (handle >> INDEX_BITS) as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_zero() {
        assert_eq!(decode(0), None);
        assert_eq!(decode(1 << INDEX_BITS), None);
        assert_eq!(decode(encode(0, 0)), Some((0, 0)));
        assert_eq!(encode(0, 0), 1);
        assert_eq!(decode(encode(41, 200)), Some((41, 200)));
        assert_eq!(
            decode(encode(MAX_SLOTS - 1, 255)),
            Some((MAX_SLOTS - 1, 255))
        );
    }
}
