// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RW_SYNC` under a storm of signals: once posted, an operation is waited
//! for to its end. A signal used to end the wait with `ERESTARTSYS`: with
//! a handler without `SA_RESTART` the caller got `EINTR` while its READ was
//! still in flight (its bytes landing after the caller moved on); with
//! `SA_RESTART` the ioctl ran again and posted the operation a second time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrdma::{RemoteRegion, Rrdma};

use crate::{ensure, expect_ok, Tap};

/// Signals the handler caught.
static CAUGHT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    // An atomic add is async-signal-safe.
    CAUGHT.fetch_add(1, Ordering::Relaxed);
}

/// Sets `SIGUSR1`'s action to `on_signal`, without `SA_RESTART`; returns
/// the previous action.
fn catch_sigusr1() -> libc::sigaction {
    // SAFETY: a zeroed sigaction is valid; the handler is
    // async-signal-safe; `old` is written by the call.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGUSR1, &sa, &mut old);
        old
    }
}

pub(super) fn checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let Ok(back) = expect_ok(dev.create_region(4096, 1)) else {
        return t.check("a region", Err("create".into()));
    };
    let old = catch_sigusr1();
    CAUGHT.store(0, Ordering::Relaxed);
    let done = AtomicBool::new(false);
    let reader_tid: Mutex<Option<libc::pthread_t>> = Mutex::new(None);
    let (sent, res) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            // SAFETY: no preconditions.
            *reader_tid.lock().unwrap() = Some(unsafe { libc::pthread_self() });
            let mut failed = Vec::new();
            for _ in 0..300 {
                if let Err(e) = rw.read(&back, 0, 0, 1) {
                    failed.push(e.to_string());
                }
            }
            done.store(true, Ordering::SeqCst);
            failed
        });
        let until = Instant::now() + Duration::from_secs(10);
        let tid = loop {
            if let Some(tid) = *reader_tid.lock().unwrap() {
                break Some(tid);
            }
            if Instant::now() > until || reader.is_finished() {
                break None;
            }
            std::thread::yield_now();
        };
        let mut sent = 0u32;
        while let Some(tid) = tid.filter(|_| !done.load(Ordering::SeqCst) && !reader.is_finished())
        {
            // SAFETY: `tid` names the reader, which has not returned.
            unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
            sent += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        (
            sent,
            reader.join().unwrap_or_else(|_| vec!["panicked".into()]),
        )
    });
    // SAFETY: `old` is the action `catch_sigusr1` replaced.
    unsafe { libc::sigaction(libc::SIGUSR1, &old, std::ptr::null_mut()) };
    let caught = CAUGHT.load(Ordering::Relaxed);
    println!("# RW_SYNC under signals: {sent} SIGUSR1 sent, {caught} caught during 300 READs");
    t.check(
        "RW_SYNC: 300 READs under a signal every 200 us (no SA_RESTART): none ended by one",
        ensure(
            res.is_empty(),
            format!(
                "{} failed, first: {}",
                res.len(),
                res.first().map_or("", |s| s.as_str())
            ),
        )
        .and_then(|()| {
            ensure(
                caught > 10,
                format!("only {caught} signals caught ({sent} sent)"),
            )
        }),
    );
}
