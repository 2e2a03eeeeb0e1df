// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A connection of the C side, owned: connected with any hello, and the
//! waits for its completions, its received messages and its end.

use core::ffi::c_void;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rrdma::abi::errno::Errno;
use rrdma::abi::wire::{self, Ctrl};

use super::ffi::{
    new_result, new_wc, vp_connect, vp_destroy, vp_disconnected, vp_poll, vp_read, vp_slot_copy,
    wait_ms, VpWc, EV_REJECTED, SLOT, WC_SUCCESS,
};
use super::{BASELINE, OPEN};
use crate::hostile::after::Peer;
use crate::hostile::{PORT, WAIT};

/// How a connect went.
pub(super) enum Connected {
    Yes(Verbs),
    /// Rejected, with rrdma's errno (`None`: not an rrdma reject).
    Refused(Option<Errno>),
}

/// A connection of the C side, destroyed (disconnected first) on drop.
pub(super) struct Verbs {
    /// INVARIANT: a connection `vp_connect` returned, destroyed only by
    /// `drop`.
    pub(super) v: *mut c_void,
    /// The exporter's address.
    peer: String,
}

impl Drop for Verbs {
    fn drop(&mut self) {
        // SAFETY: `v` is live (type invariant) and not used after this.
        unsafe { vp_destroy(self.v) }
        OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Verbs {
    /// Owns connection `v` to (or from) `peer`, counted in [`OPEN`].
    ///
    /// # Safety
    ///
    /// `v` is a live connection `vp_connect` or `vp_accept` returned, and
    /// nothing else destroys it.
    pub(super) unsafe fn own(v: *mut c_void, peer: &str) -> Self {
        OPEN.fetch_add(1, Ordering::Relaxed);
        // INVARIANT: live, and owned from here (the caller's guarantee).
        Verbs {
            v,
            peer: peer.to_string(),
        }
    }

    /// Connects to the exporter at `peer` with hello `h`: the connection,
    /// or the errno of the exporter's reject (`None`: not rrdma's).
    pub(super) fn connect_with(peer: &str, h: &[u8]) -> Result<Connected, String> {
        let ip: Ipv4Addr = peer.parse().map_err(|e| format!("{peer}: {e}"))?;
        let mut r = new_result();
        // SAFETY: `h` and `r` are valid for the call; C copies what it
        // keeps.
        let v = unsafe {
            vp_connect(
                u32::from_ne_bytes(ip.octets()),
                PORT.to_be(),
                h.as_ptr(),
                h.len() as u8,
                wait_ms(),
                &mut r,
            )
        };
        if !v.is_null() {
            // SAFETY: `vp_connect` returned it, to no other owner.
            return Ok(Connected::Yes(unsafe { Verbs::own(v, peer) }));
        }
        let pd = &r.private_data[..usize::from(r.private_data_len)];
        if r.event == EV_REJECTED {
            return Ok(Connected::Refused(wire::decode_reject(pd)));
        }
        Err(format!(
            "connect: {} (last event {}, status {})",
            std::io::Error::from_raw_os_error(-r.err),
            r.event,
            r.status
        ))
    }

    /// Whether a DISCONNECTED event comes within `d`.
    pub(super) fn disconnected_within(&self, d: Duration) -> Result<bool, String> {
        // SAFETY: `v` is live.
        match unsafe { vp_disconnected(self.v, d.as_millis() as i32) } {
            1 => Ok(true),
            0 => Ok(false),
            e => Err(format!(
                "waiting for the end: {}",
                std::io::Error::from_raw_os_error(-e)
            )),
        }
    }

    /// Waits for the next work completion, which must be a success.
    pub(super) fn completion(&mut self) -> Result<VpWc, String> {
        let mut wc = new_wc();
        // SAFETY: `v` is live and `wc` valid for the call.
        match unsafe { vp_poll(self.v, wait_ms(), &mut wc) } {
            1 => {}
            0 => return Err(format!("no work completion within {WAIT:?}")),
            e => {
                return Err(format!(
                    "polling: {}",
                    std::io::Error::from_raw_os_error(-e)
                ))
            }
        }
        if wc.status != WC_SUCCESS {
            return Err(format!(
                "a work completion with status {} (opcode {})",
                wc.status, wc.opcode
            ));
        }
        Ok(wc)
    }

    /// A received control message: `None` if it was a ping (answered).
    pub(super) fn received(&mut self, wc: &VpWc) -> Result<Option<Ctrl>, String> {
        let len = (wc.byte_len as usize).min(SLOT);
        match Ctrl::decode(&wc.data[..len])
            .map_err(|e| format!("a Send that is no control message: {e:?}"))?
        {
            Ctrl::Ping { seq } => self.ctrl(Ctrl::Pong { seq }).map(|()| None),
            m => Ok(Some(m)),
        }
    }

    /// Posts an RDMA Read into a slot of C's: the slot.
    pub(super) fn post_read(&mut self, stag: u32, to: u64, len: u32) -> Result<u32, String> {
        // SAFETY: `v` is live; the sink is C's own slot.
        let rc = unsafe { vp_read(self.v, len, to, stag) };
        if rc < 0 {
            Self::posted("an RDMA Read", rc)?;
        }
        Ok(rc as u32)
    }

    /// Reads `len` bytes (at most a slot) of `stag` at `to`: the bytes.
    pub(super) fn read_back(&mut self, stag: u32, to: u64, len: u32) -> Result<Vec<u8>, String> {
        let slot = self.post_read(stag, to, len)?;
        loop {
            let wc = self.completion()?;
            if wc.recv != 0 {
                if let Some(m) = self.received(&wc)? {
                    return Err(format!("unasked for: {m:?}"));
                }
            } else if wc.wr_id == u64::from(slot) {
                let mut out = vec![0u8; (len as usize).min(SLOT)];
                // SAFETY: `v` is live; `out` holds the bytes copied.
                unsafe { vp_slot_copy(self.v, slot, out.as_mut_ptr(), out.len() as u32) };
                return Ok(out);
            }
        }
    }

    /// Whether the connection ended, waiting up to `ms` for the CM: a
    /// DISCONNECTED event, or the exporter no longer holds it. The second
    /// is for an end before the exporter's CM processed this side's RTU
    /// (the first Send raced it): its CM then rejects, and this side's CM,
    /// established already, drops the reject, so no event comes.
    pub(super) fn gone(&self, ms: i32) -> Result<bool, String> {
        // SAFETY: `v` is live.
        match unsafe { vp_disconnected(self.v, ms) } {
            1 => return Ok(true),
            0 => {}
            e => {
                return Err(format!(
                    "waiting for the end: {}",
                    std::io::Error::from_raw_os_error(-e)
                ))
            }
        }
        let others = OPEN.load(Ordering::Relaxed) - 1;
        if crate::hostile::live_conns(&self.peer)? <= BASELINE.load(Ordering::Relaxed) + others {
            println!(
                "# ended by the exporter before its CM established it (no DISCONNECTED event)"
            );
            return Ok(true);
        }
        Ok(false)
    }

    pub(super) fn posted(what: &str, rc: i32) -> Result<(), String> {
        match rc {
            0 => Ok(()),
            e => Err(format!(
                "posting {what}: {}",
                std::io::Error::from_raw_os_error(-e)
            )),
        }
    }
}

// SAFETY: a connection of the C side is used by one thread at a time
// (`&mut` or by value); nothing in it is tied to the thread that created
// it.
unsafe impl Send for Verbs {}
