// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `RW_SYNC` under a storm of signals: once posted, an operation is waited
//! for to its end. A signal used to end the wait with `ERESTARTSYS`: with
//! a handler without `SA_RESTART` the caller got `EINTR` while its READ was
//! still in flight (its bytes landing after the caller moved on); with
//! `SA_RESTART` the ioctl ran again and posted the operation a second time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rrdma::{RemoteRegion, Rrdma};

use crate::{ensure, expect_ok, Tap};

extern "C" fn on_signal(_: libc::c_int) {}

/// Sets `SIGUSR1`'s action: a handler without `SA_RESTART`, or (`None`)
/// ignored.
fn sigusr1(handler: Option<extern "C" fn(libc::c_int)>) {
    // SAFETY: a zeroed sigaction is valid; the handler does nothing, so
    // it is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler.map_or(libc::SIG_IGN, |h| h as usize);
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

pub(super) fn checks(dev: &Rrdma, t: &mut Tap, rw: &RemoteRegion<'_>) {
    let Ok(back) = expect_ok(dev.create_region(4096, 1)) else {
        return t.check("a region", Err("create".into()));
    };
    sigusr1(Some(on_signal));
    let done = AtomicBool::new(false);
    let reader_tid = AtomicU64::new(0);
    let (sent, res) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            // SAFETY: no preconditions.
            reader_tid.store(unsafe { libc::pthread_self() }, Ordering::SeqCst);
            let mut failed = Vec::new();
            for _ in 0..300 {
                if let Err(e) = rw.read(&back, 0, 0, 1) {
                    failed.push(e.to_string());
                }
            }
            done.store(true, Ordering::SeqCst);
            failed
        });
        while reader_tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let tid = reader_tid.load(Ordering::SeqCst);
        let mut sent = 0u32;
        while !done.load(Ordering::SeqCst) {
            // SAFETY: `tid` names the reader, alive until `done`.
            unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
            sent += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        (
            sent,
            reader.join().unwrap_or_else(|_| vec!["panicked".into()]),
        )
    });
    sigusr1(None);
    println!("# RW_SYNC under signals: {sent} SIGUSR1 during 300 READs");
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
        .and_then(|()| ensure(sent > 10, format!("only {sent} signals sent"))),
    );
}
