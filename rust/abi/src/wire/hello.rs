// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The handshake's hello: the [`Hello`] of the connect request and the
//! accept, the version both sides speak and the queue pairs the accept
//! grants.

use super::super::errno::{Errno, EPROTO, EPROTONOSUPPORT};
use super::{
    ctrl_recv_min, le16, le32, le64, put16, put32, put64, LANES_VERSION, MAGIC, MIN_VERSION,
    QPS_MAX, REPLACES_VERSION, VERSION,
};

/// Handshake message, in the connect request and in the accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The sender's newest version (request) or the chosen one (accept).
    pub version: u16,
    /// Control messages the sender can receive at once (its posted RECVs).
    pub ctrl_credits: u16,
    /// Queue pairs the sender offers (request) or grants (accept): the
    /// connection's own and its lanes (version 5; before, always 1).
    pub qps: u16,
    /// Random per-connection value: the active side's names the connection
    /// on both sides.
    pub nonce: u64,
    /// A reconnect's request (version 4): the nonce of the sender's
    /// previous connection to this peer, which the passive side ends before
    /// it accepts. Bound to the sender's address: a peer can end only its
    /// own connections, and only those whose nonce it was given.
    pub replaces: Option<u64>,
    /// A lane's request (version 5): the index, from 1 to [`QPS_MAX`] - 1,
    /// of the queue pair it adds to the sender's connection named by
    /// `nonce`. Bound to the sender's address like `replaces`, and never
    /// with it.
    pub lane: Option<u16>,
}

/// Bytes of an encoded [`Hello`]; fits the 56 bytes IB CM leaves to rdma_cm
/// users on RoCE.
pub const HELLO_LEN: usize = 32;
/// Bytes of a version 2 or 3 hello (no `replaces`).
pub const HELLO_V3_LEN: usize = 24;
/// Hello flag (version 4): `replaces` is set.
pub const HELLO_REPLACES: u16 = 1;
/// Hello flag (version 5): `lane` is set (in bytes 12 and 13).
pub const HELLO_JOINS: u16 = 2;

impl Hello {
    /// Encodes: magic, version, flags, credits, qps, the lane (else
    /// reserved), reserved, nonce, and the replaced nonce (zero without
    /// [`HELLO_REPLACES`]). A version 2 or 3 peer reads the first
    /// [`HELLO_V3_LEN`] bytes; `replaces` and `lane` must then be `None`
    /// (the flags would be refused).
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        put32(&mut b, 0, MAGIC);
        put16(&mut b, 4, self.version);
        let mut flags = 0;
        if let Some(r) = self.replaces {
            flags |= HELLO_REPLACES;
            put64(&mut b, 24, r);
        }
        if let Some(l) = self.lane {
            flags |= HELLO_JOINS;
            put16(&mut b, 12, l);
        }
        put16(&mut b, 6, flags);
        put16(&mut b, 8, self.ctrl_credits);
        put16(&mut b, 10, self.qps);
        put64(&mut b, 16, self.nonce);
        b
    }

    /// Decodes a peer's hello. Transports may pad private data, so bytes
    /// past [`HELLO_LEN`] are ignored. A version older than
    /// [`MIN_VERSION`] is `EPROTONOSUPPORT`; anything malformed, or fewer
    /// receive buffers than [`ctrl_recv_min`] of the version both will
    /// speak, is `EPROTO`. A version 4 hello (or newer) is [`HELLO_LEN`]
    /// bytes, an older one [`HELLO_V3_LEN`]. Flags the version does not
    /// define, reserved bytes and an unflagged `replaces` must be zero up
    /// to this version; a newer peer's are ignored, since it will speak
    /// this version to us. A lane's hello must name a lane from 1 to
    /// [`QPS_MAX`] - 1 and replace nothing.
    pub fn decode(b: &[u8]) -> Result<Self, Errno> {
        if b.len() < HELLO_V3_LEN || le32(b, 0) != MAGIC {
            return Err(EPROTO);
        }
        let version = le16(b, 4);
        if version < MIN_VERSION {
            return Err(EPROTONOSUPPORT);
        }
        let v4 = version >= REPLACES_VERSION;
        if v4 && b.len() < HELLO_LEN {
            return Err(EPROTO);
        }
        let v5 = version >= LANES_VERSION;
        let flags = le16(b, 6);
        let replaces = (v4 && flags & HELLO_REPLACES != 0).then(|| le64(b, 24));
        let lane = (v5 && flags & HELLO_JOINS != 0).then(|| le16(b, 12));
        if version <= VERSION {
            let known = if v5 {
                HELLO_REPLACES | HELLO_JOINS
            } else if v4 {
                HELLO_REPLACES
            } else {
                0
            };
            let stray = v4 && replaces.is_none() && le64(b, 24) != 0;
            // Bytes 12-15, but the lane's two when it is set.
            let reserved = if lane.is_some() {
                le16(b, 14) != 0
            } else {
                le32(b, 12) != 0
            };
            if flags & !known != 0 || reserved || stray {
                return Err(EPROTO);
            }
        }
        if let Some(l) = lane {
            if l == 0 || l >= QPS_MAX || replaces.is_some() {
                return Err(EPROTO);
            }
        }
        let h = Self {
            version,
            ctrl_credits: le16(b, 8),
            qps: le16(b, 10),
            nonce: le64(b, 16),
            replaces,
            lane,
        };
        if h.ctrl_credits < ctrl_recv_min(version.min(VERSION)) || h.qps == 0 {
            return Err(EPROTO);
        }
        Ok(h)
    }
}

/// The version both sides speak, given the peer's newest.
pub fn negotiate(peer_version: u16) -> Result<u16, Errno> {
    if peer_version < MIN_VERSION {
        return Err(EPROTONOSUPPORT);
    }
    Ok(peer_version.min(VERSION))
}

/// The queue pairs the passive side grants a request offering `offered`
/// (its [`Hello::qps`]) in `version` (the negotiated one), with room for
/// `cap` (at least 1): at most [`QPS_MAX`], and 1, no lane, before
/// [`LANES_VERSION`].
pub fn grant_qps(offered: u16, version: u16, cap: u16) -> u16 {
    if version < LANES_VERSION {
        return 1;
    }
    offered.min(cap).clamp(1, QPS_MAX)
}

/// Queue pairs a side offers (the active side) or grants at most (the
/// passive side) with its `queue_pairs` module parameter `param`: `param`,
/// or one more where the connection's own queue pair is a small one for
/// control messages (`own_small`: a file's connection, not a disk's, whose
/// peer speaks `LANES_WANTED_VERSION`), so that the lanes alone give
/// each CPU a queue pair, as nvme-rdma's I/O queues beside its admin
/// queue; at most [`QPS_MAX`].
pub fn qps_wanted(param: u16, own_small: bool) -> u16 {
    match own_small && param > 1 {
        true => param.saturating_add(1).min(QPS_MAX),
        false => param,
    }
}

/// The lanes the active side may connect, from the passive side's accept
/// of a request that offered `offered` queue pairs: none before
/// [`LANES_VERSION`]; `EPROTO` for an accept that grants more than the
/// offer or is itself a lane's hello.
pub fn granted_lanes(accept: &Hello, offered: u16) -> Result<u16, Errno> {
    if accept.version < LANES_VERSION {
        return Ok(0);
    }
    if accept.lane.is_some() || accept.qps > offered.min(QPS_MAX) {
        return Err(EPROTO);
    }
    Ok(accept.qps - 1)
}

/// The version the passive side chose, from its accept: one we speak
/// (`EPROTO` otherwise: it must not choose above our offer).
pub fn chosen(version: u16) -> Result<u16, Errno> {
    if !(MIN_VERSION..=VERSION).contains(&version) {
        return Err(EPROTO);
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ctrl_recv_idle_min, CTRL_RECV_MIN};

    fn hello() -> Hello {
        Hello {
            version: VERSION,
            ctrl_credits: 32,
            qps: 2,
            nonce: 0x1122_3344_5566_7788,
            replaces: None,
            lane: None,
        }
    }

    #[test]
    fn a_reconnect_names_the_connection_it_replaces() {
        let h = Hello {
            replaces: Some(0x0bad_cafe),
            ..hello()
        };
        let b = h.encode();
        assert_eq!(le16(&b, 6), HELLO_REPLACES);
        assert_eq!(Hello::decode(&b), Ok(h));
        // Unflagged, the replaced nonce must be zero (this version).
        let mut stray = hello().encode();
        put64(&mut stray, 24, 5);
        assert_eq!(Hello::decode(&stray), Err(EPROTO));
        // Flags this version does not define.
        let mut unknown = b;
        put16(&mut unknown, 6, HELLO_REPLACES | 4);
        assert_eq!(Hello::decode(&unknown), Err(EPROTO));
        // A newer peer's unknown flags are ignored; its `replaces` kept.
        put16(&mut unknown, 4, VERSION + 1);
        assert_eq!(Hello::decode(&unknown).map(|h| h.replaces), Ok(h.replaces));
        // A version 4 hello is 32 bytes; a version 3 one 24, whose flags
        // must be zero and whose bytes past 24 are not read.
        assert_eq!(Hello::decode(&b[..HELLO_V3_LEN]), Err(EPROTO));
        let mut v3 = hello().encode();
        put16(&mut v3, 4, 3);
        let h3 = Hello::decode(&v3[..HELLO_V3_LEN]).unwrap();
        assert_eq!((h3.version, h3.replaces), (3, None));
        put64(&mut v3, 24, 9);
        assert_eq!(Hello::decode(&v3).map(|h| h.replaces), Ok(None));
        put16(&mut v3, 6, HELLO_REPLACES);
        assert_eq!(Hello::decode(&v3), Err(EPROTO));
    }

    #[test]
    fn a_lane_names_its_connection_and_index() {
        let l = Hello {
            lane: Some(3),
            ..hello()
        };
        let b = l.encode();
        assert_eq!(le16(&b, 6), HELLO_JOINS);
        assert_eq!(le16(&b, 12), 3);
        assert_eq!(Hello::decode(&b), Ok(l));
        // Lane 0 is the connection's own queue pair; QPS_MAX is too many.
        for bad in [0, QPS_MAX, u16::MAX] {
            let mut m = b;
            put16(&mut m, 12, bad);
            assert_eq!(Hello::decode(&m), Err(EPROTO), "lane {bad}");
        }
        // A lane replaces nothing; its other reserved bytes stay zero.
        let both = Hello {
            replaces: Some(1),
            ..l
        };
        assert_eq!(Hello::decode(&both.encode()), Err(EPROTO));
        let mut res = b;
        res[15] = 1;
        assert_eq!(Hello::decode(&res), Err(EPROTO));
        // Before version 5 the flag is undefined.
        let mut v4 = b;
        put16(&mut v4, 4, 4);
        assert_eq!(Hello::decode(&v4), Err(EPROTO));
        // Without the flag, bytes 12 and 13 are reserved.
        let mut stray = hello().encode();
        put16(&mut stray, 12, 3);
        assert_eq!(Hello::decode(&stray), Err(EPROTO));
    }

    #[test]
    fn queue_pairs_are_granted_within_the_offer_and_the_cap() {
        assert_eq!(grant_qps(4, LANES_VERSION, 16), 4);
        assert_eq!(grant_qps(64, LANES_VERSION, 64), QPS_MAX);
        assert_eq!(grant_qps(4, LANES_VERSION, 2), 2);
        assert_eq!(grant_qps(4, LANES_VERSION, 0), 1);
        // A small own queue pair adds one: the lanes alone carry one per
        // CPU; none with one queue pair, at most QPS_MAX.
        assert_eq!(qps_wanted(2, true), 3);
        assert_eq!(qps_wanted(2, false), 2);
        assert_eq!(qps_wanted(1, true), 1);
        assert_eq!(qps_wanted(QPS_MAX, true), QPS_MAX);
        // An older peer gets one: no lane.
        assert_eq!(grant_qps(4, 4, 16), 1);
        let accept = |version, qps| Hello {
            version,
            qps,
            ..hello()
        };
        assert_eq!(granted_lanes(&accept(LANES_VERSION, 3), 4), Ok(2));
        assert_eq!(granted_lanes(&accept(LANES_VERSION, 1), 4), Ok(0));
        assert_eq!(granted_lanes(&accept(4, 3), 4), Ok(0));
        // More than offered, or a lane's hello as an accept.
        assert_eq!(granted_lanes(&accept(LANES_VERSION, 5), 4), Err(EPROTO));
        let lane = Hello {
            lane: Some(1),
            ..accept(LANES_VERSION, 2)
        };
        assert_eq!(granted_lanes(&lane, 4), Err(EPROTO));
    }

    #[test]
    fn hello_round_trips_and_tolerates_padding() {
        let h = hello();
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        let mut padded = [0u8; 56];
        padded[..HELLO_LEN].copy_from_slice(&h.encode());
        assert_eq!(Hello::decode(&padded), Ok(h));
    }

    #[test]
    fn malformed_hellos_are_refused() {
        let b = hello().encode();
        assert_eq!(Hello::decode(&b[..HELLO_LEN - 1]), Err(EPROTO));
        assert_eq!(Hello::decode(&[]), Err(EPROTO));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(Hello::decode(&bad), Err(EPROTO));
        let mut old = b;
        put16(&mut old, 4, 0);
        assert_eq!(Hello::decode(&old), Err(EPROTONOSUPPORT));
        let mut flags = b;
        put16(&mut flags, 6, 4);
        assert_eq!(Hello::decode(&flags), Err(EPROTO));
        let mut res = b;
        res[13] = 1;
        assert_eq!(Hello::decode(&res), Err(EPROTO));
        let mut nocred = b;
        put16(&mut nocred, 8, 0);
        assert_eq!(Hello::decode(&nocred), Err(EPROTO));
        let mut few = b;
        put16(&mut few, 8, CTRL_RECV_MIN - 1);
        assert_eq!(Hello::decode(&few), Err(EPROTO));
        let mut v1 = b;
        put16(&mut v1, 4, 1);
        assert_eq!(Hello::decode(&v1), Err(EPROTONOSUPPORT));
    }

    #[test]
    fn newer_peers_negotiate_down() {
        let mut b = hello().encode();
        put16(&mut b, 4, 7);
        // Every flag but the lane's, whose lane would be 0.
        put16(&mut b, 6, !HELLO_JOINS);
        let h = Hello::decode(&b).unwrap();
        assert_eq!(negotiate(h.version), Ok(VERSION));
        assert_eq!(negotiate(0), Err(EPROTONOSUPPORT));
    }

    #[test]
    fn credits_follow_the_version_spoken() {
        assert_eq!(ctrl_recv_min(2), 24);
        assert_eq!(ctrl_recv_min(3), 26);
        assert_eq!(ctrl_recv_min(4), 26);
        assert_eq!(ctrl_recv_min(5), 26);
        assert_eq!(ctrl_recv_min(6), 27);
        // The peer's requests, revokes, ping and ask for lanes (v6), and
        // the answer to our ping (v3).
        assert_eq!(ctrl_recv_idle_min(2), 12);
        assert_eq!(ctrl_recv_idle_min(3), 14);
        assert_eq!(ctrl_recv_idle_min(6), 15);
        assert_eq!(CTRL_RECV_MIN, ctrl_recv_min(VERSION));
        // A version 2 peer needs 24 buffers; a version 3 to 5 one 26, a
        // version 6 one 27; a newer one speaks version 6 with us.
        let mut b = hello().encode();
        put16(&mut b, 8, 24);
        assert_eq!(Hello::decode(&b), Err(EPROTO));
        put16(&mut b, 4, 2);
        assert_eq!(Hello::decode(&b).map(|h| h.version), Ok(2));
        put16(&mut b, 4, 9);
        assert_eq!(Hello::decode(&b), Err(EPROTO));
        put16(&mut b, 8, 26);
        assert_eq!(Hello::decode(&b), Err(EPROTO));
        put16(&mut b, 8, 27);
        assert_eq!(Hello::decode(&b).map(|h| h.version), Ok(9));
        assert_eq!(negotiate(2), Ok(2));
        assert_eq!(negotiate(9), Ok(VERSION));
        assert_eq!(chosen(2), Ok(2));
        assert_eq!(chosen(VERSION), Ok(VERSION));
        assert_eq!(chosen(VERSION + 1), Err(EPROTO));
        assert_eq!(chosen(1), Err(EPROTO));
    }
}
