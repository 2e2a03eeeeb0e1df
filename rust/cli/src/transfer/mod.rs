// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma read`, `write`, `verify` and `bench`: an importer's commands.
//!
//! Here: where the export is ([`Target`]), connecting and importing, and
//! retrying what a reconnect interrupted. The commands are in `blocks.rs`
//! (`read`, `write`, `verify`) and `bench.rs`, whose queues run in
//! `runner.rs` and post through `queue.rs`; `control.rs` asks an
//! exporter's `serve --control` endpoint, `progress.rs` draws the bar.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{EAGAIN, ECONNRESET};
use rrdma::{ConnectOptions, Connection, Keepalive, RemoteRegion, Rrdma};

mod bench;
mod blocks;
mod control;
mod progress;
mod queue;
mod runner;

pub use bench::{bench, print_bench, BenchArgs, Engine};
pub use blocks::{read, verify, write};
use control::resolve_token;

/// Where to find the export.
pub struct Target {
    pub peer: SocketAddr,
    pub token: String,
    pub timeout: Duration,
    pub keepalive: Keepalive,
    /// Reconnect, and retry what a reconnect interrupted.
    pub reconnect: bool,
}

/// How long an operation is retried while its connection reconnects.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(120);

/// Runs `op`; with `--reconnect`, runs it again while it fails because
/// the connection is reconnecting (`ECONNRESET` for an operation the
/// failure interrupted, `EAGAIN` until the connection and its import are
/// back). Block reads and writes can be repeated: the same blocks get the
/// same bytes.
fn retrying<T>(t: &Target, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let start = Instant::now();
    let mut told = false;
    loop {
        match op() {
            Err(e)
                if t.reconnect
                    && e.raw_os_error()
                        .is_some_and(|n| n == ECONNRESET.get() || n == EAGAIN.get())
                    && start.elapsed() < RECONNECT_PATIENCE =>
            {
                if !told {
                    eprintln!("rrdma: connection interrupted ({e}); waiting for the reconnect");
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// With `--reconnect`, tells how often the connection came back.
fn report_reconnects(dev: &Rrdma, t: &Target) {
    if !t.reconnect {
        return;
    }
    let n = dev.fdinfo_value("rrdma-reconnects").unwrap_or(0);
    let attempts = dev.fdinfo_value("rrdma-reconnect-attempts").unwrap_or(0);
    if n > 0 || attempts > 0 {
        eprintln!("rrdma: reconnected {n} times ({attempts} attempts)");
    }
}

/// Connects and imports.
pub fn open<'a>(dev: &'a Rrdma, t: &Target) -> io::Result<(Connection<'a>, RemoteRegion<'a>)> {
    let ctx = |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let token = resolve_token(&t.token)?;
    let conn = dev
        .connect_opts(
            t.peer,
            t.timeout,
            ConnectOptions {
                keepalive: t.keepalive,
                reconnect: t.reconnect,
            },
        )
        .map_err(ctx(format!("connect to {}", t.peer)))?;
    let remote = conn
        .import(token, t.timeout)
        .map_err(ctx(format!("import {token:#x}")))?;
    Ok((conn, remote))
}
