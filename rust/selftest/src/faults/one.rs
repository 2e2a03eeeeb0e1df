// SPDX-License-Identifier: GPL-2.0 OR MIT

//! One fault's round: the workload started, the fault injected, watched,
//! undone and judged, the blocks verified; the round's row of the table.

use std::sync::atomic::Ordering::SeqCst;
use std::thread::sleep;
use std::time::{Duration, Instant};

use rrdma::Rrdma;

use super::figures::{errno_name, ms, rate, snap, Monitor, Row, CONNECTION_ERRNOS};
use super::inject::{self, Fault};
use super::observe::{
    clocks, exporter_live, exporter_missed_ms, exporter_resumed, exporter_timeouts, module_serves,
    rmmod_refused, stuck_tasks,
};
use super::state::{now_ns, State, ERRNOS};
use super::workload::{spawn, verify};
use super::{Timing, CONNS, THREADS};
use crate::agent::{counters_moved, device_counters};
use crate::attack::{agent_cmd, agent_query};
use crate::remote::{control, token};
use crate::{ensure, Tap};

/// Runs the workload through one fault; returns its row.
#[allow(clippy::too_many_arguments)]
pub(super) fn one(
    dev: &Rrdma,
    t: &mut Tap,
    st: &State,
    f: Fault,
    peer: &str,
    prov: &str,
    dev_name: &str,
    tm: &Timing,
) -> Row {
    let name = f.name();
    let mut row = Row {
        name,
        before: 0,
        during: 0,
        after: 0,
        noticed: None,
        back: None,
        stall: 0,
        errors: String::new(),
        lost: 0,
        verified: 0,
    };
    st.stop.store(0, SeqCst);
    let base: Vec<u64> = st.threads.iter().map(|t| t.ok.load(SeqCst)).collect();
    let mut child = match spawn(peer, tm) {
        Ok(c) => c,
        Err(e) => {
            t.check(&format!("{name}: the workload runs"), Err(e));
            return row;
        }
    };
    let running = |st: &State| {
        st.threads[..CONNS * THREADS]
            .iter()
            .zip(&base)
            .all(|(t, b)| t.ok.load(SeqCst) > *b)
    };
    let start = Instant::now();
    while !running(st) && start.elapsed() < tm.recover {
        sleep(Duration::from_millis(50));
    }
    let started = running(st);
    t.check(
        &format!("{name}: the workload runs on every connection"),
        ensure(
            started,
            format!(
                "setup failures {} (last errno {})",
                st.setup_failures.load(SeqCst),
                st.setup_errno.load(SeqCst)
            ),
        ),
    );
    if !started {
        let _ = child.kill();
        let _ = child.wait();
        return row;
    }
    let sw = snap(st);
    sleep(tm.warm);
    let s0 = snap(st);
    row.before = rate(s0.ok - sw.ok, sw.at, s0.at);

    // The fault.
    let t_fault = now_ns();
    let until = t_fault + tm.fault.as_nanos() as u64;
    let mut mon = Monitor {
        t0: t_fault,
        errors0: s0.errors,
        first_error: None,
        max_stall: 0,
    };
    let old_token = token(peer, "rw").ok();
    let timeouts0 = exporter_timeouts(peer);
    // The devices' own counters (rxe's retries, duplicates, sequence
    // errors), printed after the recovery: what the transport did.
    let counters0 = device_counters(dev_name);
    let _ = agent_cmd(peer, &format!("counters {} before", f.key()));
    let serve_pid = control(peer, "pid").ok();
    let clocks0 = clocks(peer);
    let mut evidence: Result<(), String> = Ok(());
    let applied = match f {
        Fault::Netem(_, args) => inject::netem_on(peer, args),
        Fault::LinkDown => inject::run("ip", &["link", "set", "eth0", "down"]).map(|_| ()),
        Fault::Pause => inject::pause('a', tm.fault),
        Fault::PauseImporter => inject::pause('b', tm.importer_pause()),
        Fault::KillImporter => child.kill().map_err(|e| e.to_string()),
        Fault::KillExporter => match control(peer, "die") {
            // The connection closes without an answer.
            Ok(a) if !a.is_empty() => Err(format!("serve answered 'die' with '{a}'")),
            Ok(_) | Err(_) => Ok(()),
        },
        Fault::LinkDelExporter => agent_cmd(peer, "linkdel"),
        Fault::LinkDelImporter => inject::run("rdma", &["link", "del", dev_name]).map(|_| ()),
        Fault::Rmmod => rmmod_refused(peer),
    };
    // A killed exporter's is judged once the fault has had its time.
    if f != Fault::KillExporter {
        t.check(&format!("{name}: injected"), applied.clone());
    }
    if f == Fault::KillImporter {
        // Killed: the exporter must end its connections on its own.
        let status = child.wait();
        evidence = ensure(
            status.as_ref().is_ok_and(|s| {
                std::os::unix::process::ExitStatusExt::signal(s) == Some(libc::SIGKILL)
            }),
            format!("workload ended with {status:?}"),
        );
        let gone = mon.watch(st, until, || exporter_live(peer) == Some(0));
        if gone {
            mon.first_error = Some(now_ns() - t_fault);
        }
        mon.watch(st, until, || false);
        evidence = evidence.and(ensure(
            gone,
            format!(
                "the exporter still had {:?} connections after {} ms",
                exporter_live(peer),
                tm.fault.as_millis()
            ),
        ));
    } else if f == Fault::PauseImporter {
        // This guest's clock stops while it is paused, so it cannot wait
        // out its own pause: it waits (bounded by its own clock) until the
        // exporter's keepalive has ended the workload's connections, which
        // can only happen while this guest is silent. In its clock, the
        // first error then comes that long after it was continued.
        let want = timeouts0.map(|t| t + CONNS as u64);
        let bound = t_fault + (tm.importer_pause() + tm.recover).as_nanos() as u64;
        let mut asked = Instant::now();
        let ended = mon.watch(st, bound, || {
            if asked.elapsed() < Duration::from_millis(250) {
                return false;
            }
            asked = Instant::now();
            want.is_some() && exporter_timeouts(peer) >= want
        });
        evidence = ensure(
            ended,
            format!(
                "the exporter's keepalive ended {:?} connections (before {timeouts0:?}), \
                 not the workload's {CONNS}",
                exporter_timeouts(peer)
            ),
        );
    } else {
        mon.watch(st, until, || false);
    }
    if f == Fault::KillExporter {
        // Killed: `rrdma serve`'s process ended, and with it the
        // workload's connections (its operations failed).
        let killed = applied.clone().and_then(|()| {
            let pid = serve_pid
                .clone()
                .ok_or("serve's pid before the fault: no answer")?;
            agent_cmd(peer, &format!("gone {pid}")).map_err(|e| format!("serve {pid}: {e}"))?;
            ensure(
                mon.first_error.is_some(),
                format!(
                    "serve {pid} ended, yet no operation of the workload failed in {} ms",
                    tm.fault.as_millis()
                ),
            )
        });
        t.check(&format!("{name}: injected"), killed);
    }
    let s1 = snap(st);
    row.during = rate(s1.ok - s0.ok, s0.at, s1.at);
    if let Fault::Netem(_, args) = f {
        // Both guests' qdiscs: a loss on one side can stall the other's
        // sender (a retransmission timer), so that this side passes a
        // couple of dozen packets, too few for 1% to drop one of them.
        let there = agent_query(peer, "netem counts").and_then(|v| {
            let n: Vec<u64> = v
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            match n[..] {
                [pkt, dropped] => Ok((pkt, dropped)),
                _ => Err(format!("netem counts: '{v}'")),
            }
        });
        evidence = match (inject::netem_counts(), there) {
            (Some((pkt, dropped)), Ok((pkt_there, dropped_there))) => ensure(
                pkt > 0 && (!args.starts_with("loss") || dropped + dropped_there > 0),
                format!(
                    "netem: {pkt} packets, {dropped} dropped here; \
                     {pkt_there} and {dropped_there} on the peer"
                ),
            ),
            (None, _) => Err("no netem counts".into()),
            (_, Err(e)) => Err(format!("the peer's netem counts: {e}")),
        };
    }

    // Undo it.
    let t_heal_req = now_ns();
    let healed = match f {
        Fault::Netem(..) => inject::netem_off(peer),
        Fault::LinkDown => inject::run("ip", &["link", "set", "eth0", "up"]).map(|_| ()),
        // The host continues the exporter after the pause it asked for.
        Fault::Pause => exporter_resumed(peer, &clocks0, tm.fault, tm.recover),
        // The host continued this guest (it runs): its clock missed the
        // pause, which the exporter's counted.
        Fault::PauseImporter => clocks0.clone().and_then(|c0| {
            let missed = -exporter_missed_ms(c0, clocks(peer)?);
            let pause = tm.importer_pause().as_millis() as i64;
            println!("# importer paused: its clock missed {missed} ms of the exporter's");
            ensure(
                missed >= pause / 2,
                format!("this guest's clock missed {missed} ms of a {pause} ms pause"),
            )
        }),
        Fault::KillImporter => spawn(peer, tm).map(|c| child = c),
        // A new `rrdma serve` with new tokens.
        Fault::KillExporter => inject::tokens(peer, tm.recover).and_then(|tokens| {
            let pid = control(peer, "pid").map_err(|e| format!("pid: {e}"))?;
            ensure(
                old_token.is_some_and(|o| !tokens.contains(&format!("{o:#x}")))
                    && serve_pid.as_ref().is_some_and(|old| *old != pid),
                format!(
                    "tokens {tokens} (before {old_token:x?}), serve {pid} (before {serve_pid:?})"
                ),
            )
        }),
        Fault::LinkDelExporter => agent_cmd(peer, "linkadd"),
        Fault::LinkDelImporter => inject::link_add(dev_name, prov),
        // Refused: the module stayed, and serves.
        Fault::Rmmod => module_serves(peer).map(|_| ()),
    };
    t.check(&format!("{name}: undone"), healed);
    let t_heal = t_heal_req;
    let back = mon.watch(st, t_heal + tm.recover.as_nanos() as u64, || {
        st.threads[..CONNS * THREADS]
            .iter()
            .all(|th| th.last_ok_ns.load(SeqCst) > t_heal)
    });
    if back {
        row.back = Some(ms(now_ns() - t_heal));
    }
    t.check(
        &format!(
            "{name}: every connection works again within {} s",
            tm.recover.as_secs()
        ),
        ensure(back, "not all threads completed an operation"),
    );
    sleep(Duration::from_secs(1));
    let s2 = snap(st);
    let counters1 = device_counters(dev_name);
    if !counters1.is_empty() {
        println!(
            "# counters, {name}: importer's {dev_name}: {}",
            counters_moved(&counters0, &counters1)
        );
    }
    let _ = agent_cmd(peer, &format!("counters {} fault and recovery", f.key()));
    row.after = rate(s2.ok - s1.ok, t_heal, s2.at);
    row.noticed = mon.first_error.map(ms);
    row.stall = ms(mon.max_stall);
    if matches!(
        f,
        Fault::LinkDown | Fault::Pause | Fault::LinkDelExporter | Fault::LinkDelImporter
    ) {
        evidence = ensure(
            s2.errors > s0.errors || mon.max_stall >= tm.fault.as_nanos() as u64 / 2,
            format!("no error, longest stall {} ms", row.stall),
        );
    }
    if f == Fault::KillExporter {
        // The restored imports name the dead exporter's export.
        let k = libc::EKEYREVOKED as usize;
        evidence = ensure(
            s2.errnos[k] > s0.errnos[k],
            "no operation failed with EKEYREVOKED",
        );
    }
    if f == Fault::Rmmod {
        // Refused because in use, with operations completing across it.
        evidence = applied
            .clone()
            .map_err(|e| format!("not refused as in use: {e}"))
            .and_then(|()| {
                let refs = module_serves(peer)?;
                ensure(
                    s1.ok > s0.ok,
                    format!("{refs}; no operation completed during the fault"),
                )
            });
        t.check(
            "rmmod in flight: the workload saw no error",
            ensure(
                s2.errors == s0.errors,
                format!("{} errors", s2.errors - s0.errors),
            ),
        );
    }
    t.check(&format!("{name}: the fault acted"), evidence);

    // Errors by errno over the fault and the recovery.
    let mut errs = Vec::new();
    let mut foreign = Vec::new();
    for e in 0..ERRNOS {
        let n = s2.errnos[e] - s0.errnos[e];
        if n > 0 {
            errs.push(format!("{} {n}", errno_name(e)));
            if !CONNECTION_ERRNOS.contains(&(e as i32)) {
                foreign.push(errno_name(e));
            }
        }
    }
    row.errors = errs.join(", ");
    t.check(
        &format!("{name}: operations failed only with connection errnos"),
        ensure(foreign.is_empty(), format!("{foreign:?}")),
    );
    t.check(
        &format!("{name}: every read held its block's acknowledged write"),
        ensure(
            s2.mismatches == s0.mismatches,
            format!("{} mismatches", s2.mismatches - s0.mismatches),
        ),
    );

    // Stop, verify, and look at the exporter.
    st.stop.store(1, SeqCst);
    let stop_start = Instant::now();
    let stopped = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if stop_start.elapsed() < tm.stop => sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    t.check(
        &format!("{name}: the workload stops when asked"),
        ensure(
            stopped,
            format!("still running after {} s", tm.stop.as_secs()),
        ),
    );
    let verified = verify(dev, st, peer);
    let lost = match &verified {
        Ok((n, bad)) => {
            row.verified = *n;
            row.lost = bad.len() as u64;
            ensure(
                bad.is_empty(),
                bad.iter().take(3).cloned().collect::<Vec<_>>().join("; "),
            )
        }
        Err(e) => Err(e.clone()),
    };
    t.check(
        &format!(
            "{name}: no acknowledged write lost ({} blocks)",
            row.verified
        ),
        lost,
    );
    let ex_start = Instant::now();
    while exporter_live(peer) != Some(0) && ex_start.elapsed() < tm.exporter {
        sleep(Duration::from_millis(100));
    }
    let live = exporter_live(peer);
    t.check(
        &format!("{name}: the exporter ends every connection"),
        ensure(
            live == Some(0),
            format!("{live:?} live after {} s", tm.exporter.as_secs()),
        ),
    );
    let stuck = stuck_tasks();
    t.check(
        &format!("{name}: no task stuck in D state"),
        ensure(stuck.is_empty(), stuck.join(", ")),
    );
    row
}
