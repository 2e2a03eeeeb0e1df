// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the fault suite measures: snapshots of the shared record, the
//! monitor that samples it through a fault, a row of the table, errnos.

use std::sync::atomic::Ordering::SeqCst;
use std::thread::sleep;
use std::time::Duration;

use super::state::{now_ns, State};
use super::{CONNS, THREADS};

/// The errnos a fault may end an operation with: the connection's.
pub(super) const CONNECTION_ERRNOS: [i32; 11] = [
    libc::EAGAIN,
    libc::ECONNRESET,
    libc::ETIMEDOUT,
    libc::EKEYREVOKED,
    libc::ENOTCONN,
    libc::ECONNREFUSED,
    libc::ECONNABORTED,
    libc::ENETUNREACH,
    libc::EHOSTUNREACH,
    libc::ENODEV,
    libc::ESHUTDOWN,
];

pub(super) fn errno_name(e: usize) -> String {
    let name = match e as i32 {
        libc::EAGAIN => "EAGAIN",
        libc::ECONNRESET => "ECONNRESET",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EKEYREVOKED => "EKEYREVOKED",
        libc::ENOTCONN => "ENOTCONN",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENODEV => "ENODEV",
        libc::ESHUTDOWN => "ESHUTDOWN",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EINVAL => "EINVAL",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

/// A snapshot of the record.
#[derive(Clone)]
pub(super) struct Snap {
    pub(super) at: u64,
    pub(super) ok: u64,
    pub(super) errors: u64,
    pub(super) errnos: Vec<u64>,
    pub(super) mismatches: u64,
}

pub(super) fn snap(st: &State) -> Snap {
    let th = &st.threads[..CONNS * THREADS];
    Snap {
        at: now_ns(),
        ok: th.iter().map(|t| t.ok.load(SeqCst)).sum(),
        errors: th.iter().map(|t| t.errors.load(SeqCst)).sum(),
        errnos: st.errnos.iter().map(|e| e.load(SeqCst)).collect(),
        mismatches: th.iter().map(|t| t.mismatches.load(SeqCst)).sum(),
    }
}

pub(super) fn rate(ops: u64, from: u64, to: u64) -> u64 {
    ops * 1_000_000_000 / to.saturating_sub(from).max(1)
}

/// Samples the record while a fault lasts and after: the first error
/// after `t0`, and the longest any thread went without completing an
/// operation.
pub(super) struct Monitor {
    pub(super) t0: u64,
    pub(super) errors0: u64,
    pub(super) first_error: Option<u64>,
    pub(super) max_stall: u64,
}

impl Monitor {
    fn sample(&mut self, st: &State) {
        let now = now_ns();
        for th in &st.threads[..CONNS * THREADS] {
            let last = th.last_ok_ns.load(SeqCst);
            self.max_stall = self.max_stall.max(now.saturating_sub(last));
        }
        let errors: u64 = st.threads[..CONNS * THREADS]
            .iter()
            .map(|t| t.errors.load(SeqCst))
            .sum();
        if self.first_error.is_none() && errors > self.errors0 {
            self.first_error = Some(now - self.t0);
        }
    }

    /// Samples until `until` (CLOCK_MONOTONIC ns) or until `done` holds.
    pub(super) fn watch(&mut self, st: &State, until: u64, mut done: impl FnMut() -> bool) -> bool {
        loop {
            self.sample(st);
            if done() {
                return true;
            }
            if now_ns() >= until {
                return false;
            }
            sleep(Duration::from_millis(20));
        }
    }
}

/// One row of the table.
pub(super) struct Row {
    pub(super) name: &'static str,
    pub(super) before: u64,
    pub(super) during: u64,
    pub(super) after: u64,
    pub(super) noticed: Option<u64>,
    pub(super) back: Option<u64>,
    pub(super) stall: u64,
    pub(super) errors: String,
    pub(super) lost: u64,
    pub(super) verified: u64,
}

pub(super) fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}
