// SPDX-License-Identifier: GPL-2.0 OR MIT

//! rrdma's wire protocol between two kernels.
//!
//! - The **handshake** rides in rdma_cm private data: a [`Hello`] in the
//!   connect request and in the accept, a [`reject`] message carrying an
//!   errno when the passive side refuses. A reconnecting active side names
//!   the connection it replaces ([`Hello::replaces`], version 4), and the
//!   passive side ends that one before it accepts: nothing still queued on
//!   the old connection can land after the new one is up. From version 5
//!   the request offers queue pairs and the accept grants some
//!   ([`grant_qps`], [`granted_lanes`]): the connection's own, for control
//!   messages, and data lanes, each connected by a request of its own that
//!   names the connection it joins ([`Hello::lane`]).
//! - **Control messages** ([`Ctrl`]) travel as fixed-size SEND/RECV
//!   messages over the connection's QP into pre-posted receive buffers.
//!   Every message a side sends on its own initiative is a request that the
//!   peer answers ([`Ctrl::ImportReq`] → [`Ctrl::ImportResp`],
//!   [`Ctrl::Revoke`] → [`Ctrl::RevokeAck`], [`Ctrl::Ping`] →
//!   [`Ctrl::Pong`]), and each side keeps at most [`REQ_MAX`] import
//!   requests, [`REVOKE_MAX`] revokes and [`PING_MAX`] pings outstanding. A
//!   receiver re-posts a buffer before it answers what the buffer held, so
//!   an answer also returns the buffer: the messages a peer can have in
//!   our buffers at once are bounded by [`CTRL_RECV_MIN`], whatever the
//!   timing. (iWARP has no receiver-not-ready retry: a SEND that finds no
//!   buffer kills the connection.)
//!
//! All integers are little-endian (the peers need not share endianness).
//! Decoders check length, magic, version and every reserved byte, and never
//! panic on any input: a peer is not trusted.

use super::errno::{Errno, EBUSY, ECONNREFUSED, ENOENT, EPROTO, EPROTONOSUPPORT};

/// `"RRDM"` as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"RRDM");
/// Newest protocol version this build speaks. Version 2 acknowledges
/// revokes ([`Ctrl::RevokeAck`]) and bounds outstanding messages; version 3
/// adds keepalive ([`Ctrl::Ping`], [`Ctrl::Pong`]); version 4 lets a
/// reconnect name the connection it replaces ([`Hello::replaces`]);
/// version 5 negotiates queue pairs and lets a lane join its connection
/// ([`Hello::lane`]).
pub const VERSION: u16 = 5;
/// First protocol version with keepalive.
pub const KEEPALIVE_VERSION: u16 = 3;
/// First protocol version whose hello names the connection it replaces.
pub const REPLACES_VERSION: u16 = 4;
/// First protocol version with data lanes.
pub const LANES_VERSION: u16 = 5;
/// Most queue pairs of one connection: its own and its lanes.
pub const QPS_MAX: u16 = 16;
/// Oldest protocol version this build accepts: version 1 sent revokes
/// without flow control, which iWARP cannot survive.
pub const MIN_VERSION: u16 = 2;

/// Import requests one side may have outstanding on a connection.
pub const REQ_MAX: usize = 8;
/// Revokes one side may have outstanding on a connection.
pub const REVOKE_MAX: usize = 4;
/// Pings one side may have outstanding on a connection (version 3).
pub const PING_MAX: usize = 1;
/// Receive buffers a side must post (and advertise in its [`Hello`]) to
/// speak `version`: the peer's requests, revokes and pings, and the answers
/// to ours.
pub const fn ctrl_recv_min(version: u16) -> u16 {
    let per_side = if version >= KEEPALIVE_VERSION {
        REQ_MAX + REVOKE_MAX + PING_MAX
    } else {
        REQ_MAX + REVOKE_MAX
    };
    (2 * per_side) as u16
}
/// Receive buffers a side must post to speak [`VERSION`].
pub const CTRL_RECV_MIN: u16 = ctrl_recv_min(VERSION);

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}
fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

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
    } else {
        "the connection could not be set up"
    }
}

/// Bytes of every control message (the size of a receive buffer).
pub const CTRL_LEN: usize = 512;

/// Bytes before the rkeys of an import response.
const RESP_HEADER: usize = 48;

/// Most rkeys one import response carries; a region with more chunks is
/// imported in several request/response rounds.
pub const GRANT_KEYS_MAX: usize = (CTRL_LEN - RESP_HEADER) / 4;

const OP_IMPORT_REQ: u8 = 1;
const OP_IMPORT_RESP: u8 = 2;
const OP_REVOKE: u8 = 3;
const OP_REVOKE_ACK: u8 = 4;
const OP_PING: u8 = 5;
const OP_PONG: u8 = 6;

/// Smallest registration chunk (`chunk_shift`): one page.
pub const CHUNK_SHIFT_MIN: u8 = 12;
/// Largest registration chunk: 1 GiB.
pub const CHUNK_SHIFT_MAX: u8 = 30;

/// What an export grants, as the importer learns it: the region's shape
/// and the rkeys of a run of its registration chunks. Chunk `i` covers
/// region bytes `[i << chunk_shift, (i + 1) << chunk_shift)` and is
/// registered at that same offset (the I/O virtual address is the offset in
/// the region), so no kernel address crosses the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Block size of the region.
    pub block_size: u32,
    /// Number of blocks.
    pub nblocks: u64,
    /// Export generation.
    pub generation: u32,
    /// Whether writes are allowed.
    pub writable: bool,
    /// log2 of the registration chunk size.
    pub chunk_shift: u8,
    /// Index of the chunk `rkeys[0]` registers.
    pub first_chunk: u32,
    /// Number of valid entries in `rkeys`.
    pub nkeys: u16,
    /// rkeys (stay in the importing kernel).
    pub rkeys: [u32; GRANT_KEYS_MAX],
}

impl Grant {
    /// Number of registration chunks of the region.
    pub fn chunks(&self) -> u64 {
        let bytes = self.nblocks.saturating_mul(u64::from(self.block_size));
        bytes.div_ceil(1u64 << self.chunk_shift)
    }

    /// The valid rkeys.
    pub fn keys(&self) -> &[u32] {
        &self.rkeys[..usize::from(self.nkeys).min(GRANT_KEYS_MAX)]
    }
}

/// A control message.
// The import response is ~500 bytes and the others are small; boxing needs
// an allocator this no_std crate does not have, and messages only live
// briefly on the stack of the receive path.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctrl {
    /// Importer → exporter: resolve `token` and register chunks from
    /// `first_chunk` on for this connection.
    ImportReq {
        /// Matches the response to the request.
        req_id: u64,
        /// The token userspace was given by the exporter.
        token: u64,
        /// First chunk wanted.
        first_chunk: u32,
    },
    /// Exporter → importer: the answer to an `ImportReq`.
    ImportResp {
        /// The request's id.
        req_id: u64,
        /// `Ok(grant)` or the errno for the importer.
        result: Result<Grant, Errno>,
    },
    /// Exporter → importer: the export behind `token` is revoked. The
    /// importer refuses new operations on it, lets those in flight
    /// complete, then answers with a [`Ctrl::RevokeAck`].
    Revoke {
        /// Matches the acknowledgement to the revoke (never 0).
        req_id: u64,
        /// The revoked token.
        token: u64,
        /// The generation that is no longer valid.
        generation: u32,
    },
    /// Importer → exporter: nothing of the revoked export is in flight
    /// any more; the exporter may deregister it.
    RevokeAck {
        /// The revoke's id.
        req_id: u64,
    },
    /// Either side (version 3): are you there? Answered at once.
    Ping {
        /// Matches the pong to the ping (never 0).
        seq: u64,
    },
    /// The answer to a [`Ctrl::Ping`].
    Pong {
        /// The ping's sequence number.
        seq: u64,
    },
}

impl Ctrl {
    /// Encodes into a [`CTRL_LEN`]-byte message of protocol `version`
    /// (the connection's; pings and pongs need [`KEEPALIVE_VERSION`]).
    pub fn encode(&self, version: u16) -> [u8; CTRL_LEN] {
        let mut b = [0u8; CTRL_LEN];
        put32(&mut b, 0, MAGIC);
        put16(&mut b, 4, version);
        match *self {
            Ctrl::ImportReq {
                req_id,
                token,
                first_chunk,
            } => {
                b[6] = OP_IMPORT_REQ;
                put64(&mut b, 8, req_id);
                put64(&mut b, 16, token);
                put32(&mut b, 24, first_chunk);
            }
            Ctrl::ImportResp { req_id, result } => {
                b[6] = OP_IMPORT_RESP;
                put64(&mut b, 8, req_id);
                match result {
                    Ok(g) => {
                        b[7] = u8::from(g.writable);
                        put32(&mut b, 20, g.block_size);
                        put64(&mut b, 24, g.nblocks);
                        put32(&mut b, 32, g.generation);
                        put32(&mut b, 36, g.first_chunk);
                        put16(&mut b, 40, g.nkeys);
                        b[42] = g.chunk_shift;
                        for (i, k) in g.keys().iter().enumerate() {
                            put32(&mut b, RESP_HEADER + 4 * i, *k);
                        }
                    }
                    Err(e) => put32(&mut b, 16, e.get() as u32),
                }
            }
            Ctrl::Revoke {
                req_id,
                token,
                generation,
            } => {
                b[6] = OP_REVOKE;
                put64(&mut b, 8, req_id);
                put64(&mut b, 16, token);
                put32(&mut b, 24, generation);
            }
            Ctrl::RevokeAck { req_id } => {
                b[6] = OP_REVOKE_ACK;
                put64(&mut b, 8, req_id);
            }
            Ctrl::Ping { seq } => {
                b[6] = OP_PING;
                put64(&mut b, 8, seq);
            }
            Ctrl::Pong { seq } => {
                b[6] = OP_PONG;
                put64(&mut b, 8, seq);
            }
        }
        b
    }

    /// Decodes a received message of exactly [`CTRL_LEN`] bytes, of any
    /// version from [`MIN_VERSION`] to [`VERSION`]. Pings and pongs need
    /// [`KEEPALIVE_VERSION`]. (A message carries the sender's idea of the
    /// connection's version; it is not compared with ours: on IB the peer's
    /// first message can arrive before the event that tells us the version,
    /// and every message means the same in every version that has it.)
    pub fn decode(b: &[u8]) -> Result<Self, Errno> {
        if b.len() != CTRL_LEN || le32(b, 0) != MAGIC {
            return Err(EPROTO);
        }
        let version = le16(b, 4);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(EPROTO);
        }
        let zero = |from: usize, to: usize| b[from..to].iter().all(|&x| x == 0);
        let req_id = le64(b, 8);
        let (msg, used) = match b[6] {
            OP_IMPORT_REQ if b[7] == 0 => (
                Ctrl::ImportReq {
                    req_id,
                    token: le64(b, 16),
                    first_chunk: le32(b, 24),
                },
                28,
            ),
            OP_IMPORT_RESP => {
                let status = le32(b, 16) as i32;
                if status != 0 {
                    let errno = Errno::new(status).ok_or(EPROTO)?;
                    if b[7] != 0 || !zero(20, RESP_HEADER) {
                        return Err(EPROTO);
                    }
                    (
                        Ctrl::ImportResp {
                            req_id,
                            result: Err(errno),
                        },
                        RESP_HEADER,
                    )
                } else {
                    let nkeys = le16(b, 40);
                    let chunk_shift = b[42];
                    if b[7] > 1
                        || usize::from(nkeys) > GRANT_KEYS_MAX
                        || !(CHUNK_SHIFT_MIN..=CHUNK_SHIFT_MAX).contains(&chunk_shift)
                        || !zero(43, RESP_HEADER)
                    {
                        return Err(EPROTO);
                    }
                    let mut g = Grant {
                        writable: b[7] == 1,
                        block_size: le32(b, 20),
                        nblocks: le64(b, 24),
                        generation: le32(b, 32),
                        first_chunk: le32(b, 36),
                        nkeys,
                        chunk_shift,
                        rkeys: [0; GRANT_KEYS_MAX],
                    };
                    for i in 0..usize::from(nkeys) {
                        g.rkeys[i] = le32(b, RESP_HEADER + 4 * i);
                    }
                    (
                        Ctrl::ImportResp {
                            req_id,
                            result: Ok(g),
                        },
                        RESP_HEADER + 4 * usize::from(nkeys),
                    )
                }
            }
            OP_REVOKE if b[7] == 0 && req_id != 0 && zero(28, 32) => (
                Ctrl::Revoke {
                    req_id,
                    token: le64(b, 16),
                    generation: le32(b, 24),
                },
                32,
            ),
            OP_REVOKE_ACK if b[7] == 0 && req_id != 0 => (Ctrl::RevokeAck { req_id }, 16),
            OP_PING if version >= KEEPALIVE_VERSION && b[7] == 0 && req_id != 0 => {
                (Ctrl::Ping { seq: req_id }, 16)
            }
            OP_PONG if version >= KEEPALIVE_VERSION && b[7] == 0 && req_id != 0 => {
                (Ctrl::Pong { seq: req_id }, 16)
            }
            _ => return Err(EPROTO),
        };
        if !zero(used, CTRL_LEN) {
            return Err(EPROTO);
        }
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::{ECONNREFUSED, EIO, ENOENT};

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
    fn every_refusal_has_a_reason() {
        assert_eq!(refusal_reason(EPROTO), "malformed handshake");
        assert_eq!(refusal_reason(EBUSY), "backlog full");
        assert_ne!(refusal_reason(EPROTONOSUPPORT), refusal_reason(EPROTO));
        assert_ne!(refusal_reason(ECONNREFUSED), refusal_reason(EIO));
        assert_ne!(refusal_reason(ENOENT), refusal_reason(EIO));
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

    fn grant() -> Grant {
        let mut g = Grant {
            block_size: 4096,
            nblocks: 10,
            generation: 3,
            writable: true,
            chunk_shift: 20,
            first_chunk: 0,
            nkeys: 2,
            rkeys: [0; GRANT_KEYS_MAX],
        };
        g.rkeys[0] = 0x1234;
        g.rkeys[1] = 0xffff_ffff;
        g
    }

    #[test]
    fn ctrl_round_trips() {
        let g = grant();
        let mut full = g;
        full.nkeys = GRANT_KEYS_MAX as u16;
        full.rkeys = [7; GRANT_KEYS_MAX];
        for m in [
            Ctrl::ImportReq {
                req_id: 9,
                token: u64::MAX,
                first_chunk: 116,
            },
            Ctrl::ImportResp {
                req_id: 9,
                result: Ok(g),
            },
            Ctrl::ImportResp {
                req_id: 9,
                result: Ok(full),
            },
            Ctrl::ImportResp {
                req_id: 9,
                result: Ok(Grant {
                    writable: false,
                    ..g
                }),
            },
            Ctrl::ImportResp {
                req_id: 9,
                result: Err(ENOENT),
            },
            Ctrl::Revoke {
                req_id: 3,
                token: 5,
                generation: 4,
            },
            Ctrl::RevokeAck { req_id: 3 },
            Ctrl::Ping { seq: 1 },
            Ctrl::Pong { seq: u64::MAX },
        ] {
            assert_eq!(Ctrl::decode(&m.encode(VERSION)), Ok(m));
            if !matches!(m, Ctrl::Ping { .. } | Ctrl::Pong { .. }) {
                assert_eq!(Ctrl::decode(&m.encode(MIN_VERSION)), Ok(m));
            }
        }
        assert_eq!(g.chunks(), 1);
        assert_eq!(g.keys(), &[0x1234, 0xffff_ffff]);
    }

    #[test]
    fn malformed_ctrl_is_eproto() {
        let m = Ctrl::ImportReq {
            req_id: 1,
            token: 2,
            first_chunk: 0,
        }
        .encode(VERSION);
        assert_eq!(Ctrl::decode(&m[..CTRL_LEN - 1]), Err(EPROTO));
        let mut long = [0u8; CTRL_LEN + 1];
        long[..CTRL_LEN].copy_from_slice(&m);
        assert_eq!(Ctrl::decode(&long), Err(EPROTO));
        let mut op = m;
        op[6] = 99;
        assert_eq!(Ctrl::decode(&op), Err(EPROTO));
        let mut tail = m;
        tail[CTRL_LEN - 1] = 1;
        assert_eq!(Ctrl::decode(&tail), Err(EPROTO));
        let mut st = Ctrl::ImportResp {
            req_id: 1,
            result: Err(EIO),
        }
        .encode(VERSION);
        put32(&mut st, 16, 5000);
        assert_eq!(Ctrl::decode(&st), Err(EPROTO));
        let ok = Ctrl::ImportResp {
            req_id: 1,
            result: Ok(grant()),
        }
        .encode(VERSION);
        let mut many = ok;
        put16(&mut many, 40, GRANT_KEYS_MAX as u16 + 1);
        assert_eq!(Ctrl::decode(&many), Err(EPROTO));
        let mut shift = ok;
        shift[42] = 40;
        assert_eq!(Ctrl::decode(&shift), Err(EPROTO));
        // A key past nkeys is trailing garbage.
        let mut extra = ok;
        put32(&mut extra, RESP_HEADER + 8, 1);
        assert_eq!(Ctrl::decode(&extra), Err(EPROTO));
        // Revokes and their acknowledgements carry an id.
        let mut rv = Ctrl::Revoke {
            req_id: 1,
            token: 2,
            generation: 3,
        }
        .encode(VERSION);
        put64(&mut rv, 8, 0);
        assert_eq!(Ctrl::decode(&rv), Err(EPROTO));
        let mut ack = Ctrl::RevokeAck { req_id: 1 }.encode(VERSION);
        put64(&mut ack, 8, 0);
        assert_eq!(Ctrl::decode(&ack), Err(EPROTO));
        let mut ack_tail = Ctrl::RevokeAck { req_id: 1 }.encode(VERSION);
        ack_tail[16] = 1;
        assert_eq!(Ctrl::decode(&ack_tail), Err(EPROTO));
        // A version 1 message is refused, and so is one newer than ours.
        let mut v1 = m;
        put16(&mut v1, 4, 1);
        assert_eq!(Ctrl::decode(&v1), Err(EPROTO));
        let mut v9 = m;
        put16(&mut v9, 4, VERSION + 1);
        assert_eq!(Ctrl::decode(&v9), Err(EPROTO));
        // Pings and pongs need version 3 and a sequence number.
        for m in [Ctrl::Ping { seq: 4 }, Ctrl::Pong { seq: 4 }] {
            assert_eq!(Ctrl::decode(&m.encode(2)), Err(EPROTO));
            let mut zero = m.encode(VERSION);
            put64(&mut zero, 8, 0);
            assert_eq!(Ctrl::decode(&zero), Err(EPROTO));
            let mut tail = m.encode(VERSION);
            tail[16] = 1;
            assert_eq!(Ctrl::decode(&tail), Err(EPROTO));
            let mut flag = m.encode(VERSION);
            flag[7] = 1;
            assert_eq!(Ctrl::decode(&flag), Err(EPROTO));
        }
    }

    #[test]
    fn credits_follow_the_version_spoken() {
        assert_eq!(ctrl_recv_min(2), 24);
        assert_eq!(ctrl_recv_min(3), 26);
        assert_eq!(ctrl_recv_min(4), 26);
        assert_eq!(CTRL_RECV_MIN, ctrl_recv_min(VERSION));
        // A version 2 peer needs 24 buffers; a version 3 or 4 one 26; a
        // newer one speaks version 4 with us.
        let mut b = hello().encode();
        put16(&mut b, 8, 24);
        assert_eq!(Hello::decode(&b), Err(EPROTO));
        put16(&mut b, 4, 2);
        assert_eq!(Hello::decode(&b).map(|h| h.version), Ok(2));
        put16(&mut b, 4, 9);
        assert_eq!(Hello::decode(&b), Err(EPROTO));
        put16(&mut b, 8, 26);
        assert_eq!(Hello::decode(&b).map(|h| h.version), Ok(9));
        assert_eq!(negotiate(2), Ok(2));
        assert_eq!(negotiate(9), Ok(VERSION));
        assert_eq!(chosen(2), Ok(2));
        assert_eq!(chosen(VERSION), Ok(VERSION));
        assert_eq!(chosen(VERSION + 1), Err(EPROTO));
        assert_eq!(chosen(1), Err(EPROTO));
    }
}
