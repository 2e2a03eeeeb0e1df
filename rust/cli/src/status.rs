// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma status`: the host's connections, exports with their importers,
//! imports and disks, as tables (or JSON).

use std::net::SocketAddr;

use rrdma::StatusReport;

fn addr(a: Option<SocketAddr>) -> String {
    a.map_or_else(|| "-".into(), |a| a.to_string())
}

/// Who holds an object: `kernel` for a disk's, else PID/UID (pid 0: not
/// visible from here, or exited).
fn owner(disk: bool, pid: u32, uid: u32) -> String {
    if disk {
        "kernel".into()
    } else {
        format!("{pid}/{uid}")
    }
}

/// Prints `r` as tables, one per kind, each only when it has rows.
pub fn print(r: &StatusReport) {
    if r.connections.is_empty() && r.exports.is_empty() && r.disks.is_empty() {
        println!("no rrdma connections, exports or disks visible here");
        return;
    }
    if !r.connections.is_empty() {
        println!("CONNECTIONS");
        println!(
            "{:>6} {:<12} {:<24} {:<11} {:<7} {:>5} {:>5} {:>8} {:>7} {:>7} {:>6}",
            "ID",
            "PID/UID",
            "PEER",
            "STATE",
            "SIDE",
            "LANES",
            "RECON",
            "INFLIGHT",
            "FAILED",
            "IMPORTS",
            "GRANTS"
        );
        for c in &r.connections {
            let side = if c.disk {
                "disk"
            } else if c.active {
                "connect"
            } else {
                "accept"
            };
            println!(
                "{:>6} {:<12} {:<24} {:<11} {:<7} {:>5} {:>5} {:>8} {:>7} {:>7} {:>6}",
                c.id,
                owner(c.disk, c.pid, c.uid),
                addr(c.peer),
                c.state,
                side,
                c.lanes,
                c.reconnects,
                c.in_flight,
                c.failed,
                c.imports,
                c.grants
            );
        }
    }
    if !r.exports.is_empty() {
        println!("EXPORTS");
        println!(
            "{:>6} {:>6} {:<12} {:<6} {:>10} {:>10}  IMPORTED BY",
            "FILE", "EXPORT", "PID/UID", "ACCESS", "BLOCKSIZE", "BLOCKS"
        );
        for e in &r.exports {
            let by: Vec<String> = e
                .importers
                .iter()
                .map(|(id, p)| format!("{} (conn {id})", addr(*p)))
                .collect();
            println!(
                "{:>6} {:>6} {:<12} {:<6} {:>10} {:>10}  {}",
                e.file,
                e.export,
                owner(false, e.pid, e.uid),
                if e.one_connection {
                    format!("{}/1", e.access)
                } else {
                    e.access.to_string()
                },
                e.block_size,
                e.nblocks,
                if by.is_empty() {
                    "-".into()
                } else {
                    by.join(", ")
                }
            );
        }
    }
    if !r.imports.is_empty() {
        println!("IMPORTS");
        println!(
            "{:>6} {:<12} {:<24} {:<6} {:>10} {:>10} {:>8}  STATE",
            "CONN", "PID/UID", "PEER", "ACCESS", "BLOCKSIZE", "BLOCKS", "INFLIGHT"
        );
        for i in &r.imports {
            let disk = r.connections.iter().any(|c| c.id == i.conn && c.disk);
            let state = if i.revoked {
                "revoked"
            } else if i.stale {
                "reconnecting"
            } else {
                "ok"
            };
            println!(
                "{:>6} {:<12} {:<24} {:<6} {:>10} {:>10} {:>8}  {}",
                i.conn,
                owner(disk, i.pid, i.uid),
                addr(i.peer),
                i.access,
                i.block_size,
                i.nblocks,
                i.in_flight,
                state
            );
        }
    }
    if !r.disks.is_empty() {
        println!("DISKS");
        println!(
            "{:<10} {:>6} {:<11} {:<3} {:>10} {:>10} {:>5}",
            "DISK", "CONN", "STATE", "RO", "BLOCKSIZE", "BLOCKS", "RECON"
        );
        for d in &r.disks {
            println!(
                "{:<10} {:>6} {:<11} {:<3} {:>10} {:>10} {:>5}",
                d.name,
                d.conn,
                d.state,
                if d.read_only { "yes" } else { "no" },
                d.block_size,
                d.nblocks,
                d.reconnects
            );
        }
    }
}
