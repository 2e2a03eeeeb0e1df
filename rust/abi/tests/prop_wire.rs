// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the wire protocol: whatever a peer sends, control
//! messages and hellos decode without a panic, decode as they were encoded
//! and encode back to the bytes they were decoded from; and the queue pairs
//! granted stay within the offer and the cap.

mod branches;

use std::ops::Range;

use branches::{Branches, COUNTED_CASES};
use proptest::prelude::*;
use rrdma_abi::errno::{Errno, EPROTO, EPROTONOSUPPORT, MAX_ERRNO};
use rrdma_abi::wire::{
    ctrl_recv_min, Ctrl, Grant, Hello, CHUNK_SHIFT_MAX, CHUNK_SHIFT_MIN, CTRL_LEN, GRANT_KEYS_MAX,
    HELLO_LEN, HELLO_V3_LEN, KEEPALIVE_VERSION, LANES_VERSION, MIN_VERSION, QPS_MAX,
    REPLACES_VERSION, VERSION,
};

/// A grant as an exporter sends it, with from none to all the rkeys a
/// message holds.
fn grant() -> impl Strategy<Value = Grant> {
    let keys = proptest::collection::vec(any::<u32>(), 0..=GRANT_KEYS_MAX);
    (
        any::<(u32, u64, u32, bool, u32)>(),
        CHUNK_SHIFT_MIN..=CHUNK_SHIFT_MAX,
        keys,
    )
        .prop_map(
            |((block_size, nblocks, generation, writable, first_chunk), chunk_shift, keys)| {
                let mut rkeys = [0; GRANT_KEYS_MAX];
                rkeys[..keys.len()].copy_from_slice(&keys);
                Grant {
                    block_size,
                    nblocks,
                    generation,
                    writable,
                    chunk_shift,
                    first_chunk,
                    nkeys: keys.len() as u16,
                    rkeys,
                }
            },
        )
}

/// Every kind of control message, as a peer sends it.
fn ctrl() -> impl Strategy<Value = Ctrl> {
    prop_oneof![
        any::<(u64, u64, u32)>().prop_map(|(req_id, token, first_chunk)| Ctrl::ImportReq {
            req_id,
            token,
            first_chunk
        }),
        (any::<u64>(), grant()).prop_map(|(req_id, g)| Ctrl::ImportResp {
            req_id,
            result: Ok(g)
        }),
        (any::<u64>(), 1..=MAX_ERRNO).prop_map(|(req_id, e)| Ctrl::ImportResp {
            req_id,
            result: Err(Errno::new(e).unwrap())
        }),
        (1u64.., any::<u64>(), any::<u32>()).prop_map(|(req_id, token, generation)| {
            Ctrl::Revoke {
                req_id,
                token,
                generation,
            }
        }),
        (1u64..).prop_map(|req_id| Ctrl::RevokeAck { req_id }),
        (1u64..).prop_map(|seq| Ctrl::Ping { seq }),
        (1u64..).prop_map(|seq| Ctrl::Pong { seq }),
    ]
}

/// Bytes changed in a message of `len` bytes (none in half the
/// cases), most often in `fields`, where a changed byte can leave it
/// valid, else in its first `header` bytes or anywhere.
fn changes(
    fields: Range<usize>,
    header: usize,
    len: usize,
) -> impl Strategy<Value = Vec<(usize, u8)>> {
    let at = prop_oneof![3 => fields, 1 => 0..header, 1 => 0..len];
    prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec((at, any::<u8>()), 1..3),
    ]
}

/// Sets the bytes of `changes` that fall inside `b`.
fn apply(b: &mut [u8], changes: &[(usize, u8)]) {
    for &(i, v) in changes {
        if let Some(x) = b.get_mut(i) {
            *x = v;
        }
    }
}

/// A message decodes as it was encoded; a changed one is refused
/// (`EPROTO`, never a panic) or encodes back to the same bytes.
#[test]
fn ctrl_decode_never_panics_and_round_trips() {
    let branches = Branches::new(
        "ctrl_decode_never_panics_and_round_trips",
        &["accepted as sent", "accepted after a change", "refused"],
    );
    let len = prop_oneof![6 => Just(CTRL_LEN), 1 => 0usize..CTRL_LEN + 8];
    proptest!(ProptestConfig::with_cases(COUNTED_CASES),
              |(msg in ctrl(), version in MIN_VERSION..=VERSION,
                changes in changes(8..24, 48, CTRL_LEN), len in len)| {
        let sent = msg.encode(version);
        let mut b = sent.to_vec();
        apply(&mut b, &changes);
        b.resize(len, 0);
        let changed = b[..] != sent[..];
        let speaks = version >= KEEPALIVE_VERSION || !matches!(msg, Ctrl::Ping { .. } | Ctrl::Pong { .. });
        match Ctrl::decode(&b) {
            Ok(m) => {
                prop_assert_eq!(b.len(), CTRL_LEN);
                // Encoded again in the version it carries: the same bytes.
                prop_assert_eq!(&m.encode(u16::from_le_bytes([b[4], b[5]]))[..], &b[..]);
                branches.took(if changed { "accepted after a change" } else { "accepted as sent" });
            }
            Err(e) => {
                prop_assert_eq!(e, EPROTO);
                branches.took("refused");
            }
        }
        if !changed && speaks {
            prop_assert_eq!(Ctrl::decode(&b), Ok(msg));
        }
    });
    branches.require(&[
        ("accepted as sent", 30),
        ("accepted after a change", 5),
        ("refused", 10),
    ]);
}

/// A valid hello of `version`: a reconnect's from version 4, a lane's
/// from version 5.
fn hello(version: impl Strategy<Value = u16>) -> impl Strategy<Value = Hello> {
    (
        version,
        any::<u16>(),
        1u16..,
        any::<u64>(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(1u16..QPS_MAX),
    )
        .prop_map(|(v, credits, qps, nonce, rep, lane)| {
            let replaces = if v >= REPLACES_VERSION { rep } else { None };
            // A lane's hello (version 5) replaces nothing.
            let lane = if v >= LANES_VERSION && replaces.is_none() {
                lane
            } else {
                None
            };
            Hello {
                version: v,
                // At least what the version needs (27 from version 6: a
                // range from 26 let 26 through, which decoding refuses).
                ctrl_credits: credits.max(ctrl_recv_min(v)),
                qps,
                nonce,
                replaces,
                lane,
            }
        })
}

/// Handshake bytes as a peer could send them: a hello of a version we
/// speak or a newer one, with perhaps some bytes changed, cut short or
/// padded; or any bytes at all.
fn hello_bytes() -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![
        5 => Just(HELLO_LEN),
        1 => Just(HELLO_V3_LEN),
        1 => 0..HELLO_LEN + 16,
    ];
    prop_oneof![
        7 => (hello(MIN_VERSION..=VERSION + 2), len, changes(8..24, HELLO_LEN, HELLO_LEN + 16))
            .prop_map(|(h, len, changes)| {
                let mut b = h.encode().to_vec();
                b.resize(len, 0);
                apply(&mut b, &changes);
                b
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

#[test]
fn hello_decode_never_panics() {
    let branches = Branches::new(
        "hello_decode_never_panics",
        &[
            "accepted, encodes back",
            "accepted from a newer version",
            "refused",
        ],
    );
    proptest!(ProptestConfig::with_cases(COUNTED_CASES), |(b in hello_bytes())| {
        match Hello::decode(&b) {
            Ok(h) => {
                let v = u16::from_le_bytes([b[4], b[5]]);
                prop_assert_eq!(h.version, v);
                if v <= VERSION {
                    // What this version accepts it encodes back bit for
                    // bit, as long as that version's hello.
                    let n = if v >= REPLACES_VERSION { HELLO_LEN } else { HELLO_V3_LEN };
                    prop_assert_eq!(&h.encode()[..n], &b[..n]);
                    branches.took("accepted, encodes back");
                } else {
                    branches.took("accepted from a newer version");
                }
            }
            Err(e) => {
                prop_assert!(e == EPROTO || e == EPROTONOSUPPORT);
                branches.took("refused");
            }
        }
    });
    branches.require(&[("accepted, encodes back", 30), ("refused", 10)]);
}

proptest! {
    #[test]
    fn hellos_round_trip(h in hello(MIN_VERSION..=VERSION)) {
        prop_assert_eq!(Hello::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn grants_stay_within_offer_and_cap(offered in any::<u16>(), v in 2u16..=rrdma_abi::wire::VERSION,
                                        cap in any::<u16>()) {
        let g = rrdma_abi::wire::grant_qps(offered, v, cap);
        prop_assert!((1..=rrdma_abi::wire::QPS_MAX).contains(&g));
        prop_assert!(g == 1 || (g <= offered && g <= cap));
    }
}
