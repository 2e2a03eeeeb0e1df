// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The handshake's reject: the errno a listener refuses a connect request
//! with, as it travels in the reject's private data, and the reason its
//! log line gives.

use super::super::errno::{
    Errno, EBUSY, ECONNREFUSED, EDQUOT, ENOENT, ENOSPC, EPROTO, EPROTONOSUPPORT,
};
use super::{le32, put16, put32, MAGIC, VERSION};

/// Bytes of an encoded reject.
pub const REJECT_LEN: usize = 16;

/// Encodes a reject carrying `errno` (positive).
pub fn reject(errno: Errno) -> [u8; REJECT_LEN] {
    let mut b = [0u8; REJECT_LEN];
    put32(&mut b, 0, MAGIC);
    put16(&mut b, 4, VERSION);
    put32(&mut b, 8, errno.get() as u32);
    b
}

/// Decodes a peer's reject into the errno it carries. A reject that is not
/// ours (another consumer, or the CM itself) is `None`.
pub fn decode_reject(b: &[u8]) -> Option<Errno> {
    if b.len() < REJECT_LEN || le32(b, 0) != MAGIC {
        return None;
    }
    Errno::new(le32(b, 8) as i32)
}

/// The errno a listener's refusal with `e` carries to the peer: a cap of
/// this host's (`ENOSPC`, `EDQUOT`) is not the connecting file's, whose
/// CONNECT would say so with the same errno: it gets `ECONNREFUSED`.
pub fn errno_for_peer(e: Errno) -> Errno {
    if e == ENOSPC || e == EDQUOT {
        ECONNREFUSED
    } else {
        e
    }
}

/// Why a listener refused a connect request with `e`, for its log line.
pub fn refusal_reason(e: Errno) -> &'static str {
    if e == EPROTO {
        "malformed handshake"
    } else if e == EPROTONOSUPPORT {
        "the peer's protocol version is too old"
    } else if e == EBUSY {
        "backlog full"
    } else if e == ECONNREFUSED {
        "the listener is closing"
    } else if e == ENOENT {
        "no connection for the lane to join"
    } else if e == ENOSPC {
        "the listener's file holds max_file_conns connections"
    } else if e == EDQUOT {
        "the listener's user holds max_user_conns connections"
    } else {
        "the connection could not be set up"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::EIO;

    #[test]
    fn every_refusal_has_a_reason() {
        assert_eq!(refusal_reason(EPROTO), "malformed handshake");
        assert_eq!(refusal_reason(EBUSY), "backlog full");
        assert_ne!(refusal_reason(EPROTONOSUPPORT), refusal_reason(EPROTO));
        assert_ne!(refusal_reason(ECONNREFUSED), refusal_reason(EIO));
        assert_ne!(refusal_reason(ENOENT), refusal_reason(EIO));
        assert_ne!(refusal_reason(ENOSPC), refusal_reason(EIO));
        assert_ne!(refusal_reason(EDQUOT), refusal_reason(ENOSPC));
    }

    #[test]
    fn caps_reach_the_peer_as_refusals() {
        assert_eq!(errno_for_peer(ENOSPC), ECONNREFUSED);
        assert_eq!(errno_for_peer(EDQUOT), ECONNREFUSED);
        assert_eq!(errno_for_peer(EBUSY), EBUSY);
        assert_eq!(errno_for_peer(EPROTO), EPROTO);
    }

    #[test]
    fn rejects_carry_errnos() {
        assert_eq!(decode_reject(&reject(ECONNREFUSED)), Some(ECONNREFUSED));
        assert_eq!(decode_reject(&[0u8; 16]), None);
        assert_eq!(decode_reject(&reject(ECONNREFUSED)[..8]), None);
        // Errno 0 or out of range: not a reject of ours.
        for bad in [0u32, 4096, u32::MAX] {
            let mut b = reject(ECONNREFUSED);
            b[8..12].copy_from_slice(&bad.to_le_bytes());
            assert_eq!(decode_reject(&b), None);
        }
    }
}
