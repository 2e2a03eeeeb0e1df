// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma serve`: create a region, listen, export it, print the tokens.
//!
//! With `--control PORT`, a line-based TCP channel (for tests and demos on
//! a private network; it hands out the tokens, which are capabilities)
//! answers: `tokens`, `checksum FIRST COUNT`, `fill SEED`, `export ACCESS`
//! (a new token), `unexport ACCESS` (the newest export of that access),
//! `unexport-in MS ACCESS` (the same, MS milliseconds later, whatever the
//! network does meanwhile),
//! `unexport-scan ACCESS FIRST COUNT MS` (revoke, then watch the blocks
//! for MS milliseconds: see [`unexport_scan`]), `fdinfo`, `cpustat` (this
//! machine's CPU time so far, for a bench's CPU per operation),
//! `connections`, `pid` (this process's id), `status` (the host's `rrdma
//! status --json` on one line, as this process sees it: everyone's, when it
//! runs as root), `quit`, and `die` (exit at once without cleanup, as if
//! killed).

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rrdma::stamp::{self, Stamp};
use rrdma::{Access, Export, Rrdma};

use crate::stats::{checksum, fill_pattern};

/// Options of `serve`.
pub struct ServeArgs {
    pub listen: SocketAddr,
    pub block_size: u32,
    pub blocks: u64,
    pub access: Vec<Access>,
    pub control: Option<u16>,
    /// Connections kept at most (0: no limit): a new one closes the oldest.
    pub max_conns: usize,
    /// Export this process's own memory (REGION_REGISTER).
    pub user_memory: bool,
    pub json: bool,
}

fn access_name(a: Access) -> &'static str {
    match a {
        Access::ReadOnly => "ro",
        Access::ReadWrite => "rw",
    }
}

struct State<'a> {
    exports: Vec<(Access, Option<Export<'a>>)>,
    region: rrdma::Region<'a>,
    conns: Vec<rrdma::Connection<'a>>,
    quit: bool,
    /// An `unexport-in` due: when, and of which access.
    unexport_at: Option<(Instant, String)>,
}

fn access_of(which: &str) -> Access {
    if which == "ro" {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    }
}

/// The byte range of blocks `first..first + count`, if inside the region.
fn range(st: &State<'_>, first: &str, count: &str) -> Option<(usize, usize)> {
    let (first, count) = (first.parse::<u64>().ok()?, count.parse::<u64>().ok()?);
    let bs = st.region.block_size() as u64;
    let end = first.checked_add(count)?.checked_mul(bs)?;
    (end <= st.region.len() as u64).then(|| ((first * bs) as usize, end as usize))
}

/// Revokes the most recent live export of `which` access.
fn unexport(st: &mut State<'_>, which: &str) -> Result<(), String> {
    let want = access_of(which);
    let e = st
        .exports
        .iter_mut()
        .rev()
        .find(|(a, e)| *a == want && e.is_some())
        .and_then(|(_, e)| e.take())
        .ok_or("none")?;
    e.revoke().map_err(|e| e.to_string())
}

/// What blocks hold, by their operation stamps (`rrdma::stamp`).
struct Census {
    stamped: usize,
    torn: usize,
    distinct: usize,
    max: Option<u64>,
}

fn census(bytes: &[u8], block_size: usize) -> Census {
    let mut ops = std::collections::HashSet::new();
    let (mut stamped, mut torn) = (0, 0);
    for b in bytes.chunks_exact(block_size) {
        match stamp::read(b) {
            Stamp::Op(n) => {
                stamped += 1;
                ops.insert(n);
            }
            Stamp::Torn => torn += 1,
            Stamp::None => {}
        }
    }
    Census {
        stamped,
        torn,
        distinct: ops.len(),
        max: ops.iter().copied().max(),
    }
}

/// `unexport-scan`: revokes the newest export of `which`, copies bytes
/// `start..end` (their blocks' heads first) as soon as UNEXPORT returned,
/// then compares them with that copy every 50 ms for `window`. Any block
/// that changes (`changed`) was written after UNEXPORT returned;
/// `last-change-ms` is when the last new change was seen. The blocks'
/// operation stamps say how far the load had gone: `max0` right after
/// UNEXPORT, `max` at the end; `torn` blocks hold parts of two writes.
fn unexport_scan(
    st: &mut State<'_>,
    which: &str,
    start: usize,
    end: usize,
    window: Duration,
) -> String {
    let bs = st.region.block_size() as usize;
    if bs < 16 {
        return "error blocks smaller than a stamp's head".into();
    }
    let head_of = |b: &[u8]| u128::from_le_bytes(b[..16].try_into().unwrap_or([0; 16]));
    let heads_now = |st: &State<'_>| -> Vec<u128> {
        std::hint::black_box(st.region.as_slice())[start..end]
            .chunks_exact(bs)
            .map(head_of)
            .collect()
    };
    // A first look faults the pages in (73 ms for 1024 pages on the debug
    // kernel), so that the look after UNEXPORT is quick.
    std::hint::black_box(heads_now(st));
    if let Err(e) = unexport(st, which) {
        return format!("error {e}");
    }
    let t0 = Instant::now();
    // The blocks' heads first (a stamp's magic and operation number, which
    // every later write changes): a pass far quicker than the full copy
    // (35-300 ms for 4 MiB under TCG), during which a write could otherwise
    // land unseen on a block not copied yet.
    let heads = heads_now(st);
    let heads_us = t0.elapsed().as_micros();
    let snap = st.region.as_slice()[start..end].to_vec();
    let copy_us = t0.elapsed().as_micros();
    let mut changed = vec![false; heads.len()];
    // Each block's head at the previous pass: when it moves, a new write
    // landed (`last-change-ms`).
    let mut last = heads.clone();
    let mut last_change = None;
    let mut scans = 0;
    loop {
        let done = t0.elapsed() >= window;
        // The kernel writes this memory behind the compiler's back: a
        // fresh look at it on every pass.
        let now = &std::hint::black_box(st.region.as_slice())[start..end];
        let blocks = now.chunks_exact(bs).zip(snap.chunks_exact(bs));
        for (b, (x, y)) in blocks.enumerate() {
            let h = head_of(x);
            let differs = x != y || h != heads[b];
            if h != last[b] || (differs && !changed[b]) {
                last_change = Some(t0.elapsed().as_millis());
            }
            last[b] = h;
            changed[b] |= differs;
        }
        scans += 1;
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = census(&snap, bs);
    let after = census(&st.region.as_slice()[start..end], bs);
    let opt = |v: Option<u128>| v.map_or("none".to_string(), |v| v.to_string());
    format!(
        "ok changed={} last-change-ms={} torn={} torn0={} stamped={} distinct={} max0={} max={} \
         heads-us={heads_us} copy-us={copy_us} scans={scans}",
        changed.iter().filter(|&&c| c).count(),
        opt(last_change),
        after.torn,
        before.torn,
        after.stamped,
        after.distinct,
        opt(before.max.map(u128::from)),
        opt(after.max.map(u128::from)),
    )
}

/// Runs an `unexport-in` whose time has come.
fn unexport_due(st: &Mutex<State<'_>>) {
    let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
    let Some((at, which)) = st.unexport_at.clone() else {
        return;
    };
    if Instant::now() < at {
        return;
    }
    st.unexport_at = None;
    if let Err(e) = unexport(&mut st, &which) {
        eprintln!("serve: unexport-in {which}: {e}");
    }
}

fn answer<'a>(dev: &'a Rrdma, st: &Mutex<State<'a>>, line: &str) -> String {
    let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["tokens"] => st
            .exports
            .iter()
            .filter_map(|(a, e)| {
                e.as_ref()
                    .map(|e| format!("{} {:#x}", access_name(*a), e.token()))
            })
            .collect::<Vec<_>>()
            .join(" "),
        ["checksum", first, count] => match range(&st, first, count) {
            Some((start, end)) => format!("{:#x}", checksum(&st.region.as_slice()[start..end])),
            None => "error range".into(),
        },
        ["fill", seed] => match seed.parse::<u64>() {
            Ok(seed) => {
                fill_pattern(st.region.as_mut_slice(), seed);
                "ok".into()
            }
            Err(_) => "error bad seed".into(),
        },
        ["unexport", which] => match unexport(&mut st, which) {
            Ok(()) => "ok".into(),
            Err(e) => format!("error {e}"),
        },
        ["unexport-scan", which, first, count, ms] => {
            let (Some((start, end)), Ok(ms)) = (range(&st, first, count), ms.parse::<u64>()) else {
                return "error range or window".into();
            };
            unexport_scan(&mut st, which, start, end, Duration::from_millis(ms))
        }
        ["unexport-in", ms, which] => match ms.parse::<u64>() {
            Ok(ms) => {
                let at = Instant::now() + Duration::from_millis(ms);
                st.unexport_at = Some((at, (*which).to_string()));
                "ok".into()
            }
            Err(_) => "error bad delay".into(),
        },
        ["export", which] => {
            let acc = access_of(which);
            match dev.export(&st.region, acc, None) {
                Ok(e) => {
                    let tok = format!("{:#x}", e.token());
                    st.exports.push((acc, Some(e)));
                    tok
                }
                Err(e) => format!("error {e}"),
            }
        }
        ["connections"] => st.conns.len().to_string(),
        ["pid"] => std::process::id().to_string(),
        // The "cpu" line of /proc/stat without its label: user nice system
        // idle iowait irq softirq steal ..., in USER_HZ ticks, all CPUs.
        ["cpustat"] => std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| Some(t.lines().next()?.strip_prefix("cpu")?.trim().to_string()))
            .unwrap_or_else(|| "error /proc/stat".into()),
        ["fdinfo"] => match dev.fdinfo() {
            Ok(v) => v
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            Err(e) => format!("error {e}"),
        },
        // The host's `rrdma status --json`, on one line.
        ["status"] => match dev.status() {
            Ok(r) => serde_json::to_string(&r).unwrap_or_else(|e| format!("error {e}")),
            Err(e) => format!("error {e}"),
        },
        // Dies at once, like a killed process: the kernel's file release
        // tears down every connection with operations in flight.
        ["die"] => std::process::exit(9),
        ["quit"] => {
            st.quit = true;
            "ok".into()
        }
        _ => "error unknown command".into(),
    }
}

fn control_loop<'a>(dev: &'a Rrdma, st: &Mutex<State<'a>>, listener: TcpListener) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = handle_client(dev, st, stream);
        if st.lock().map(|s| s.quit).unwrap_or(true) {
            return;
        }
    }
}

fn handle_client<'a>(dev: &'a Rrdma, st: &Mutex<State<'a>>, stream: TcpStream) -> io::Result<()> {
    let mut out = stream.try_clone()?;
    for line in BufReader::new(stream).lines() {
        let line = line?;
        writeln!(out, "{}", answer(dev, st, &line))?;
        if st.lock().map(|s| s.quit).unwrap_or(true) {
            break;
        }
    }
    Ok(())
}

/// Runs `serve` until `quit` on the control channel or a signal.
pub fn serve(dev: &Rrdma, a: &ServeArgs) -> io::Result<()> {
    let region = if a.user_memory {
        let len = usize::try_from(u64::from(a.block_size) * a.blocks)
            .ok()
            .filter(|l| l.is_multiple_of(rrdma::page_size() as usize))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "--user-memory registers whole pages: blocks x block size must be a multiple of the page size",
                )
            })?;
        dev.register_region(rrdma::PageBuf::new(len)?, a.block_size)?
    } else {
        dev.create_region(a.block_size, a.blocks)?
    };
    let listener = dev.listen(a.listen, 0)?;
    let mut exports = Vec::new();
    for &acc in &a.access {
        exports.push((acc, Some(dev.export(&region, acc, None)?)));
    }
    if a.json {
        let toks: Vec<_> = exports
            .iter()
            .filter_map(|(acc, e)| e.as_ref().map(|e| serde_json::json!({"access": access_name(*acc), "token": format!("{:#x}", e.token())})))
            .collect();
        println!(
            "{}",
            serde_json::json!({"listen": a.listen.to_string(), "block_size": a.block_size, "blocks": a.blocks, "exports": toks})
        );
    } else {
        println!(
            "listening on {} ({} blocks of {} bytes)",
            a.listen, a.blocks, a.block_size
        );
        for (acc, e) in &exports {
            if let Some(e) = e {
                println!("token {} {:#x}", access_name(*acc), e.token());
            }
        }
    }
    io::stdout().flush()?;
    let st = Arc::new(Mutex::new(State {
        exports,
        region,
        conns: Vec::new(),
        quit: false,
        unexport_at: None,
    }));
    let control = match a.control {
        Some(p) => Some(TcpListener::bind(("0.0.0.0", p))?),
        None => None,
    };
    std::thread::scope(|s| -> io::Result<()> {
        if let Some(l) = control {
            let st = &st;
            s.spawn(move || control_loop(dev, st, l));
        }
        loop {
            if st.lock().map(|s| s.quit).unwrap_or(true) {
                break;
            }
            unexport_due(&st);
            if let Some(c) = listener.accept(Some(Duration::from_millis(200)))? {
                if !a.json {
                    println!(
                        "connected: {}",
                        c.peer().map_or("?".into(), |p| p.to_string())
                    );
                    io::stdout().flush()?;
                }
                let oldest = {
                    let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
                    st.conns.push(c);
                    let over = st.conns.len().saturating_sub(a.max_conns);
                    if a.max_conns > 0 && over > 0 {
                        st.conns.drain(..over).collect()
                    } else {
                        Vec::new()
                    }
                };
                // Disconnected outside the lock (each waits for its
                // teardown).
                drop(oldest);
            }
        }
        Ok(())
    })?;
    // Drop in order: connections, exports, region; then the listener.
    if let Ok(m) = Arc::try_unwrap(st) {
        drop(m.into_inner());
    }
    drop(listener);
    Ok(())
}

/// Asks a `serve --control` endpoint one question.
pub fn control(addr: SocketAddr, line: &str) -> io::Result<String> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut w = s.try_clone()?;
    writeln!(w, "{line}")?;
    let mut r = BufReader::new(s);
    let mut out = String::new();
    r.read_line(&mut out)?;
    Ok(out.trim().to_string())
}
