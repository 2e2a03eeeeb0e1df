// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The serving peer as the checks reach it: its address, and its control
//! channel (`rrdma serve --control 7470`): tokens, counts, commands.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub(crate) const T: Duration = Duration::from_secs(10);

pub(crate) fn control(peer: &str, line: &str) -> io::Result<String> {
    let addr: SocketAddr = format!("{peer}:7470").parse().map_err(io::Error::other)?;
    let s = TcpStream::connect_timeout(&addr, T)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    writeln!(&s, "{line}")?;
    let mut out = String::new();
    BufReader::new(s).read_line(&mut out)?;
    Ok(out.trim().to_string())
}

/// One count of the exporter's fdinfo (`rrdma serve`'s `fdinfo` control
/// line: `key=value` words).
pub(crate) fn peer_count(peer: &str, key: &str) -> Result<u64, String> {
    let line = control(peer, "fdinfo").map_err(|e| e.to_string())?;
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no {key} in '{line}'"))
}

pub(crate) fn token(peer: &str, which: &str) -> io::Result<u64> {
    let line = control(peer, "tokens")?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let t = w
        .chunks(2)
        .find(|p| p.len() == 2 && p[0] == which)
        .map(|p| p[1].trim_start_matches("0x"))
        .ok_or_else(|| io::Error::other(format!("no {which} token in '{line}'")))?;
    u64::from_str_radix(t, 16).map_err(io::Error::other)
}

pub(crate) fn addr(peer: &str, port: u16) -> SocketAddr {
    format!("{peer}:{port}").parse().expect("address")
}
