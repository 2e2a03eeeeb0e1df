// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What an importer asks of the exporter's `serve --control` endpoint: the
//! token a `@HOST:PORT[/ro|/rw]` argument names, and the exporter's work
//! counts.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;

use crate::serve;

/// A `@HOST:PORT[/ro|/rw]` token argument: the `serve --control` endpoint
/// and the access asked for (`rw` when not given).
fn control_spec(spec: &str) -> Option<(&str, &str)> {
    let rest = spec.strip_prefix('@')?;
    Some(rest.split_once('/').unwrap_or((rest, "rw")))
}

/// Resolves a token argument: hex (`0x...`), or `@HOST:PORT[/ro|/rw]` to
/// ask a `serve --control` endpoint.
pub fn resolve_token(spec: &str) -> io::Result<u64> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("bad token '{spec}'"));
    if let Some((addr, want)) = control_spec(spec) {
        let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
        let line = serve::control(addr, "tokens")?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let tok = words
            .chunks(2)
            .find(|w| w.len() == 2 && w[0] == want)
            .map(|w| w[1])
            .ok_or_else(bad)?;
        return resolve_token(tok);
    }
    let hex = spec.strip_prefix("0x").unwrap_or(spec);
    u64::from_str_radix(hex, 16).map_err(|_| bad())
}

/// The `serve --control` endpoint named by a `@HOST:PORT[/ro|/rw]` token.
pub(super) fn control_addr(spec: &str) -> Option<SocketAddr> {
    control_spec(spec)?.0.parse().ok()
}

/// The exporter's work counts (its fdinfo's `rrdma-work-*`, see the
/// module's `work.rs`), asked of its control endpoint.
pub(super) fn exporter_work(addr: SocketAddr) -> io::Result<BTreeMap<String, u64>> {
    let line = serve::control(addr, "fdinfo")?;
    Ok(line
        .split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.strip_prefix("rrdma-work-")?.to_string(), v.parse().ok()?))
        })
        .collect())
}

/// The exporter's work counts once they stand still for 100 ms (at most
/// 2 s of asking).
pub(super) fn settled_work(addr: SocketAddr) -> io::Result<BTreeMap<String, u64>> {
    let mut last = exporter_work(addr)?;
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = exporter_work(addr)?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(last)
}
