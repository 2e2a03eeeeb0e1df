// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The hostile peer after the handshake on iWARP (siw): once the exporter
//! has accepted an MPA connection, this side speaks iWARP itself (RDMAP
//! over DDP over MPA: RFC 5040, 5041, 5044, without markers or CRC): the
//! [`Peer`] of the checks in [`super::after`], whose Sends, Writes and
//! Read requests are framed here by hand, and one check only this framing
//! can make (a Send whose sequence number skips one). What the transport
//! refuses ends in siw's terminate.

use std::io::{Read, Write};
use std::net::TcpStream;

use rrdma::abi::wire::{self, Ctrl};
use rrdma::Rrdma;

use super::after::{self, Peer};
use super::mpa::{accepted, closed_by_peer, reset};
use crate::Tap;

/// DDP control bits (RFC 5041): a tagged buffer; the message's last
/// segment; DDP version 1 and RDMAP version 1.
const DDP_TAGGED: u16 = 0x8000;
const DDP_LAST: u16 = 0x4000;
const VERSIONS: u16 = 0x0100 | 0x0040;
/// RDMAP opcodes (RFC 5040).
const OP_WRITE: u16 = 0;
const OP_READ_REQ: u16 = 1;
const OP_SEND: u16 = 3;
const OP_SEND_SE: u16 = 5;
const OP_TERMINATE: u16 = 7;
/// Untagged queues: Sends, Read requests.
const QN_SEND: u32 = 0;
const QN_READ: u32 = 1;
/// The MPA reply's CRC flag: this side asks for no CRC, and siw does not
/// insist unless loaded with `mpa_crc_required`.
const MPA_FLAG_CRC: u8 = 0x40;

/// An FPDU: the ULPDU's length, the ULPDU, padding to 4 bytes and the CRC
/// field (zero: CRC not negotiated).
fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let mut f = (ulpdu.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(ulpdu);
    let pad = (4 - f.len() % 4) % 4;
    f.resize(f.len() + pad + 4, 0);
    f
}

/// An accepted connection this side drives by hand.
struct Stream {
    s: TcpStream,
    /// Message sequence numbers of this side's untagged queues.
    send_msn: u32,
    read_msn: u32,
}

impl Stream {
    fn write(&mut self, frame: &[u8]) -> Result<(), String> {
        self.s.write_all(frame).map_err(|e| format!("send: {e}"))
    }

    /// An RDMAP Send of `payload` with the next MSN, `skip` more.
    fn send_frame(&mut self, payload: &[u8], skip: u32) -> Vec<u8> {
        self.send_msn += 1 + skip;
        let mut u = (DDP_LAST | VERSIONS | OP_SEND).to_be_bytes().to_vec();
        for w in [0, QN_SEND, self.send_msn, 0] {
            u.extend_from_slice(&u32::to_be_bytes(w));
        }
        u.extend_from_slice(payload);
        fpdu(&u)
    }
}

impl Peer for Stream {
    const NAME: &'static str = "iWARP";

    fn open(peer: &str, nonce: u64) -> Result<Self, String> {
        let (s, flags) = accepted(peer, nonce, None)?;
        if flags & MPA_FLAG_CRC != 0 {
            return Err("the exporter asks for MPA CRC (siw mpa_crc_required)".into());
        }
        // Nothing waits for the exporter to finish its accept: what is
        // sent the moment the MPA reply arrives must be received too (the
        // test kernels' siw patch scripts/kpatch/*/0002).
        Ok(Stream {
            s,
            send_msn: 0,
            read_msn: 0,
        })
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), String> {
        let f = self.send_frame(payload, 0);
        self.write(&f)
    }

    fn burst(&mut self, msgs: &[Vec<u8>]) -> Result<(), String> {
        let burst: Vec<u8> = msgs.iter().flat_map(|m| self.send_frame(m, 0)).collect();
        match self.s.write_all(&burst) {
            // Closed while the burst was still going out.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("send: {e}")),
            Ok(()) => Ok(()),
        }
    }

    /// An RDMA Write of `data` to `stag` at `to`.
    fn rdma_write(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), String> {
        let mut u = (DDP_TAGGED | DDP_LAST | VERSIONS | OP_WRITE)
            .to_be_bytes()
            .to_vec();
        u.extend_from_slice(&stag.to_be_bytes());
        u.extend_from_slice(&to.to_be_bytes());
        u.extend_from_slice(data);
        self.write(&fpdu(&u))
    }

    /// An RDMA Read request of `len` bytes of `stag` at `to`, into a sink
    /// this side never registered.
    fn rdma_read(&mut self, stag: u32, to: u64, len: u32) -> Result<(), String> {
        self.read_msn += 1;
        let mut u = (DDP_LAST | VERSIONS | OP_READ_REQ).to_be_bytes().to_vec();
        for w in [0, QN_READ, self.read_msn, 0, 0x1000] {
            u.extend_from_slice(&u32::to_be_bytes(w));
        }
        u.extend_from_slice(&0u64.to_be_bytes());
        u.extend_from_slice(&len.to_be_bytes());
        u.extend_from_slice(&stag.to_be_bytes());
        u.extend_from_slice(&to.to_be_bytes());
        self.write(&fpdu(&u))
    }

    /// The next control message of the exporter, answering its pings on
    /// the way.
    fn next(&mut self) -> Result<Ctrl, String> {
        loop {
            let mut len = [0u8; 2];
            self.s
                .read_exact(&mut len)
                .map_err(|e| format!("reading an FPDU: {e}"))?;
            let len = usize::from(u16::from_be_bytes(len));
            let pad = (4 - (2 + len) % 4) % 4;
            let mut u = vec![0u8; len + pad + 4];
            self.s
                .read_exact(&mut u)
                .map_err(|e| format!("reading an FPDU of {len} bytes: {e}"))?;
            u.truncate(len);
            if u.len() < 2 {
                return Err(format!("an FPDU of {len} bytes"));
            }
            let op = u16::from_be_bytes([u[0], u[1]]) & 0xf;
            match op {
                OP_SEND | OP_SEND_SE if u.len() >= 18 => {
                    let m = Ctrl::decode(&u[18..])
                        .map_err(|e| format!("a Send that is no control message: {e:?}"))?;
                    match m {
                        Ctrl::Ping { seq } => self.ctrl(Ctrl::Pong { seq })?,
                        m => return Ok(m),
                    }
                }
                OP_TERMINATE => return Err("the exporter terminated the stream".into()),
                op => return Err(format!("RDMAP opcode {op} ({len} bytes)")),
            }
        }
    }

    /// Ends the connection from this side (a reset), after a check that
    /// left it open.
    fn close(self) -> Result<(), String> {
        reset(self.s)
    }

    /// The exporter must close the connection.
    fn closed(mut self) -> Result<(), String> {
        closed_by_peer(&mut self.s)
    }
}

/// The check only hand-made framing can make: a Send whose message
/// sequence number skips one.
fn msn_check(t: &mut Tap, peer: &str) {
    let res = (|| {
        let mut st = Stream::open(peer, 0x2100)?;
        st.alive(1)?;
        // The next MSN is 2: a frame numbered 3 is a replay or a gap.
        let ping = Ctrl::Ping { seq: 4 }.encode(wire::VERSION);
        let f = st.send_frame(&ping, 1);
        st.write(&f)?;
        st.closed()
    })();
    t.check(
        "hostile iWARP: a Send whose sequence number skips one: connection closed",
        res,
    );
}

/// The attacks after the handshake.
pub(super) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str) {
    msn_check(t, peer);
    after::checks::<Stream>(dev, t, peer);
}
