// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The peer's side of the run: fresh exports of its region, imported, and
//! its agent (`rrdma-selftest agent`), which acts on the peer on request.

use std::time::Duration;

use rrdma::{Connection, RemoteRegion};

use crate::ensure;
use crate::remote::{addr, control, T};

/// A fresh export of the peer's region (`rw` or `ro`), imported over `conn`.
pub(crate) fn fresh_import<'a>(
    peer: &str,
    conn: &Connection<'a>,
    which: &str,
) -> Result<(u64, RemoteRegion<'a>), String> {
    let line = control(peer, &format!("export {which}")).map_err(|e| e.to_string())?;
    let tok = u64::from_str_radix(line.trim_start_matches("0x"), 16)
        .map_err(|_| format!("export {which}: '{line}'"))?;
    let r = conn.import(tok, T).map_err(|e| format!("import: {e}"))?;
    Ok((tok, r))
}

pub(crate) fn agent_cmd(peer: &str, cmd: &str) -> Result<(), String> {
    let v = agent_query(peer, cmd)?;
    ensure(v.is_empty(), format!("ok {v}"))
}

/// Runs `cmd` on the peer's agent: the value of its `ok VALUE` answer
/// (empty for a bare `ok`), or why it failed.
pub(crate) fn agent_query(peer: &str, cmd: &str) -> Result<String, String> {
    use std::io::{BufRead, BufReader, Write};
    let s =
        std::net::TcpStream::connect_timeout(&addr(peer, 7469), T).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    writeln!(&s, "{cmd}").map_err(|e| e.to_string())?;
    let mut out = String::new();
    BufReader::new(s)
        .read_line(&mut out)
        .map_err(|e| e.to_string())?;
    match out.trim() {
        "ok" => Ok(String::new()),
        a => a
            .strip_prefix("ok ")
            .map(str::to_string)
            .ok_or_else(|| a.to_string()),
    }
}
