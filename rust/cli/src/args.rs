// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The arguments several commands share: where an export is.

use std::net::SocketAddr;
use std::time::Duration;

use rrdma::Keepalive;

use crate::transfer::Target;

/// Where the export is, for the importer's commands.
#[derive(clap::Args)]
pub struct TargetArgs {
    /// The serving peer's rrdma address (IP:PORT).
    #[arg(long)]
    peer: SocketAddr,
    /// The export's token: hex, or @IP:PORT[/ro|/rw] to ask `serve --control`.
    #[arg(long)]
    token: String,
    /// Connect and import timeout, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    /// Keepalive of the connection: MS (a ping after MS without an answer),
    /// MS:MISSES (the connection ends after MISSES such intervals), or
    /// `off`. Default: the module parameters keepalive_ms and
    /// keepalive_misses.
    #[arg(long, value_parser = parse_keepalive)]
    keepalive: Option<Keepalive>,
    /// Reconnect after a failure of the established connection (module
    /// parameters reconnect_*), and retry the blocks it interrupted.
    #[arg(long)]
    reconnect: bool,
}

/// `--keepalive`: `off`, `MS` or `MS:MISSES`.
fn parse_keepalive(s: &str) -> Result<Keepalive, String> {
    if s == "off" {
        return Ok(Keepalive::Off);
    }
    let (ms, misses) = s.split_once(':').unwrap_or((s, "0"));
    let ms: u64 = ms.parse().map_err(|_| format!("bad interval '{ms}'"))?;
    let misses: u16 = misses
        .parse()
        .map_err(|_| format!("bad misses '{misses}'"))?;
    Ok(Keepalive::Every {
        interval: Duration::from_millis(ms),
        misses,
    })
}

impl TargetArgs {
    pub fn target(&self) -> Target {
        Target {
            peer: self.peer,
            token: self.token.clone(),
            timeout: Duration::from_millis(self.timeout_ms),
            keepalive: self.keepalive.unwrap_or(Keepalive::Module),
            reconnect: self.reconnect,
        }
    }
}
