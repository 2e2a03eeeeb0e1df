// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Control messages: the fixed-size [`Ctrl`] messages a connection's queue
//! pair carries, and the [`Grant`] an import response holds.

use super::super::errno::{Errno, EPROTO};
use super::{
    le16, le32, le64, put16, put32, put64, KEEPALIVE_VERSION, LANES_WANTED_VERSION, MAGIC,
    MIN_VERSION, VERSION,
};

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
const OP_LANES_WANTED: u8 = 7;

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
    /// Passive → active side (version 6), at most once per connection:
    /// the passive side has an operation to post, open the granted lanes
    /// (the active side opens them at its own first operation otherwise).
    LanesWanted,
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
            Ctrl::LanesWanted => b[6] = OP_LANES_WANTED,
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
            OP_LANES_WANTED if version >= LANES_WANTED_VERSION && b[7] == 0 => {
                (Ctrl::LanesWanted, 8)
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
    use crate::errno::{EIO, ENOENT};

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
            Ctrl::LanesWanted,
        ] {
            assert_eq!(Ctrl::decode(&m.encode(VERSION)), Ok(m));
            if !matches!(m, Ctrl::Ping { .. } | Ctrl::Pong { .. } | Ctrl::LanesWanted) {
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
        // The passive side's ask for lanes needs version 6 and carries
        // nothing.
        let lw = Ctrl::LanesWanted;
        assert_eq!(
            Ctrl::decode(&lw.encode(LANES_WANTED_VERSION - 1)),
            Err(EPROTO)
        );
        for at in [7, 8, CTRL_LEN - 1] {
            let mut b = lw.encode(VERSION);
            b[at] = 1;
            assert_eq!(Ctrl::decode(&b), Err(EPROTO), "byte {at}");
        }
    }
}
