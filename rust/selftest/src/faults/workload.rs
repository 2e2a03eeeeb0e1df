// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The workload process: started for a fault, and its blocks read back
//! and judged against the journal once it stopped.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;

use rrdma::Rrdma;

use super::block::{judge, Verdict, BLOCK};
use super::state::State;
use super::{Timing, BLOCKS, CONNS, STATE, THREADS};
use crate::remote::{addr, token, T};

pub(super) fn spawn(peer: &str, tm: &Timing) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .args([
            "faults-load",
            STATE,
            peer,
            &CONNS.to_string(),
            &THREADS.to_string(),
            &BLOCKS.to_string(),
            &tm.interval.as_millis().to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn the workload: {e}"))
}

/// Reads every block of the workload back on a connection of this
/// process and judges each: (blocks checked, descriptions of bad ones).
pub(super) fn verify(dev: &Rrdma, st: &State, peer: &str) -> Result<(u64, Vec<String>), String> {
    let n = (CONNS * THREADS) as u64 * BLOCKS;
    let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
    let conn = dev
        .connect(addr(peer, 7471), T)
        .map_err(|e| format!("connect: {e}"))?;
    let rw = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    let local = dev
        .create_region(BLOCK as u32, n)
        .map_err(|e| e.to_string())?;
    rw.read(&local, 0, 0, n as u32)
        .map_err(|e| format!("read: {e}"))?;
    let mut checked = 0;
    let mut bad = Vec::new();
    for k in 0..n {
        let b = &st.blocks[k as usize];
        let (acked, pending) = (b.acked.load(SeqCst), b.pending.load(SeqCst));
        let at = k as usize * BLOCK;
        match judge(&local.as_slice()[at..at + BLOCK], k, acked, pending) {
            Verdict::Unwritten => {}
            Verdict::Holds => checked += 1,
            v => {
                checked += 1;
                bad.push(format!(
                    "block {k}: {v:?} (acked {acked}, pending {pending})"
                ));
            }
        }
    }
    drop(rw);
    conn.disconnect().map_err(|e| format!("disconnect: {e}"))?;
    Ok((checked, bad))
}
