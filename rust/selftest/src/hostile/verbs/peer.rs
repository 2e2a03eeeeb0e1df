// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A connection of the C side as the attacks after the handshake drive it
//! (`Peer`): Sends, RDMA Writes and Reads, messages, and its end.

use std::time::Instant;

use rrdma::abi::wire::Ctrl;

use super::conn::{Connected, Verbs};
use super::ffi::{new_wc, vp_poll, vp_send, vp_write, SLOT, WC_SUCCESS};
use super::CLOSED_WITHIN;
use crate::hostile::after::Peer;
use crate::hostile::WAIT;

impl Peer for Verbs {
    const NAME: &'static str = "RoCE";

    fn open(peer: &str, nonce: u64) -> Result<Self, String> {
        match Verbs::connect_with(peer, &crate::hostile::hello_of(nonce, None, None))? {
            Connected::Yes(v) => Ok(v),
            Connected::Refused(e) => Err(format!("rejected: errno {:?}", e.map(|e| e.get()))),
        }
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), String> {
        if payload.len() > SLOT {
            return Err(format!("a Send of {} bytes", payload.len()));
        }
        // SAFETY: `v` is live; C copies `payload` before it returns.
        let rc = unsafe { vp_send(self.v, payload.as_ptr(), payload.len() as u32) };
        Self::posted("a Send", rc)
    }

    fn burst(&mut self, msgs: &[Vec<u8>]) -> Result<(), String> {
        // Posted back to back: rxe sends them without waiting for the
        // exporter's receives (and retries what it refuses for lack of
        // one, RNR).
        msgs.iter().try_for_each(|m| self.send(m))
    }

    fn rdma_write(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), String> {
        if data.len() > SLOT {
            return Err(format!("a Write of {} bytes", data.len()));
        }
        // SAFETY: `v` is live; C copies `data` before it returns.
        let rc = unsafe { vp_write(self.v, data.as_ptr(), data.len() as u32, to, stag) };
        Self::posted("an RDMA Write", rc)
    }

    fn rdma_read(&mut self, stag: u32, to: u64, len: u32) -> Result<(), String> {
        self.post_read(stag, to, len).map(|_| ())
    }

    fn next(&mut self) -> Result<Ctrl, String> {
        loop {
            let wc = self.completion()?;
            if wc.recv == 0 {
                // One of this side's sends.
                continue;
            }
            if let Some(m) = self.received(&wc)? {
                return Ok(m);
            }
        }
    }

    fn close(self) -> Result<(), String> {
        // Dropped: disconnected and destroyed.
        Ok(())
    }

    /// Ended: a DISCONNECTED event, or the exporter no longer holds the
    /// connection (see [`Verbs::gone`]).
    fn closed(self) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if self.gone(100)? {
                return Ok(());
            }
            if t0.elapsed() > CLOSED_WITHIN {
                return Err(format!("still connected after {CLOSED_WITHIN:?}"));
            }
        }
    }

    const BURST_ENDS: &'static str = "each answered, or the connection closed";

    /// rxe holds back a Send that finds no receive (receiver not ready)
    /// and retries it, so the pings trickle in as the exporter posts its
    /// receives again: it answers each while its send buffers and
    /// backlog have room, and ends the connection ("ping beyond the
    /// limit") when they have not. Either is right; the connection must
    /// not hang between the two: it fails once `WAIT` passed with no pong
    /// (the debug kernel on rxe answered 222 in its first 20 s once).
    fn burst_ended(mut self, n: u64) -> Result<(), String> {
        let mut t0 = Instant::now();
        let mut pongs = 0;
        loop {
            if self.gone(0)? {
                println!("# the burst: closed after {pongs} of {n} pongs");
                return Ok(());
            }
            let mut wc = new_wc();
            // SAFETY: `v` is live and `wc` valid for the call.
            match unsafe { vp_poll(self.v, 100, &mut wc) } {
                1 if wc.status != WC_SUCCESS => {
                    // This side's queue pair failed with the exporter's.
                    return self.closed();
                }
                1 if wc.recv != 0 => match self.received(&wc)? {
                    Some(Ctrl::Pong { seq }) if (1..=n).contains(&seq) => {
                        pongs += 1;
                        t0 = Instant::now();
                    }
                    None => {}
                    Some(m) => return Err(format!("unasked for: {m:?}")),
                },
                1 | 0 => {}
                e => {
                    return Err(format!(
                        "polling: {}",
                        std::io::Error::from_raw_os_error(-e)
                    ))
                }
            }
            if pongs == n {
                self.alive(n + 1)?;
                println!("# the burst: all {n} pings answered, the connection lives");
                return Ok(());
            }
            if t0.elapsed() > WAIT {
                return Err(format!(
                    "{pongs} of {n} pongs, and still connected, none for {WAIT:?}"
                ));
            }
        }
    }
}
