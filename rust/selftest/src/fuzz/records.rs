// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Reading completion records into the run's account ([`super::track`]):
//! once now and then during the run, and at its end until every open
//! file's operations have completed or [`DRAIN`] has passed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::Completion;

use super::track::{Findings, DRAIN};
use super::Fuzz;

impl Fuzz {
    /// Reads what the file `fd` holds (once, not blocking) into the
    /// account; returns the number of records.
    pub(super) fn read_records(&self, fd: i32) -> usize {
        let mut buf = vec![0u8; Completion::SIZE * 64];
        let before = self.named(fd);
        // SAFETY: `buf` is ours and `buf.len()` bytes long.
        let ret = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        let r = super::sys(ret as i64);
        let target = self.target(fd, before);
        self.note("read", target, r);
        if r.0 <= 0 {
            return 0;
        }
        self.track.records(target, &buf[..r.0 as usize]);
        r.0 as usize / Completion::SIZE
    }

    /// Before the files are closed at the end: reads every open file's
    /// completions until none of its operations is in flight (or
    /// [`DRAIN`] has passed), then reports what never completed.
    pub(super) fn drain(&self) -> (String, Findings, Findings) {
        // One descriptor per open file of /dev/rrdma.
        let files: Vec<(u64, i32)> = {
            let p = self.pool.lock().unwrap();
            let mut seen = BTreeSet::new();
            p.files
                .iter()
                .filter(|(_, i)| i.rrdma && seen.insert(i.file))
                .map(|(fd, i)| (i.file, *fd))
                .collect()
        };
        let start = Instant::now();
        loop {
            let mut waiting = 0;
            for &(file, fd) in &files {
                while self.read_records(fd) > 0 {}
                waiting += self.track.in_flight(file);
            }
            if waiting == 0 || start.elapsed() > DRAIN {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let open = files.iter().map(|f| f.0).collect();
        self.track.finish(&open)
    }
}
