// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fuzzer's account of the operations it posts (rrdma.h SUBMIT: "Each
//! posted operation produces exactly one struct rrdma_completion, read
//! from the file"; the io_uring comment: one CQE per command).
//!
//! Every operation gets a user_data of its own. The operations of a
//! SUBMIT are announced before the call ([`Tracker::announce`]): another
//! thread may read a completion before the call has returned (a fence
//! with nothing to wait for completes during the call). Once it returns,
//! what SUBMIT posted (the first `ret` operations) is in flight on its
//! file until read(2) of that file returns its record, and the rest is
//! forgotten ([`Tracker::settle`]); a record for a user_data never posted
//! (or announced and then not posted), one already completed, or read
//! from another file is a finding. When the
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
use std::time::Duration;

use rrdma::abi::uapi::Completion;

use super::errnos::{Target, COMPLETION};

/// Set in the user_data of operations whose completion must never be a
/// read(2) record (RW_SYNC's, io_uring's).
pub(super) const NO_RECORD: u64 = 1 << 63;
/// The first user_data the run gives (never 0 or a small number).
const FIRST: u64 = 0x5eed_0000_0000;
/// How long the end of the run waits for operations still in flight.
pub(super) const DRAIN: Duration = Duration::from_secs(20);
/// Findings kept (the rest are counted).
const KEEP: usize = 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Announced; its SUBMIT has not returned.
    Announced,
    /// Announced, and its record was read (from the file named, if any)
    /// before its SUBMIT returned: checked once it has.
    Early(Option<u64>, Completion),
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
    /// Completions read before their SUBMIT had returned.
    early: u64,
    dropped: u64,
    unnamed: u64,
    uring_posted: u64,
    uring_completed: u64,
    uring_unwaited: u64,
}

impl Inner {
    /// The record `c`, read from `file` (None: a file the call cannot
    /// name), of an operation; whether it completed it.
    fn complete(&mut self, file: Option<u64>, c: &Completion) -> bool {
        let ud = c.user_data;
        let Some(p) = self.ops.get_mut(&ud) else {
            let what = if ud & NO_RECORD != 0 {
                "of an RW_SYNC or io_uring operation"
            } else {
                "for a user_data never posted"
            };
            self.once
                .push(format!("completion {what}: {ud:#x} ({file:?})"));
            return false;
        };
        let (posted_on, state, opcode, want) = (p.file, p.state, p.opcode, p.bytes);
        match state {
            State::Done | State::Early(..) => {
                self.once.push(format!("second completion of {ud:#x}"));
                return false;
            }
            State::Announced => {
                p.state = State::Early(file, *c);
                return false;
            }
            State::InFlight | State::Dropped => {}
        }
        if let (Some(f), Some(pf)) = (file, posted_on) {
            if f != pf {
                let how = if state == State::Dropped {
                    "closed"
                } else {
                    "open"
                };
                self.once.push(format!(
                    "completion of {ud:#x} (posted on file {pf}, {how}) read from file {f}"
                ));
                return false;
            }
        }
        p.state = State::Done;
        self.completed += 1;
        let r = check_record(c.status, c.bytes, want).and_then(|()| {
            (c.opcode == opcode)
                .then_some(())
                .ok_or(format!("opcode {}, posted {opcode}", c.opcode))
        });
        if let Err(e) = r {
            self.records.push(format!("completion of {ud:#x}: {e}"));
        }
        true
    }
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

    /// A SUBMIT of `ops` (user_data, opcode, bytes) is about to be made;
    /// which file it goes to is known once it returns.
    pub(super) fn announce(&self, ops: &[(u64, u32, Option<u64>)]) {
        let mut t = self.inner.lock().unwrap();
        for &(user_data, opcode, bytes) in ops {
            let p = Posted {
                file: None,
                opcode,
                bytes,
                state: State::Announced,
            };
            if t.ops.insert(user_data, p).is_some() {
                t.once.push(format!(
                    "user_data {user_data:#x} posted twice (fuzzer bug)"
                ));
            }
        }
    }

    /// The SUBMIT of `ops` (announced) went to `target` and posted the
    /// first `posted` of them; the rest are forgotten. A record read
    /// meanwhile is checked now.
    pub(super) fn settle(&self, target: Target, ops: &[(u64, u32, Option<u64>)], posted: usize) {
        let mut guard = self.inner.lock().unwrap();
        let t = &mut *guard;
        let file = match target {
            Target::Rrdma(f) => Some(f),
            _ => None,
        };
        for (i, &(user_data, ..)) in ops.iter().enumerate() {
            let Some(p) = t.ops.get_mut(&user_data) else {
                continue;
            };
            let early = match p.state {
                State::Early(from, c) => Some((from, c)),
                _ => None,
            };
            if i >= posted {
                t.ops.remove(&user_data);
                if let Some((from, _)) = early {
                    t.once.push(format!(
                        "completion of {user_data:#x} ({from:?}), which SUBMIT did not post"
                    ));
                }
                continue;
            }
            // Its file was closed, or replaced, during the call.
            let dropped = file.is_some_and(|f| t.closed.contains(&f));
            p.state = if dropped {
                State::Dropped
            } else {
                State::InFlight
            };
            p.file = file;
            if file.is_none() {
                p.bytes = None;
            }
            t.unnamed += u64::from(file.is_none());
            match early {
                Some((from, c)) => {
                    if t.complete(from, &c) {
                        t.early += 1;
                    }
                }
                None => t.dropped += u64::from(dropped),
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
            t.complete(file, &Completion::decode(rec.try_into().unwrap()));
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
        let unsettled: Vec<u64> = t
            .ops
            .iter()
            .filter(|(_, p)| matches!(p.state, State::Announced | State::Early(..)))
            .map(|(ud, _)| *ud)
            .collect();
        for ud in &unsettled {
            t.once.push(format!(
                "operation {ud:#x} announced, never settled (fuzzer bug)"
            ));
        }
        for ud in &lost {
            let f = t.ops[ud].file.unwrap_or(0);
            t.once.push(format!(
                "operation {ud:#x} on file {f} never completed ({} s drain)",
                DRAIN.as_secs()
            ));
        }
        let line = format!(
            "SUBMIT posted {} operations: {} completed ({} read before their SUBMIT returned), \
             {} dropped with their file, {} on a file replaced during the call, {} never \
             completed; io_uring: {} commands, {} CQEs, {} left to the ring's close",
            t.ops.len(),
            t.completed,
            t.early,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A SUBMIT of `ops` on `target` that posted them all.
    fn post(t: &Tracker, target: Target, ops: &[(u64, u32, Option<u64>)]) {
        t.announce(ops);
        t.settle(target, ops, ops.len());
    }

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
        post(&t, Target::Rrdma(1), &[(a, 2, Some(4096)), (b, 1, None)]);
        post(&t, Target::Rrdma(3), &[(c, 1, None)]);
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
        post(&t, Target::Rrdma(1), &ops);
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
        post(&t, Target::Rrdma(1), &[(a, 1, None)]);
        t.closed(1);
        // Posted by a call that raced the close.
        post(&t, Target::Rrdma(1), &[(b, 1, None)]);
        t.records(Target::Rrdma(2), &rec(a, 0, 1, 512));
        let (line, once, _) = t.finish(&[2].into());
        assert_eq!(once.count, 1, "{:?}", once.first);
        assert!(line.contains("2 dropped"), "{line}");
    }

    #[test]
    fn a_record_read_before_its_submit_returned() {
        let t = Tracker::new();
        let ops: Vec<_> = (0..3).map(|_| (t.user_data(), 1, Some(4096))).collect();
        t.announce(&ops);
        // Another thread reads two records while the call runs.
        t.records(Target::Rrdma(1), &rec(ops[0].0, 0, 1, 4096));
        t.records(Target::Rrdma(1), &rec(ops[2].0, 0, 1, 4096));
        assert_eq!(t.inner.lock().unwrap().once.count, 0);
        // SUBMIT posted two: the third's record is a finding.
        t.settle(Target::Rrdma(1), &ops, 2);
        t.records(Target::Rrdma(1), &rec(ops[1].0, 0, 1, 4096));
        let (line, once, records) = t.finish(&[1].into());
        assert_eq!(once.count, 1, "{:?}", once.first);
        assert!(once.first[0].contains("did not post"), "{:?}", once.first);
        assert_eq!(records.count, 0, "{:?}", records.first);
        assert!(line.contains("2 completed"), "{line}");
        // An early record is checked once the call returns: bytes, file.
        let t = Tracker::new();
        let ops: Vec<_> = (0..2).map(|_| (t.user_data(), 1, Some(4096))).collect();
        t.announce(&ops);
        t.records(Target::Rrdma(1), &rec(ops[0].0, 0, 1, 512));
        t.records(Target::Rrdma(2), &rec(ops[1].0, 0, 1, 4096));
        t.settle(Target::Rrdma(1), &ops, 2);
        let (_, once, records) = t.finish(&[1].into());
        // Misdirected, and so never completed on its own file.
        assert_eq!(once.count, 2, "{:?}", once.first);
        assert!(
            once.first[0].contains("read from file 2"),
            "{:?}",
            once.first
        );
        assert_eq!(records.count, 1, "{:?}", records.first);
        // Read early, its file closed before the call settled: completed
        // once, not also dropped; one never settled is a fuzzer bug.
        let t = Tracker::new();
        let ops = [
            (t.user_data(), 1, Some(4096)),
            (t.user_data(), 1, Some(4096)),
        ];
        t.announce(&ops);
        t.records(Target::Rrdma(1), &rec(ops[0].0, 0, 1, 4096));
        t.closed(1);
        t.settle(Target::Rrdma(1), &ops[..1], 1);
        let (line, once, records) = t.finish(&[].into());
        assert!(line.contains("1 completed (1 read before"), "{line}");
        assert!(line.contains("0 dropped"), "{line}");
        assert_eq!(once.count, 1, "{:?}", once.first);
        assert!(once.first[0].contains("never settled"), "{:?}", once.first);
        assert_eq!(records.count, 0, "{:?}", records.first);
    }
}
