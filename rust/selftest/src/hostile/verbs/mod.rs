// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The hostile peer after the handshake on RoCE (rxe): a real RC queue
//! pair of its own, connected through librdmacm with a valid hello, from
//! which it sends what the checks in [`super::after`] want: control
//! messages as Sends, RDMA Writes and Read requests with any key. rxe
//! itself refuses a bad key (a NAK that takes both queue pairs to the
//! error state); what it delivers, rrdma must refuse.
//!
//! The verbs calls are static inline functions of rdma-core's headers, so
//! they are made in C (`csrc/verbs_peer_*.c`, linked statically with the
//! rxe provider by `build.rs`); these files are its thin, safe owner:
//! `ffi.rs` its interface, `conn.rs` a connection, `peer.rs` the attacks'
//! side of one, `exporter.rs` a hostile listener. Here the checks that
//! only a real queue pair can make.

mod conn;
mod exporter;
mod ffi;
mod peer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrdma::abi::errno::ENOENT;
use rrdma::Rrdma;

use super::after::{self, Peer};
use super::WAIT;
use crate::{ensure, Tap};
use conn::{Connected, Verbs};
use exporter::hostile_exporter_check;

/// How soon the exporter must end a connection it should end: before its
/// keepalive (15 s in the guests) could, so that the end comes from what
/// this side sent. A Write with a bad key sent before the exporter saw its
/// ESTABLISHED event once took the keepalive's 15 s; the ends now take
/// 14-257 ms (7.3 and debug 6.12). The ping burst has its own end
/// ([`Peer::burst_ended`]).
const CLOSED_WITHIN: Duration = Duration::from_secs(10);
/// The exporter's live connections before the attacks, and this side's
/// connections open now: with none of its own left, the exporter holds
/// no more than their sum.
static BASELINE: AtomicU64 = AtomicU64::new(0);
static OPEN: AtomicU64 = AtomicU64::new(0);

/// What a real queue pair shows and hand framing cannot: a granted key
/// within its registration reads the region's bytes, so the refusals in
/// the other checks come from the keys, not from a peer that cannot read.
fn granted_read_check(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let res = (|| {
        let mut st = Verbs::open(peer, 0x3100)?;
        let g = st.import_real(peer)?;
        let got = st.read_back(g.rkeys[0], 0, 64)?;
        let want = after::bytes_before(dev, peer, 64)?;
        ensure(
            got[56..] == want[..],
            format!("read {:02x?}, the region holds {want:02x?}", &got[56..]),
        )?;
        st.alive(2)?;
        st.close()
    })();
    t.check(
        "hostile RoCE: a granted key read within its registration: the region's bytes, the connection lives",
        res,
    );
}

/// A hostile peer's data lanes (`conn/lanes.rs` on the exporter): a lane
/// joins only a connection of its own address named by its nonce, only
/// within the grant and only once; it shares its connection's domain, so
/// a key granted on the connection reads through the lane, and a key of
/// another connection fails the lane, which ends its connection.
fn lane_checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    const NONCE: u64 = 0x1a9e_0001;
    let res = (|| {
        let mut main = match Verbs::connect_with(peer, &super::hello_qps(NONCE, 2, None, None))? {
            Connected::Yes(v) => v,
            Connected::Refused(e) => return Err(format!("connection: rejected, errno {e:?}")),
        };
        let g = main.import_real(peer)?;
        let lane = super::hello_qps(NONCE, 2, None, Some(1));
        let mut lane = match Verbs::connect_with(peer, &lane)? {
            Connected::Yes(v) => v,
            Connected::Refused(e) => return Err(format!("lane 1: rejected, errno {e:?}")),
        };
        let got = lane.read_back(g.rkeys[0], 0, 64)?;
        let want = after::bytes_before(dev, peer, 64)?;
        ensure(
            got[56..] == want[..],
            format!(
                "read through the lane {:02x?}, the region holds {want:02x?}",
                &got[56..]
            ),
        )?;
        for (what, nonce, l) in [
            ("lane 1 again", NONCE, 1),
            ("lane 2, beyond the grant of 2 queue pairs", NONCE, 2),
            ("lane 1 of a nonce no connection has", NONCE + 1, 1),
        ] {
            match Verbs::connect_with(peer, &super::hello_qps(nonce, 2, None, Some(l)))? {
                Connected::Refused(Some(e)) if e == ENOENT => {}
                Connected::Refused(e) => return Err(format!("{what}: rejected with {e:?}")),
                Connected::Yes(_) => return Err(format!("{what}: accepted")),
            }
        }
        let mut other = Verbs::open(peer, 0x1a9e_0002)?;
        let g2 = other.import_real(peer)?;
        let t0 = Instant::now();
        lane.rdma_read(g2.rkeys[0], 0, 64)?;
        if !main.disconnected_within(CLOSED_WITHIN)? {
            return Err(format!(
                "a key of another connection read through the lane: its connection lives after {CLOSED_WITHIN:?}"
            ));
        }
        println!(
            "# a key of another connection on a lane: its connection ended after {} ms",
            t0.elapsed().as_millis()
        );
        other.alive(2)?;
        other.close()
    })();
    t.check(
        "hostile RoCE lanes: one joins its connection and reads with its keys; a duplicate, one beyond the grant and one of an unknown nonce are ENOENT; another connection's key ends the connection",
        res,
    );
}

/// The attacks after the handshake; `before`: the exporter's live
/// connections before any attack, which it must be back to first.
pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, before: u64) {
    let t0 = Instant::now();
    let settled = loop {
        match super::live_conns(peer) {
            Ok(n) if n <= before => break Ok(()),
            Ok(n) if t0.elapsed() > WAIT => break Err(format!("{n} live, {before} before")),
            Err(e) => break Err(e),
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    if let Err(e) = settled {
        return t.check(
            "hostile RoCE: the exporter's connections settle first",
            Err(e),
        );
    }
    BASELINE.store(before, Ordering::Relaxed);
    granted_read_check(dev, t, peer);
    lane_checks(dev, t, peer);
    for _ in 0..3 {
        hostile_exporter_check(dev, t);
    }
    after::checks::<Verbs>(dev, t, peer);
}
