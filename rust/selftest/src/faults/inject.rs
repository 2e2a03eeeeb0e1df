// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The faults the suite injects, and how each is undone.
//!
//! Network faults are netem qdiscs on both guests' eth0 (this one's with
//! `tc`, the exporter's through its agent), so they act on both
//! directions. A pause asks the host (scripts/guest.py, through this
//! guest's third serial port) to stop a guest's QEMU, the exporter's or
//! this one's, and continue it later. The rest are done here or through the exporter's agent and
//! control port.

use std::process::Command;
use std::time::Duration;

use crate::attack::agent_cmd;
use crate::remote::control;

/// A fault of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A netem qdisc with these arguments on both guests.
    Netem(&'static str, &'static str),
    /// This guest's eth0 down, then up.
    LinkDown,
    /// The exporter's QEMU stopped, then continued.
    Pause,
    /// This guest's QEMU (the importer's) stopped, then continued: long
    /// enough that the exporter's keepalive ends its connections.
    PauseImporter,
    /// The workload (the importer) killed with SIGKILL, then restarted.
    KillImporter,
    /// `rrdma serve` killed (exit without cleanup), then restarted by the
    /// exporter's script: a new region, a new token.
    KillExporter,
    /// `rdma link del` of the exporter's device, then `rdma link add`.
    LinkDelExporter,
    /// The same on this guest.
    LinkDelImporter,
    /// `rmmod rrdma` on both guests with operations in flight: refused.
    Rmmod,
}

/// Every fault, in the order the suite runs them.
pub(crate) const ALL: [Fault; 14] = [
    Fault::Netem("loss 1%", "loss 1%"),
    Fault::Netem("loss 10%", "loss 10%"),
    Fault::Netem("delay 20±10 ms", "delay 20ms 10ms"),
    Fault::Netem("duplicate 5%", "duplicate 5%"),
    Fault::Netem("reorder 25%", "delay 5ms reorder 25% 50%"),
    Fault::Netem("corrupt 1%", "corrupt 1%"),
    Fault::LinkDown,
    Fault::Pause,
    Fault::PauseImporter,
    Fault::KillImporter,
    Fault::KillExporter,
    Fault::LinkDelExporter,
    Fault::LinkDelImporter,
    Fault::Rmmod,
];

impl Fault {
    /// The fault's name in the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::Netem(name, _) => name,
            Fault::LinkDown => "link down",
            Fault::Pause => "exporter paused",
            Fault::PauseImporter => "importer paused",
            Fault::KillImporter => "importer killed",
            Fault::KillExporter => "exporter killed",
            Fault::LinkDelExporter => "rdma link del, exporter",
            Fault::LinkDelImporter => "rdma link del, importer",
            Fault::Rmmod => "rmmod in flight",
        }
    }

    /// A short key for selecting faults on the command line.
    pub(crate) fn key(self) -> String {
        self.name()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
            .split('-')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    }
}

/// Runs a program, `Ok` with its stdout if it exits 0.
pub(crate) fn run(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Packets (and drops) netem saw on this guest's eth0: `tc -s`'s
/// "Sent N bytes P pkt (dropped D, ...".
pub(crate) fn netem_counts() -> Option<(u64, u64)> {
    let text = run("tc", &["-s", "qdisc", "show", "dev", "eth0"]).ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("Sent "))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let pkt = w.get(3)?.parse().ok()?;
    let dropped = w.get(6)?.trim_end_matches(',').parse().ok()?;
    Some((pkt, dropped))
}

/// Asks the host to stop a guest (`a`, the exporter, or `b`, this one)
/// for `d`. The host acts on it a moment later, and a paused guest's
/// clock stops too: this guest cannot time its own pause.
pub(crate) fn pause(guest: char, d: Duration) -> Result<(), String> {
    std::fs::write("/dev/ttyS2", format!("pause {guest} {}\n", d.as_millis()))
        .map_err(|e| format!("/dev/ttyS2: {e}"))
}

/// Puts netem with `args` (tc's words) on this guest's eth0, in place of
/// its root qdisc.
pub(crate) fn netem_here_on(args: &str) -> Result<(), String> {
    // The kernel's request_module() may not find busybox's modprobe.
    let _ = run("modprobe", &["sch_netem"]);
    let mut a = vec!["qdisc", "replace", "dev", "eth0", "root", "netem"];
    a.extend(args.split_whitespace());
    run("tc", &a).map(|_| ())
}

/// Gives this guest's eth0 its default root qdisc back.
pub(crate) fn qdisc_here_reset() -> Result<(), String> {
    run("tc", &["qdisc", "del", "dev", "eth0", "root"]).map(|_| ())
}

/// netem with `args` on both guests' eth0 (the peer's through its agent).
pub(crate) fn netem_on(peer: &str, args: &str) -> Result<(), String> {
    netem_here_on(args)?;
    agent_cmd(peer, &format!("netem {args}"))
}

/// netem off on both guests.
pub(crate) fn netem_off(peer: &str) -> Result<(), String> {
    let here = qdisc_here_reset();
    let there = agent_cmd(peer, "netem off");
    here.and(there)
}

/// Brings this guest's RDMA device back and waits for its port.
pub(crate) fn link_add(dev: &str, prov: &str) -> Result<(), String> {
    run(
        "rdma",
        &["link", "add", dev, "type", prov, "netdev", "eth0"],
    )?;
    for _ in 0..100 {
        if run("rdma", &["link", "show", &format!("{dev}/1")])
            .is_ok_and(|s| s.contains("state ACTIVE"))
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{dev}: port not ACTIVE after 10 s"))
}

/// The exporter's tokens line, once its control port answers again.
pub(crate) fn tokens(peer: &str, within: Duration) -> Result<String, String> {
    let start = std::time::Instant::now();
    loop {
        match control(peer, "tokens") {
            Ok(t) if t.contains("rw") => return Ok(t),
            r if start.elapsed() > within => return Err(format!("{r:?}")),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_words() {
        let keys = ALL.map(Fault::key);
        assert_eq!(keys[2], "delay-20-10-ms");
        assert_eq!(keys[8], "importer-paused");
        assert_eq!(keys[11], "rdma-link-del-exporter");
        for (i, k) in keys.iter().enumerate() {
            assert!(!keys[..i].contains(k), "{k} twice");
            assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        }
    }
}
