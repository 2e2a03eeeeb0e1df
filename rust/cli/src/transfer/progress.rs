// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The progress bar of `read`, `write` and `verify`.

use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

/// A progress bar on stderr, drawn at most ten times a second.
pub struct Progress {
    pub(super) total: u64,
    done: u64,
    start: Instant,
    last: Instant,
    on: bool,
}

impl Progress {
    /// A bar for `total` bytes; drawn if `force` or stderr is a terminal.
    pub fn new(total: u64, force: bool) -> Self {
        let now = Instant::now();
        Self {
            total,
            done: 0,
            start: now,
            last: now,
            on: force || io::stderr().is_terminal(),
        }
    }

    /// Adds `n` bytes.
    pub fn add(&mut self, n: u64) {
        self.done += n;
        if self.on && (self.last.elapsed() >= Duration::from_millis(100) || self.done >= self.total)
        {
            self.last = Instant::now();
            let frac = if self.total == 0 {
                1.0
            } else {
                self.done as f64 / self.total as f64
            };
            let width = 30;
            let fill = (frac * width as f64) as usize;
            let secs = self.start.elapsed().as_secs_f64().max(1e-9);
            eprint!(
                "\r[{}{}] {:5.1}% {:>10} bytes {:8.2} MB/s",
                "#".repeat(fill.min(width)),
                " ".repeat(width - fill.min(width)),
                frac * 100.0,
                self.done,
                self.done as f64 / secs / 1e6
            );
            if self.done >= self.total {
                eprintln!();
            }
        }
    }
}
