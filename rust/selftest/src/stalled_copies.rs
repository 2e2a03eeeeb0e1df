// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Copies from or to user memory stalled on a userfaultfd page hold up
//! nothing else (item 5 of `attack`; `stalled-copies PEER_IP PROVIDER`,
//! tests/guest/attack.sh's argument `PROVIDER,stalled-copies`, runs it
//! alone).
//!
//! Each ioctl in turn gets an argument on a page that is never populated;
//! so do SUBMIT's operation array and read(2)'s buffer. Each check waits
//! until userfaultfd reports the call's access to its page (the call is
//! stalled there), runs the others (poll, fdinfo, an operation; for
//! read(2) also SUBMIT and a DISCONNECT), and requires that they finish
//! while the stalled call has still not returned. Then the page is
//! resolved with zeros and the stalled call must end as the
//! documentation says a zeroed argument ends (Documentation/rrdma.rst,
//! the errno tables), or, for read(2), with whole completion records.

use std::thread::sleep;
use std::time::{Duration, Instant};

use rrdma::abi::errno::{EAFNOSUPPORT, EINVAL, ENOENT};
use rrdma::abi::uapi::{Completion, Export, Op, Submit, ACCESS_READ, IOCTL_EXPORT, OP_READ};
use rrdma::{RemoteRegion, Rrdma};

use crate::remote::{addr, quiet, reap, token, T};
use crate::uffd::Stalled;
use crate::{ensure, Tap, ALL_IOCTLS};

/// The longest the others may take, and the longest a call may take to
/// reach its stalled page.
const BOUND: Duration = Duration::from_secs(10);

/// How each ioctl ends once its all-zero argument can be read: handle 0
/// and token 0 name nothing (`ENOENT`), block size 0, access 0 and count 0
/// are `EINVAL` (REGION_REGISTER's too), address family 0 is
/// `EAFNOSUPPORT`; GET_INFO asks for no
/// device entries and succeeds.
const ZEROED: [(&str, Option<i32>); 17] = [
    ("GET_INFO", None),
    ("REGION_CREATE", Some(EINVAL.get())),
    ("REGION_DESTROY", Some(ENOENT.get())),
    ("LISTEN", Some(EAFNOSUPPORT.get())),
    ("ACCEPT", Some(ENOENT.get())),
    ("CONNECT", Some(EAFNOSUPPORT.get())),
    ("DISCONNECT", Some(ENOENT.get())),
    ("EXPORT", Some(EINVAL.get())),
    ("UNEXPORT", Some(ENOENT.get())),
    ("IMPORT", Some(ENOENT.get())),
    ("UNIMPORT", Some(ENOENT.get())),
    ("UNLISTEN", Some(ENOENT.get())),
    ("SUBMIT", Some(EINVAL.get())),
    ("RW_SYNC", Some(ENOENT.get())),
    ("REGION_REGISTER", Some(EINVAL.get())),
    // Import 0 (as root: the capability check passes first).
    ("BLK_MAP", Some(ENOENT.get())),
    // Disk 0, which this test never maps.
    ("BLK_UNMAP", Some(ENOENT.get())),
];

/// What became of a call stalled on a page while others ran.
struct Held<R, O> {
    /// The others' verdict: they ran and finished while the call was
    /// stalled, and it had not returned by then.
    verdict: Result<O, String>,
    /// The call's result once the page was released.
    result: Option<R>,
}

/// Starts `call`, waits until its access to page `i` of `stalled` is
/// reported, runs `others` (at most [`BOUND`]) and notes whether `call`
/// was still waiting when they finished; then resolves the page and
/// collects `call`'s result.
fn hold<R: Send, O: Send>(
    stalled: &Stalled,
    i: usize,
    call: impl FnOnce() -> R + Send,
    others: impl FnOnce() -> Result<O, String> + Send,
) -> Held<R, O> {
    std::thread::scope(|s| {
        let h = s.spawn(call);
        let verdict = stalled.wait_fault(i, BOUND).map(|()| {
            let o = s.spawn(others);
            let start = Instant::now();
            while !o.is_finished() && start.elapsed() < BOUND {
                sleep(Duration::from_millis(20));
            }
            // Together: the others are done, and the call is not.
            let (done, pending) = (o.is_finished(), !h.is_finished());
            (o, done, pending)
        });
        let released = stalled.release(i);
        let verdict = verdict.and_then(|(o, done, pending)| {
            let said = o.join().unwrap_or_else(|_| Err("panicked".into()));
            ensure(
                done,
                format!(
                    "held up for {} s, until the page was released",
                    BOUND.as_secs()
                ),
            )?;
            let said = said?;
            ensure(
                pending,
                "the stalled call returned while the others ran: it was not held",
            )?;
            Ok(said)
        });
        let result = h.join().ok();
        Held {
            verdict: verdict.and_then(|o| released.map(|()| o)),
            result,
        }
    })
}

/// How an ioctl ended against how it should: `want` `None` for success.
fn ends_as(got: &Option<std::io::Result<()>>, want: Option<i32>) -> Result<(), String> {
    let got = got.as_ref().ok_or("the call panicked")?;
    let errno = got.as_ref().err().map(|e| rrdma::errno(e).unwrap_or(0));
    ensure(
        errno == want,
        format!(
            "ended with {got:?}, not {}",
            want.map_or("success".into(), |e| std::io::Error::from_raw_os_error(e)
                .to_string())
        ),
    )
}

pub(crate) fn checks(dev: &Rrdma, t: &mut Tap, peer: &str, rw: &RemoteRegion<'_>) {
    let local = dev.create_region(4096, 8).expect("region");
    let stalled = match Stalled::new(24) {
        Ok(s) => s,
        Err(e) => return t.check("userfaultfd", Err(e)),
    };
    // The others must go on: poll(0), fdinfo, RW_SYNC.
    let others_proceed = || -> Result<(), String> {
        let mut pfd = libc::pollfd {
            fd: dev.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 0) };
        dev.fdinfo().map_err(|e| format!("fdinfo: {e}"))?;
        rw.read(&local, 0, 0, 1)
            .map_err(|e| format!("RW_SYNC: {e}"))
    };
    for (i, ((name, cmd), (zname, want))) in ALL_IOCTLS.iter().zip(ZEROED).enumerate() {
        assert_eq!(*name, zname);
        let a = stalled.addr(i);
        // SAFETY: a stalled page of ours; released by `hold`.
        let held = hold(
            &stalled,
            i,
            move || unsafe { dev.ioctl_raw(*cmd, a) },
            others_proceed,
        );
        t.check(
            &format!("{name} stalled reading its argument holds up nothing"),
            held.verdict,
        );
        t.check(
            &format!("... and once its page is released, {name} ends as a zeroed argument should"),
            ends_as(&held.result, want),
        );
    }
    // SUBMIT's operation array on a stalled page: once released, an
    // operation of zeros names import 0, which is nothing.
    // The pages after the arguments' (one per command).
    let ops_page = ALL_IOCTLS.len();
    let ops_at = stalled.addr(ops_page);
    let submit = move || {
        dev.submit_raw(&Submit {
            ops: ops_at,
            count: 1,
            op_size: Op::SIZE as u32,
            ..Submit::zeroed()
        })
        .map(|_| ())
    };
    let held = hold(&stalled, ops_page, submit, others_proceed);
    t.check(
        "SUBMIT stalled reading its operations holds up nothing",
        held.verdict,
    );
    t.check(
        "... and once the page is released, SUBMIT refuses the zeroed operation with ENOENT",
        ends_as(&held.result, Some(ENOENT.get())),
    );
    read_checks(dev, t, peer, rw, &local, &stalled, ops_page + 1);
    t.check(
        "EXPORT whose answer's copy stalls, its region destroyed meanwhile: not both succeed",
        export_races_destroy(dev),
    );
}

/// EXPORT with its argument on a write-protected page (read, then its
/// answer's copy stalls) while REGION_DESTROY destroys the region: one of
/// them fails. (Until 2026-12-01 EXPORT looked the region up, let the
/// lock go and stalled in the copy before its insert: the destroy
/// returned 0, and the export was made anyway.)
fn export_races_destroy(dev: &Rrdma) -> Result<(), String> {
    let region = dev.create_region(4096, 1).map_err(|e| e.to_string())?;
    let handle = region.handle();
    let arg = Export {
        region: handle,
        access: ACCESS_READ,
        ..Export::zeroed()
    };
    let stalled = Stalled::write_protected(&arg.encode())?;
    let a = stalled.addr(0);
    // SAFETY: our write-protected page; `hold` lifts the protection.
    let export = move || unsafe { dev.ioctl_raw(IOCTL_EXPORT, a) };
    let destroy = || {
        dev.region_destroy_raw(handle, 0)
            .map_err(|e| format!("REGION_DESTROY: {e}"))
    };
    let held = hold(&stalled, 0, export, destroy);
    let exported = held.result.as_ref().is_some_and(|r| r.is_ok());
    if exported {
        // Not left behind for the checks after this one.
        let mut back = [0u8; Export::SIZE];
        // SAFETY: reads the page's first bytes, ours.
        unsafe { std::ptr::copy_nonoverlapping(a as *const u8, back.as_mut_ptr(), back.len()) };
        let _ = dev.unexport_raw(Export::decode(&back).token, 0);
    }
    drop(region);
    match held.verdict {
        Ok(()) => ensure(
            !exported,
            "REGION_DESTROY returned 0 while EXPORT of the region stalled, and the export was made",
        ),
        // The stall never came, or the destroy did not run while it
        // lasted: nothing was tested.
        Err(e) => Err(e),
    }
}

/// read(2) into a stalled buffer, with completions waiting: poll, fdinfo,
/// SUBMIT, DISCONNECT of another connection and the delivery of every
/// completion exactly once.
fn read_checks(
    dev: &Rrdma,
    t: &mut Tap,
    peer: &str,
    rw: &RemoteRegion<'_>,
    local: &rrdma::Region<'_>,
    stalled: &Stalled,
    buf_page: usize,
) {
    let buf_at = stalled.addr(buf_page);
    let posted = dev
        .submit(
            &(0..4)
                .map(|i| rw.op(OP_READ, local, i, i, 1, 1000 + i))
                .collect::<Vec<_>>(),
        )
        .unwrap_or(0);
    let read = move || {
        // SAFETY: the buffer is our stalled page.
        unsafe {
            libc::read(
                dev.raw_fd(),
                buf_at as *mut libc::c_void,
                4 * Completion::SIZE,
            )
        }
    };
    let others = || -> Result<u64, String> {
        let mut pfd = libc::pollfd {
            fd: dev.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 0) };
        dev.fdinfo().map_err(|e| format!("fdinfo: {e}"))?;
        let extra = dev
            .submit(&[rw.op(OP_READ, local, 5, 5, 1, 2000)])
            .map_err(|e| format!("SUBMIT: {e}"))?;
        let other = dev
            .connect(addr(peer, 7471), T)
            .map_err(|e| e.to_string())?;
        other.disconnect().map_err(|e| format!("DISCONNECT: {e}"))?;
        Ok(extra as u64)
    };
    let held = hold(stalled, buf_page, read, others);
    let n = held.result.unwrap_or(-1);
    let mut ids: Vec<u64> = Vec::new();
    if n > 0 {
        for k in 0..n as usize / Completion::SIZE {
            // SAFETY: the read filled these bytes of our (now present) page.
            let rec = unsafe {
                std::slice::from_raw_parts(
                    (buf_at as usize + k * Completion::SIZE) as *const u8,
                    Completion::SIZE,
                )
            };
            let mut b = [0u8; Completion::SIZE];
            b.copy_from_slice(rec);
            ids.push(Completion::decode(&b).user_data);
        }
    }
    let want = posted as u64 + held.verdict.as_ref().copied().unwrap_or(0);
    let rest = reap(dev, (want as usize).saturating_sub(ids.len())).unwrap_or_default();
    ids.extend(rest.iter().map(|c| c.user_data));
    let mut uniq = ids.clone();
    uniq.sort_unstable();
    uniq.dedup();
    t.check(
        "read(2) stalled on its buffer holds up poll, fdinfo, SUBMIT and DISCONNECT",
        held.verdict.map(|_| ()),
    );
    t.check(
        "... and once its page is released, read(2) returns whole completion records",
        ensure(
            n >= Completion::SIZE as isize && (n as usize).is_multiple_of(Completion::SIZE),
            format!("read(2) returned {n}"),
        ),
    );
    t.check(
        "... and every completion is delivered exactly once",
        ensure(
            ids.len() as u64 == want && uniq.len() == ids.len() && quiet(dev, 300).is_ok(),
            format!(
                "{} delivered ({} distinct) of {want}",
                ids.len(),
                uniq.len()
            ),
        ),
    );
}

/// `stalled-copies PEER_IP PROVIDER`: the checks alone, on a connection
/// and import of their own.
pub(crate) fn run(dev: &Rrdma, t: &mut Tap, peer: &str) {
    let res = (|| -> Result<_, String> {
        let tok = token(peer, "rw").map_err(|e| format!("token: {e}"))?;
        let conn = dev
            .connect(addr(peer, 7471), T)
            .map_err(|e| format!("connect: {e}"))?;
        Ok((tok, conn))
    })();
    let (tok, conn) = match res {
        Ok(x) => x,
        Err(e) => return t.check("connect to the peer", Err(e)),
    };
    match conn.import(tok, T) {
        Ok(rw) => checks(dev, t, peer, &rw),
        Err(e) => t.check("import", Err(e.to_string())),
    }
}
