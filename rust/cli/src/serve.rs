// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma serve`: create a region, listen, export it, print the tokens.
//!
//! With `--control PORT`, a line-based TCP channel (for tests and demos on
//! a private network; it hands out the tokens, which are capabilities)
//! answers: `tokens`, `checksum FIRST COUNT`, `fill SEED`,
//! `unexport ACCESS`, `fdinfo`, `connections`, `quit`, and `die` (exit at
//! once without cleanup, as if killed).

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rrdma::{Access, Export, Rrdma};

use crate::stats::{checksum, fill_pattern};

/// Options of `serve`.
pub struct ServeArgs {
    pub listen: SocketAddr,
    pub block_size: u32,
    pub blocks: u64,
    pub access: Vec<Access>,
    pub control: Option<u16>,
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
}

fn answer(dev: &Rrdma, st: &Mutex<State<'_>>, line: &str) -> String {
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
        ["checksum", first, count] => {
            let (Ok(first), Ok(count)) = (first.parse::<u64>(), count.parse::<u64>()) else {
                return "error bad numbers".into();
            };
            let bs = st.region.block_size() as u64;
            let (start, end) = (first * bs, (first + count) * bs);
            if end > st.region.len() as u64 || start > end {
                return "error range".into();
            }
            format!(
                "{:#x}",
                checksum(&st.region.as_slice()[start as usize..end as usize])
            )
        }
        ["fill", seed] => match seed.parse::<u64>() {
            Ok(seed) => {
                fill_pattern(st.region.as_mut_slice(), seed);
                "ok".into()
            }
            Err(_) => "error bad seed".into(),
        },
        ["unexport", which] => {
            let want = if *which == "ro" {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            };
            match st
                .exports
                .iter_mut()
                .find(|(a, e)| *a == want && e.is_some())
            {
                Some((_, e)) => match e.take().map(|e| e.revoke()) {
                    Some(Ok(())) => "ok".into(),
                    Some(Err(err)) => format!("error {err}"),
                    None => "error none".into(),
                },
                None => "error none".into(),
            }
        }
        ["connections"] => st.conns.len().to_string(),
        ["fdinfo"] => match dev.fdinfo() {
            Ok(v) => v
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
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

fn control_loop(dev: &Rrdma, st: &Mutex<State<'_>>, listener: TcpListener) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = handle_client(dev, st, stream);
        if st.lock().map(|s| s.quit).unwrap_or(true) {
            return;
        }
    }
}

fn handle_client(dev: &Rrdma, st: &Mutex<State<'_>>, stream: TcpStream) -> io::Result<()> {
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
    let region = dev.create_region(a.block_size, a.blocks)?;
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
            if let Some(c) = listener.accept(Some(Duration::from_millis(200)))? {
                if !a.json {
                    println!(
                        "connected: {}",
                        c.peer().map_or("?".into(), |p| p.to_string())
                    );
                    io::stdout().flush()?;
                }
                st.lock().unwrap_or_else(|e| e.into_inner()).conns.push(c);
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
