// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `agent PORT DEV PROVIDER`: a line-based TCP endpoint on the serving
//! guest through which the peer's `attack` checks remove and re-add this
//! guest's RDMA device: `linkdel` runs `rdma link del DEV`, `linkadd` runs
//! `rdma link add DEV type PROVIDER netdev eth0` and waits for the port to
//! be ACTIVE, `keepalive MS MISSES` sets the module parameters the
//! listener's connections take (`keepalive restore` puts back what the
//! first one found), `netem ARGS...` adds a netem qdisc with ARGS on eth0
//! and `netem off` removes it, `drop-read-responses` drops the RDMA READ
//! responses this guest sends (RoCE) until `drop-read-responses off`,
//! `param NAME VALUE` sets the module parameter `fail_at` or
//! `accept_max_teardowns` (`param NAME restore` puts back its first value),
//! `rmmod` answers `ok` if `delete_module("rrdma")` is refused because the
//! module is in use (`EWOULDBLOCK`) and it stays, `module` answers `ok
//! REFCNT` if the module is loaded and live, `gone PID` answers `ok` once
//! process PID has ended (no such process, or a zombie), `clock` answers
//! `ok NS` with this guest's CLOCK_MONOTONIC (which stops while its QEMU
//! is stopped), `netem counts` answers `ok PACKETS DROPPED` with what this
//! guest's netem qdisc passed and dropped, `counters LABEL` prints (to its output) how the device's
//! counters moved since the last `counters`, `quit` ends.
//! Answers `ok`, `ok VALUE` or `error WHY`.
//! Test use only, on the guests' private network.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::param::ModParam;

fn rdma(args: &[&str]) -> Result<String, String> {
    let out = Command::new("rdma")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

pub(crate) fn tool(name: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(name)
        .args(args)
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// `delete_module("rrdma", O_NONBLOCK)`, as `rmmod` asks it: `Ok` if the
/// module was unloaded, else the errno (`EWOULDBLOCK` while it is in use).
pub(crate) fn delete_module() -> Result<(), i32> {
    // SAFETY: a NUL-terminated name and plain flags.
    let r = unsafe { libc::syscall(libc::SYS_delete_module, c"rrdma".as_ptr(), libc::O_NONBLOCK) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// The module's reference count if it is loaded and live (not coming or
/// going): `/sys/module/rrdma/initstate` and `refcnt`.
pub(crate) fn module_live() -> Result<u64, String> {
    let state = std::fs::read_to_string("/sys/module/rrdma/initstate")
        .map_err(|e| format!("/sys/module/rrdma/initstate: {e}"))?;
    if state.trim() != "live" {
        return Err(format!("rrdma is {}", state.trim()));
    }
    std::fs::read_to_string("/sys/module/rrdma/refcnt")
        .map_err(|e| format!("/sys/module/rrdma/refcnt: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("refcnt: {e}"))
}

/// Whether process `pid` has ended: no such process, or a zombie.
fn gone(pid: &str) -> Result<(), String> {
    pid.parse::<u32>().map_err(|_| format!("bad pid '{pid}'"))?;
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => Ok(()),
        Ok(stat) => match stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]) {
            Some("Z") => Ok(()),
            state => Err(format!("{pid} is still there (state {state:?})")),
        },
    }
}

/// The counters `rdma statistic` shows for `dev`'s port 1 (rxe has a
/// set of transport counters: retries, duplicates, sequence errors; siw
/// none), by name.
pub(crate) fn device_counters(dev: &str) -> Vec<(String, u64)> {
    let Ok(text) = rdma(&["statistic", "show", "link", &format!("{dev}/1")]) else {
        return Vec::new();
    };
    let words: Vec<&str> = text.split_whitespace().skip(2).collect();
    words
        .chunks(2)
        .filter_map(|p| Some((p.first()?.to_string(), p.get(1)?.parse().ok()?)))
        .collect()
}

/// The counters that moved from `before` to `after`, as `name +delta`. A
/// counter that went down means the device was removed and added again
/// (`rdma link del`/`add`): then every count is since it came back.
pub(crate) fn counters_moved(before: &[(String, u64)], after: &[(String, u64)]) -> String {
    let reset = after
        .iter()
        .any(|(k, v)| before.iter().any(|(b, was)| b == k && was > v));
    let before = if reset { &[][..] } else { before };
    let moved: Vec<String> = after
        .iter()
        .filter_map(|(k, v)| {
            let was = before.iter().find(|(b, _)| b == k).map_or(0, |(_, v)| *v);
            (*v != was).then(|| format!("{k} +{}", v.wrapping_sub(was)))
        })
        .collect();
    let moved = if moved.is_empty() {
        "-".into()
    } else {
        moved.join(", ")
    };
    if reset {
        format!("(device added again) {moved}")
    } else {
        moved
    }
}

/// The device's counters at the last `counters` command.
static COUNTERS: std::sync::Mutex<Vec<(String, u64)>> = std::sync::Mutex::new(Vec::new());

/// The keepalive parameters as the first `keepalive` command found them.
static SAVED: std::sync::Mutex<Option<(String, String)>> = std::sync::Mutex::new(None);

fn set_keepalive(ms: &str, misses: &str) -> Result<(), String> {
    for (name, value) in [("keepalive_ms", ms), ("keepalive_misses", misses)] {
        value
            .parse::<u32>()
            .map_err(|_| format!("bad {name} '{value}'"))?;
        ModParam::write(name, value)?;
    }
    Ok(())
}

/// The module parameters `param` may set: the flood's failure points.
const PARAMS: [&str; 2] = ["fail_at", "accept_max_teardowns"];

/// What each parameter `param` set was before the first time it did.
static PARAMS_SAVED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// `param NAME VALUE`: sets one of [`PARAMS`] (remembering its first
/// value); `param NAME restore` puts that value back.
fn set_param(name: &str, value: &str) -> Result<(), String> {
    let Some(&name) = PARAMS.iter().find(|&&p| p == name) else {
        return Err(format!("param {name}: not one of {PARAMS:?}"));
    };
    let mut saved = PARAMS_SAVED.lock().map_err(|e| e.to_string())?;
    let was = saved.iter().position(|(n, _)| n == name);
    if value == "restore" {
        return match was {
            Some(i) => ModParam::write(name, &saved.remove(i).1),
            None => Ok(()),
        };
    }
    value
        .parse::<u32>()
        .map_err(|_| format!("bad {name} '{value}'"))?;
    if was.is_none() {
        saved.push((name.to_string(), ModParam::get(name)?));
    }
    ModParam::write(name, value)
}

/// Drops every RoCE v2 RDMA READ response this guest sends (BTH opcodes
/// 0x0d..=0x10 of the RC transport, UDP port 4791; IPv4 without options,
/// as rxe sends it), and nothing else.
fn drop_read_responses() -> Result<(), String> {
    drop_bth(&[("0x0c", "0xfc"), ("0x10", "0xff")])
}

/// Drops the RoCE packets this guest sends whose BTH opcode matches one of
/// `opcodes` (value, mask), until the root qdisc is deleted.
pub(crate) fn drop_bth(opcodes: &[(&str, &str)]) -> Result<(), String> {
    let qdisc = [
        "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "prio",
    ];
    tool("tc", &qdisc)?;
    for &(opcode, mask) in opcodes {
        let filter = [
            "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "u8", "17", "0xff", "at", "9", "match", "u16", "4791", "0xffff", "at", "22",
            "match", "u8", opcode, mask, "at", "28", "action", "drop",
        ];
        if let Err(e) = tool("tc", &filter) {
            let _ = tool("tc", &["qdisc", "del", "dev", "eth0", "root"]);
            return Err(e);
        }
    }
    Ok(())
}

/// Carries out one command: its answer's value (empty for a bare `ok`).
fn answer(line: &str, dev: &str, prov: &str) -> Result<String, String> {
    match line.trim() {
        "module" => module_live().map(|n| n.to_string()),
        "clock" => Ok(crate::faults::now_ns().to_string()),
        "netem counts" => crate::faults::netem_counts()
            .map(|(pkt, dropped)| format!("{pkt} {dropped}"))
            .ok_or_else(|| "no netem qdisc on eth0".to_string()),
        cmd if cmd.starts_with("gone ") => gone(&cmd["gone ".len()..]).map(|()| String::new()),
        // Refused while `rrdma serve` holds /dev/rrdma open.
        "rmmod" => match delete_module() {
            Ok(()) => Err("rmmod rrdma succeeded".into()),
            Err(e) if e != libc::EWOULDBLOCK => Err(format!(
                "refused with {}, not EWOULDBLOCK (in use)",
                std::io::Error::from_raw_os_error(e)
            )),
            Err(_) => module_live()
                .map(|_| String::new())
                .map_err(|e| format!("refused, yet not live: {e}")),
        },
        other => answer_unit(other, dev, prov).map(|()| String::new()),
    }
}

fn answer_unit(line: &str, dev: &str, prov: &str) -> Result<(), String> {
    match line {
        "linkdel" => rdma(&["link", "del", dev]).map(|_| ()),
        "linkadd" => {
            rdma(&["link", "add", dev, "type", prov, "netdev", "eth0"])?;
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if rdma(&["link", "show", &format!("{dev}/1")])?.contains("state ACTIVE") {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err("port not ACTIVE after 10 s".into())
        }
        "keepalive restore" => {
            let saved = SAVED.lock().map_err(|e| e.to_string())?.take();
            match saved {
                Some((ms, misses)) => set_keepalive(&ms, &misses),
                None => Ok(()),
            }
        }
        cmd if cmd.starts_with("keepalive ") => {
            let v: Vec<&str> = cmd.split_whitespace().skip(1).collect();
            let [ms, misses] = v[..] else {
                return Err("usage: keepalive MS MISSES | keepalive restore".into());
            };
            let mut saved = SAVED.lock().map_err(|e| e.to_string())?;
            if saved.is_none() {
                *saved = Some((
                    ModParam::get("keepalive_ms")?,
                    ModParam::get("keepalive_misses")?,
                ));
            }
            set_keepalive(ms, misses)
        }
        cmd if cmd.starts_with("param ") => {
            let v: Vec<&str> = cmd.split_whitespace().skip(1).collect();
            let [name, value] = v[..] else {
                return Err("usage: param NAME VALUE|restore".into());
            };
            set_param(name, value)
        }
        "netem off" | "drop-read-responses off" => crate::faults::qdisc_here_reset(),
        "drop-read-responses" => drop_read_responses(),
        cmd if cmd.starts_with("netem ") => crate::faults::netem_here_on(&cmd["netem ".len()..]),
        cmd if cmd.starts_with("counters ") => {
            let now = device_counters(dev);
            let mut last = COUNTERS.lock().map_err(|e| e.to_string())?;
            println!("agent: {} {dev}: {}", cmd, counters_moved(&last, &now));
            *last = now;
            Ok(())
        }
        other => Err(format!("unknown command '{other}'")),
    }
}

/// Serves until `quit`; returns the exit code.
pub(crate) fn run(port: &str, dev: &str, prov: &str) -> i32 {
    let Ok(l) = TcpListener::bind(("0.0.0.0", port.parse().unwrap_or(7469))) else {
        eprintln!("agent: cannot listen on {port}");
        return 1;
    };
    for s in l.incoming().flatten() {
        let Ok(mut w) = s.try_clone() else { continue };
        let mut line = String::new();
        if BufReader::new(s).read_line(&mut line).is_err() {
            continue;
        }
        if line.trim() == "quit" {
            let _ = writeln!(w, "ok");
            return 0;
        }
        let reply = match answer(&line, dev, prov) {
            Ok(v) if v.is_empty() => "ok".to_string(),
            Ok(v) => format!("ok {v}"),
            Err(e) => format!("error {e}"),
        };
        println!("agent: {} -> {reply}", line.trim());
        let _ = writeln!(w, "{reply}");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::counters_moved;

    #[test]
    fn counters_moved_lists_what_changed() {
        let c = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
            v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        let before = c(&[("sent_pkts", 10), ("duplicate_request", 0)]);
        let after = c(&[("sent_pkts", 25), ("duplicate_request", 0), ("new", 2)]);
        assert_eq!(counters_moved(&before, &after), "sent_pkts +15, new +2");
        assert_eq!(counters_moved(&after, &after), "-");
        assert_eq!(counters_moved(&[], &[]), "-");
        // The device came back: counts since then.
        let again = c(&[("sent_pkts", 4), ("duplicate_request", 0)]);
        assert_eq!(
            counters_moved(&after, &again),
            "(device added again) sent_pkts +4"
        );
    }
}
