// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the fuzzer reports: each call's results, its checks (errnos,
//! completions), how deep the random calls got, and the watchdog that
//! reports a call that hangs.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::track::Findings;
use super::{Fuzz, HANG};
use crate::Tap;

/// The end of a run that took `elapsed`: results and checks; `drained` is
/// what [`Fuzz::drain`] returned.
pub(super) fn report(
    f: Fuzz,
    t: &mut Tap,
    seed: u64,
    elapsed: Duration,
    drained: (String, Findings, Findings),
) {
    let ops = f.ops.load(Ordering::Relaxed);
    println!(
        "# fuzz: {ops} calls in {:.1} s ({:.0}/s)",
        elapsed.as_secs_f64(),
        ops as f64 / elapsed.as_secs_f64().max(0.001)
    );
    let results = f.results.into_inner().unwrap();
    let mut line = String::new();
    let mut last = "";
    for ((call, e), n) in &results {
        if *call != last {
            if !line.is_empty() {
                println!("# {line}");
            }
            line = format!("{call}:");
            last = call;
        }
        let what = if *e == 0 {
            "ok".to_string()
        } else {
            format!("e{e}")
        };
        line.push_str(&format!(" {what}={n}"));
    }
    if !line.is_empty() {
        println!("# {line}");
    }
    let findings = f.findings.into_inner().unwrap();
    // Each distinct finding once, with its count.
    let mut distinct = BTreeMap::<&str, u64>::new();
    for x in &findings {
        *distinct.entry(x.as_str()).or_default() += 1;
    }
    for (x, n) in distinct.iter().take(40) {
        println!("# fuzz: finding: {x} ({n} times)");
    }
    t.check(
        &format!("fuzz seed {seed}: every call returns success or an errno documented for it"),
        match findings.first() {
            None => Ok(()),
            Some(first) => Err(format!("{} findings, first: {first}", findings.len())),
        },
    );
    let (account, once, records) = drained;
    println!("# fuzz: {account}");
    for f in once.first.iter().chain(&records.first) {
        println!("# fuzz: {f}");
    }
    t.check(
        &format!("fuzz seed {seed}: every posted operation completed exactly once, on its file"),
        once.result(),
    );
    t.check(
        &format!(
            "fuzz seed {seed}: every completion has a documented status, its opcode and bytes"
        ),
        records.result(),
    );
    // How deep the random calls got (the set-up's calls included).
    let deep = [
        "CONNECT", "ACCEPT", "EXPORT", "IMPORT", "SUBMIT", "RW_SYNC", "mmap",
    ]
    .iter()
    .map(|c| {
        let n: u64 = results
            .iter()
            .filter(|((call, e), _)| call == c && *e == 0)
            .map(|(_, n)| n)
            .sum();
        format!("{c} {n}")
    })
    .collect::<Vec<_>>();
    println!("# fuzz: successful deep calls: {}", deep.join(", "));
}

/// Reports a thread stuck in one call for [`HANG`]: what it was doing and
/// its kernel stack, on the console (the process may never exit if the
/// thread sleeps uninterruptibly), then ends the process.
pub(super) fn watchdog(f: &Fuzz) {
    while f.running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_secs(1));
        if f.doing.iter().all(|d| d.lock().unwrap().1.elapsed() < HANG) {
            continue;
        }
        let mut report = String::new();
        for (i, d) in f.doing.iter().enumerate() {
            let (what, since) = *d.lock().unwrap();
            report.push_str(&format!(
                "rrdma-fuzz: thread {i}: {what} for {} s\n",
                since.elapsed().as_secs()
            ));
        }
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for t in tasks.flatten() {
                let path = t.path();
                let stack = std::fs::read_to_string(path.join("stack")).unwrap_or_default();
                let wchan = std::fs::read_to_string(path.join("wchan")).unwrap_or_default();
                report.push_str(&format!(
                    "rrdma-fuzz: task {}: wchan {wchan}\n{stack}",
                    t.file_name().to_string_lossy()
                ));
            }
        }
        if let Ok(mut c) = std::fs::OpenOptions::new().write(true).open("/dev/console") {
            use std::io::Write;
            let _ = c.write_all(report.as_bytes());
        }
        println!(
            "not ok 1 - fuzz: a call hung # {}",
            report.lines().next().unwrap_or("")
        );
        print!("{report}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(1);
    }
}
