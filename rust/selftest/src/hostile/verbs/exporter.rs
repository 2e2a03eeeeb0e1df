// SPDX-License-Identifier: GPL-2.0 OR MIT

//! This side as a hostile exporter: a listener of the C side's that
//! accepts rrdma's CONNECT and at once sends a Write with a guessed key.

use core::ffi::c_void;
use std::time::{Duration, Instant};

use rrdma::Rrdma;

use super::conn::Verbs;
use super::ffi::{new_result, vp_accept, vp_destroy, vp_listen, wait_ms};
use super::CLOSED_WITHIN;
use crate::hostile::after::Peer;
use crate::Tap;

/// A hostile listener of this side's (the exporter an importer connects
/// to), destroyed on drop.
struct Listening {
    /// INVARIANT: a listener `vp_listen` returned, destroyed only by
    /// `drop`.
    l: *mut c_void,
}

// SAFETY: the C side's listener is used by one thread at a time (`&mut`
// or by value); nothing in it is tied to the thread that created it.
unsafe impl Send for Listening {}

impl Drop for Listening {
    fn drop(&mut self) {
        // SAFETY: `l` is live (type invariant) and not used after this.
        unsafe { vp_destroy(self.l) }
    }
}

impl Listening {
    fn new(port: u16) -> Result<Self, String> {
        let mut r = new_result();
        // SAFETY: `r` is valid for the call.
        let l = unsafe { vp_listen(port.to_be(), &mut r) };
        if l.is_null() {
            return Err(format!(
                "listen: {}",
                std::io::Error::from_raw_os_error(-r.err)
            ));
        }
        // INVARIANT: a live listener, owned from here.
        Ok(Listening { l })
    }

    /// Accepts the next connect request with a valid hello of `nonce`,
    /// without waiting for the requester's RTU.
    fn accept(&mut self, nonce: u64, peer: &str) -> Result<Verbs, String> {
        let h = crate::hostile::hello_of(nonce, None, None);
        let mut r = new_result();
        // SAFETY: `l` is live; `h` and `r` are valid for the call.
        let v = unsafe { vp_accept(self.l, h.as_ptr(), h.len() as u8, wait_ms(), &mut r) };
        if v.is_null() {
            return Err(format!(
                "accept: {} (event {})",
                std::io::Error::from_raw_os_error(-r.err),
                r.event
            ));
        }
        // SAFETY: `vp_accept` returned it, to no other owner.
        Ok(unsafe { Verbs::own(v, peer) })
    }
}

/// The importer's side of the early flush: a hostile exporter (this
/// side's listener, on this guest) accepts rrdma's CONNECT and at once
/// sends an RDMA Write with a guessed key, which kills the importer's
/// queue pair, maybe before the importer's ESTABLISHED event. CONNECT
/// must then fail with `ECONNRESET`, or the connection it returned must
/// end within [`CLOSED_WITHIN`], not at its keepalive. On 7.3 the Write
/// first reaches a queue pair not yet ready and is dropped; its
/// retransmission ends the established connection 0.55 s later.
pub(super) fn hostile_exporter_check(dev: &Rrdma, t: &mut Tap) {
    const HOSTILE_PORT: u16 = 7480;
    let res = (|| {
        let me = std::env::var("RRDMA_SELF").map_err(|_| "RRDMA_SELF unset".to_string())?;
        let mut l = Listening::new(HOSTILE_PORT)?;
        let live = || {
            dev.fdinfo_value("rrdma-connections-live")
                .unwrap_or(u64::MAX)
        };
        let before = live();
        let (conn, accepted) = std::thread::scope(|s| {
            let h = s.spawn(|| -> Result<Verbs, String> {
                let mut v = l.accept(0x4000, &me)?;
                v.rdma_write(0x1000, 0, &[0x5a; 64])?;
                Ok(v)
            });
            let conn = dev.connect(crate::remote::addr(&me, HOSTILE_PORT), crate::remote::T);
            let accepted = h.join().unwrap_or(Err("panicked".into()));
            (conn, accepted)
        });
        let _hostile = accepted?;
        let t0 = Instant::now();
        match conn {
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                println!("# CONNECT failed with ECONNRESET");
                Ok(())
            }
            Err(e) => Err(format!("CONNECT: {e}, expected ECONNRESET or success")),
            Ok(conn) => loop {
                if live() <= before {
                    println!(
                        "# CONNECT succeeded; the connection ended after {} ms",
                        t0.elapsed().as_millis()
                    );
                    drop(conn);
                    break Ok(());
                }
                if t0.elapsed() > CLOSED_WITHIN {
                    break Err(format!(
                        "the connection still lives after {CLOSED_WITHIN:?}"
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            },
        }
    })();
    t.check(
        "hostile RoCE exporter: a Write with a guessed key right after its accept: CONNECT fails or its connection ends",
        res,
    );
}
