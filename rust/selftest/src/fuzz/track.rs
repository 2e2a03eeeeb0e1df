// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fuzzer's account of the operations it posts (rrdma.h SUBMIT: "Each
//! posted operation produces exactly one struct rrdma_completion, read
//! from the file"; the io_uring comment: one CQE per command).
//!
//! Every operation gets a user_data of its own. What SUBMIT posted (the
//! first `ret` operations) is in flight on its file until read(2) of that
//! file returns its record; a record for a user_data never posted, one
//! already completed, or read from another file is a finding. When the
//! last descriptor of a file is closed, its operations in flight are
//! dropped with it: none may come back on any other file. At the end, what
//! is still in flight on an open file is drained with a timeout, and what
//! never completes is a finding. Each record must also carry a documented
//! status, its operation's opcode and its bytes (0 on error).
//!
//! RW_SYNC's and io_uring's operations complete by their return value or
//! CQE, never through read(2): their user_data carries [`NO_RECORD`].
//!
//! A call whose descriptor was closed (and its number maybe reused) by
//! another thread during the call went to a file the run cannot name:
//! its operations may complete on any file, once.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrdma::abi::uapi::Completion;

use super::errnos::{Target, COMPLETION};
use super::Fuzz;

/// Set in the user_data of operations whose completion must never be a
/// read(2) record (RW_SYNC's, io_uring's).
pub(super) const NO_RECORD: u64 = 1 << 63;
/// The first user_data the run gives (never 0 or a small number).
const FIRST: u64 = 0x5eed_0000_0000;
/// How long the end of the run waits for operations still in flight.
const DRAIN: Duration = Duration::from_secs(20);
/// Findings kept (the rest are counted).
const KEEP: usize = 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    /// Its file was closed while it was in flight.
    Dropped,
    Done,
}

struct Posted {
    /// None: posted by a call whose file changed under it.
    file: Option<u64>,
    opcode: u32,
    /// count x block size, when the run knows the block size.
    bytes: Option<u64>,
    state: State,
}

/// Findings of one kind: the first [`KEEP`], and how many.
#[derive(Default)]
pub(super) struct Findings {
    pub(super) first: Vec<String>,
    pub(super) count: usize,
}

impl Findings {
    fn push(&mut self, f: String) {
        self.count += 1;
        if self.first.len() < KEEP {
            self.first.push(f);
        }
    }

    /// `Ok` if there are none, else how many and the first.
    pub(super) fn result(&self) -> Result<(), String> {
        match self.first.first() {
            None => Ok(()),
            Some(f) => Err(format!("{} findings, first: {f}", self.count)),
        }
    }
}

#[derive(Default)]
struct Inner {
    ops: HashMap<u64, Posted>,
    closed: BTreeSet<u64>,
    /// Lost, duplicate, unknown or misdirected completions.
    once: Findings,
    /// Records with an undocumented status, wrong opcode or bytes.
    records: Findings,
    completed: u64,
    dropped: u64,
    unnamed: u64,
    uring_posted: u64,
    uring_completed: u64,
    uring_unwaited: u64,
}

/// Operations posted and their completions.
pub(super) struct Tracker {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

/// Checks one completion's status, and its bytes when `want` is known
/// (rrdma.h `struct rrdma_completion`: bytes transferred, 0 on error).
pub(super) fn check_record(status: i32, bytes: u64, want: Option<u64>) -> Result<(), String> {
    if status != 0 && !COMPLETION.contains(&-status) {
        return Err(format!("undocumented status {status}"));
    }
    match (status, want) {
        (0, Some(w)) if bytes != w => Err(format!("{bytes} bytes, expected {w}")),
        (s, _) if s != 0 && bytes != 0 => Err(format!("status {s} with {bytes} bytes")),
        _ => Ok(()),
    }
}

impl Tracker {
    pub(super) fn new() -> Self {
        Tracker {
            next: AtomicU64::new(FIRST),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// A user_data no other operation of the run has.
    pub(super) fn user_data(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// SUBMIT on `target` posted `ops` (user_data, opcode, bytes).
    pub(super) fn posted(&self, target: Target, ops: &[(u64, u32, Option<u64>)]) {
        let mut t = self.inner.lock().unwrap();
        let file = match target {
            Target::Rrdma(f) => Some(f),
            _ => None,
        };
        for &(user_data, opcode, bytes) in ops {
            let state = match file {
                Some(f) if t.closed.contains(&f) => State::Dropped,
                _ => State::InFlight,
            };
            t.dropped += u64::from(state == State::Dropped);
            t.unnamed += u64::from(file.is_none());
            let p = Posted {
                file,
                opcode,
                bytes: bytes.filter(|_| file.is_some()),
                state,
            };
            if t.ops.insert(user_data, p).is_some() {
                t.once.push(format!(
                    "user_data {user_data:#x} posted twice (fuzzer bug)"
                ));
            }
        }
    }

    /// The last descriptor of `file` was closed: its operations in flight
    /// will never complete.
    pub(super) fn closed(&self, file: u64) {
        let mut t = self.inner.lock().unwrap();
        t.closed.insert(file);
        let mut n = 0;
        for p in t.ops.values_mut() {
            if p.file == Some(file) && p.state == State::InFlight {
                p.state = State::Dropped;
                n += 1;
            }
        }
        t.dropped += n;
    }

    /// read(2) on `target` returned `buf`.
    pub(super) fn records(&self, target: Target, buf: &[u8]) {
        let mut guard = self.inner.lock().unwrap();
        let t = &mut *guard;
        if !buf.len().is_multiple_of(Completion::SIZE) {
            t.records.push(format!(
                "read returned {} bytes, not whole records",
                buf.len()
            ));
        }
        let file = match target {
            Target::Rrdma(f) => Some(f),
            _ => None,
        };
        for rec in buf.chunks_exact(Completion::SIZE) {
            let c = Completion::decode(rec.try_into().unwrap());
            let ud = c.user_data;
            let Some(p) = t.ops.get_mut(&ud) else {
                let what = if ud & NO_RECORD != 0 {
                    "of an RW_SYNC or io_uring operation"
                } else {
                    "for a user_data never posted"
                };
                t.once
                    .push(format!("completion {what}: {ud:#x} ({file:?})"));
                continue;
            };
            let (posted_on, state, opcode, want) = (p.file, p.state, p.opcode, p.bytes);
            if state == State::Done {
                t.once.push(format!("second completion of {ud:#x}"));
                continue;
            }
            if let (Some(f), Some(pf)) = (file, posted_on) {
                if f != pf {
                    let how = if state == State::Dropped {
                        "closed"
                    } else {
                        "open"
                    };
                    t.once.push(format!(
                        "completion of {ud:#x} (posted on file {pf}, {how}) read from file {f}"
                    ));
                    continue;
                }
            }
            if let Some(p) = t.ops.get_mut(&ud) {
                p.state = State::Done;
            }
            t.completed += 1;
            let r = check_record(c.status, c.bytes, want).and_then(|()| {
                (c.opcode == opcode)
                    .then_some(())
                    .ok_or(format!("opcode {}, posted {opcode}", c.opcode))
            });
            if let Err(e) = r {
                t.records.push(format!("completion of {ud:#x}: {e}"));
            }
        }
    }

    /// Operations of `file` still in flight.
    pub(super) fn in_flight(&self, file: u64) -> usize {
        let t = self.inner.lock().unwrap();
        t.ops
            .values()
            .filter(|p| p.file == Some(file) && p.state == State::InFlight)
            .count()
    }

    /// One ring's account: `posted` commands accepted, `completed` CQEs
    /// seen, `unwaited` left to the ring's close; `findings` of it.
    pub(super) fn uring(&self, posted: u64, completed: u64, unwaited: u64, once: Vec<String>) {
        let mut t = self.inner.lock().unwrap();
        t.uring_posted += posted;
        t.uring_completed += completed;
        t.uring_unwaited += unwaited;
        for f in once {
            t.once.push(f);
        }
    }

    /// Records a finding about a record (an io_uring CQE's).
    pub(super) fn bad_record(&self, f: String) {
        self.inner.lock().unwrap().records.push(f);
    }

    /// The end: what is still in flight on `open` files never completed.
    /// Returns the summary line and both kinds of findings.
    pub(super) fn finish(&self, open: &BTreeSet<u64>) -> (String, Findings, Findings) {
        let mut t = self.inner.lock().unwrap();
        let lost: Vec<u64> = t
            .ops
            .iter()
            .filter(|(_, p)| {
                p.state == State::InFlight && p.file.is_some_and(|f| open.contains(&f))
            })
            .map(|(ud, _)| *ud)
            .collect();
        for ud in &lost {
            let f = t.ops[ud].file.unwrap_or(0);
            t.once.push(format!(
                "operation {ud:#x} on file {f} never completed ({} s drain)",
                DRAIN.as_secs()
            ));
        }
        let line = format!(
            "SUBMIT posted {} operations: {} completed, {} dropped with their file, {} on a \
             file replaced during the call, {} never completed; io_uring: {} commands, {} CQEs, \
             {} left to the ring's close",
            t.ops.len(),
            t.completed,
            t.dropped,
            t.unnamed,
            lost.len(),
            t.uring_posted,
            t.uring_completed,
            t.uring_unwaited
        );
        (
            line,
            std::mem::take(&mut t.once),
            std::mem::take(&mut t.records),
        )
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(user_data: u64, status: i32, opcode: u32, bytes: u64) -> Vec<u8> {
        let mut c = Completion::zeroed();
        c.user_data = user_data;
        c.status = status;
        c.opcode = opcode;
        c.bytes = bytes;
        c.encode().to_vec()
    }

    #[test]
    fn exactly_once_on_its_file() {
        let t = Tracker::new();
        let (a, b, c) = (t.user_data(), t.user_data(), t.user_data());
        t.posted(Target::Rrdma(1), &[(a, 2, Some(4096)), (b, 1, None)]);
        t.posted(Target::Rrdma(3), &[(c, 1, None)]);
        t.records(Target::Rrdma(1), &rec(a, 0, 2, 4096));
        assert_eq!(t.inner.lock().unwrap().once.count, 0);
        t.records(Target::Rrdma(1), &rec(a, 0, 2, 4096));
        t.records(Target::Rrdma(2), &rec(b, 0, 1, 512));
        t.records(Target::Rrdma(1), &rec(77, 0, 1, 512));
        t.records(Target::Rrdma(1), &rec(NO_RECORD | 5, 0, 1, 512));
        assert_eq!(t.inner.lock().unwrap().once.count, 4);
        // From a file the call cannot name: accepted once.
        t.records(Target::Unknown, &rec(b, -libc::ECANCELED, 1, 0));
        t.closed(1);
        let (_, once, records) = t.finish(&[3].into());
        assert_eq!(once.count, 5, "{:?}", once.first);
        assert!(once.first[4].contains("never completed"));
        assert_eq!(records.count, 0, "{:?}", records.first);
    }

    #[test]
    fn records_are_checked() {
        let t = Tracker::new();
        let ops: Vec<_> = (0..4).map(|_| (t.user_data(), 1, Some(8192))).collect();
        t.posted(Target::Rrdma(1), &ops);
        t.records(Target::Rrdma(1), &rec(ops[0].0, -libc::EPERM, 1, 0));
        t.records(Target::Rrdma(1), &rec(ops[1].0, 0, 2, 8192));
        t.records(Target::Rrdma(1), &rec(ops[2].0, 0, 1, 4096));
        t.records(Target::Rrdma(1), &rec(ops[3].0, -libc::EIO, 1, 4096));
        let (_, once, records) = t.finish(&[1].into());
        assert_eq!(once.count, 0, "{:?}", once.first);
        assert_eq!(records.count, 4, "{:?}", records.first);
    }

    #[test]
    fn closed_files_drop_their_operations() {
        let t = Tracker::new();
        let (a, b) = (t.user_data(), t.user_data());
        t.posted(Target::Rrdma(1), &[(a, 1, None)]);
        t.closed(1);
        // Posted by a call that raced the close.
        t.posted(Target::Rrdma(1), &[(b, 1, None)]);
        t.records(Target::Rrdma(2), &rec(a, 0, 1, 512));
        let (line, once, _) = t.finish(&[2].into());
        assert_eq!(once.count, 1, "{:?}", once.first);
        assert!(line.contains("2 dropped"), "{line}");
    }
}
