// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Caps on what one file and one user may hold: connections, regions and
//! exports (module parameters `max_file_*` and `max_user_*`).
//!
//! Each file keeps a [`Tally`] of what it holds, and so does each user (the
//! files one effective uid opened, together). A new object is charged to
//! both ([`charge`]): beyond the file's cap the call fails with `ENOSPC`,
//! beyond the user's with `EDQUOT`, and nothing is charged. The charge is
//! given back when the object ends: a connection when its teardown
//! unregisters it, an export at `UNEXPORT` or release, a region when its
//! pages are freed (after its handle and its last mapping are gone).
//!
//! The counts are atomics, taken without a lock: a charge adds one and
//! takes it back if the count it found was already at the cap, so however
//! many tasks charge at once, no more than the cap succeed.

use core::sync::atomic::{AtomicU32, Ordering};

use super::errno::{Errno, EDQUOT, ENOSPC};

/// The largest cap, and what a cap of 0 (none) stands for: the most
/// objects a file's handle table holds (`handle::MAX_OBJECTS`).
pub const CAP_MAX: u32 = 1 << 20;

/// A kind of object that is capped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A connection (connected, accepted or still being accepted).
    Conn,
    /// A region (created or registered), until its pages are freed.
    Region,
    /// An export, until it is unexported.
    Export,
}

impl Kind {
    /// Every kind, in [`Kind::index`] order.
    pub const ALL: [Kind; 3] = [Kind::Conn, Kind::Region, Kind::Export];

    /// The kind's index in a [`Tally`].
    pub const fn index(self) -> usize {
        match self {
            Kind::Conn => 0,
            Kind::Region => 1,
            Kind::Export => 2,
        }
    }

    /// What the log calls objects of the kind.
    pub const fn noun(self) -> &'static str {
        match self {
            Kind::Conn => "connections",
            Kind::Region => "regions",
            Kind::Export => "exports",
        }
    }

    /// The module parameter of the kind's cap per file (`user` false) or
    /// per user.
    pub const fn param(self, user: bool) -> &'static str {
        match (self, user) {
            (Kind::Conn, false) => "max_file_conns",
            (Kind::Region, false) => "max_file_regions",
            (Kind::Export, false) => "max_file_exports",
            (Kind::Conn, true) => "max_user_conns",
            (Kind::Region, true) => "max_user_regions",
            (Kind::Export, true) => "max_user_exports",
        }
    }
}

/// The cap a module parameter sets: 0 (none) and values above
/// [`CAP_MAX`] are [`CAP_MAX`].
pub const fn cap(param: u32) -> u32 {
    if param == 0 || param > CAP_MAX {
        CAP_MAX
    } else {
        param
    }
}

/// How many objects of each kind a file or a user holds.
pub struct Tally([AtomicU32; 3]);

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

impl Tally {
    /// Nothing held.
    pub const fn new() -> Self {
        Self([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)])
    }

    /// How many of `kind` are held.
    pub fn held(&self, kind: Kind) -> u32 {
        self.0[kind.index()].load(Ordering::Relaxed)
    }

    /// Counts one more of `kind` unless `cap` are held already; whether
    /// it did.
    pub fn take(&self, kind: Kind, cap: u32) -> bool {
        let n = &self.0[kind.index()];
        if n.fetch_add(1, Ordering::Relaxed) < cap {
            return true;
        }
        n.fetch_sub(1, Ordering::Relaxed);
        false
    }

    /// Counts one fewer of `kind` (taken before).
    pub fn give(&self, kind: Kind) {
        let n = &self.0[kind.index()];
        // Never below zero: a give without its take is a bug, not a wrap.
        let _ = n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
    }

    /// Whether nothing of any kind is held.
    pub fn is_empty(&self) -> bool {
        Kind::ALL.iter().all(|&k| self.held(k) == 0)
    }
}

/// Which cap a charge ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The kind charged.
    pub kind: Kind,
    /// Whether the user's cap (`EDQUOT`) refused it, not the file's.
    pub user: bool,
    /// The cap.
    pub cap: u32,
}

impl Refused {
    /// The errno the caller gets.
    pub const fn errno(self) -> Errno {
        if self.user {
            EDQUOT
        } else {
            ENOSPC
        }
    }
}

/// Charges one object of `kind` to `file` (cap `file_cap`) and `user` (cap
/// `user_cap`; `None`: no user, as a disk's connection has): both counts
/// grow, or neither does and the cap that refused is returned.
pub fn charge(
    kind: Kind,
    file: &Tally,
    file_cap: u32,
    user: Option<&Tally>,
    user_cap: u32,
) -> Result<(), Refused> {
    if !file.take(kind, file_cap) {
        return Err(Refused {
            kind,
            user: false,
            cap: file_cap,
        });
    }
    if let Some(u) = user {
        if !u.take(kind, user_cap) {
            file.give(kind);
            return Err(Refused {
                kind,
                user: true,
                cap: user_cap,
            });
        }
    }
    Ok(())
}

/// Gives back what [`charge`] took.
pub fn discharge(kind: Kind, file: &Tally, user: Option<&Tally>) {
    file.give(kind);
    if let Some(u) = user {
        u.give(kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_from_params() {
        assert_eq!(cap(0), CAP_MAX);
        assert_eq!(cap(1), 1);
        assert_eq!(cap(CAP_MAX), CAP_MAX);
        assert_eq!(cap(CAP_MAX + 1), CAP_MAX);
        assert_eq!(cap(u32::MAX), CAP_MAX);
        assert_eq!(CAP_MAX as usize, crate::handle::MAX_OBJECTS);
    }

    #[test]
    fn file_cap_then_user_cap() {
        let (f1, f2, u) = (Tally::new(), Tally::new(), Tally::new());
        // File 1 reaches its cap of 2: ENOSPC, and the user is not charged.
        assert_eq!(charge(Kind::Region, &f1, 2, Some(&u), 3), Ok(()));
        assert_eq!(charge(Kind::Region, &f1, 2, Some(&u), 3), Ok(()));
        let r = charge(Kind::Region, &f1, 2, Some(&u), 3).unwrap_err();
        assert_eq!((r.user, r.cap, r.errno()), (false, 2, ENOSPC));
        assert_eq!((f1.held(Kind::Region), u.held(Kind::Region)), (2, 2));
        // File 2 reaches the user's cap of 3: EDQUOT, and file 2 is given
        // back its charge.
        assert_eq!(charge(Kind::Region, &f2, 2, Some(&u), 3), Ok(()));
        let r = charge(Kind::Region, &f2, 2, Some(&u), 3).unwrap_err();
        assert_eq!((r.user, r.cap, r.errno()), (true, 3, EDQUOT));
        assert_eq!((f2.held(Kind::Region), u.held(Kind::Region)), (1, 3));
        // Other kinds are counted apart.
        assert_eq!(charge(Kind::Export, &f2, 2, Some(&u), 3), Ok(()));
        // A discharge makes room again.
        discharge(Kind::Region, &f1, Some(&u));
        assert_eq!(charge(Kind::Region, &f2, 2, Some(&u), 3), Ok(()));
        assert_eq!(u.held(Kind::Region), 3);
    }

    #[test]
    fn no_user_only_the_file_cap() {
        let f = Tally::new();
        assert_eq!(charge(Kind::Conn, &f, 1, None, 0), Ok(()));
        assert!(charge(Kind::Conn, &f, 1, None, 0).is_err());
        discharge(Kind::Conn, &f, None);
        assert!(f.is_empty());
    }

    #[test]
    fn give_never_wraps() {
        let t = Tally::new();
        t.give(Kind::Export);
        assert_eq!(t.held(Kind::Export), 0);
    }

    #[test]
    fn racing_charges_never_pass_the_cap() {
        extern crate std;
        use std::sync::Arc;
        let (f, u) = (Arc::new(Tally::new()), Arc::new(Tally::new()));
        let ok = Arc::new(AtomicU32::new(0));
        let threads: std::vec::Vec<_> = (0..8)
            .map(|i| {
                let (f, u, ok) = (f.clone(), u.clone(), ok.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        if charge(Kind::Conn, &f, 5000, Some(&u), 1234).is_ok() {
                            ok.fetch_add(1, Ordering::Relaxed);
                            if i % 2 == 0 {
                                discharge(Kind::Conn, &f, Some(&u));
                                ok.fetch_sub(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let held = ok.load(Ordering::Relaxed);
        assert_eq!(u.held(Kind::Conn), held);
        assert_eq!(f.held(Kind::Conn), held);
        assert!(held <= 1234);
    }
}
