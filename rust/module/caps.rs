// SPDX-License-Identifier: GPL-2.0

//! Caps on the connections, regions and exports a file and a user hold
//! (module parameters `max_file_*` and `max_user_*`; the counting is
//! `abi::caps`).
//!
//! A file's [`Charges`] count what it holds; the files one effective uid
//! opened share that user's count, found in [`Users`] (module-wide, in the
//! `Context`) when the file is opened and left when the file's last charge
//! goes. What holds a charge:
//! - a connection, from its registration in its file's registry
//!   (`Shared::register`) to its removal;
//! - a region, for as long as its memory lives (`Region`), as its
//!   `RLIMIT_MEMLOCK` charge does;
//! - an export, while it is in its file's table (`Exports`).

use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Arc;

use crate::abi::caps::{charge, discharge, Kind, Tally};
use crate::abi::errno::Errno;
use crate::context::Context;
use crate::ffi::{self, warn_user};

/// One user's count, and how many [`Charges`] (files) share it.
struct UserEntry {
    files: u32,
    tally: Arc<Tally>,
}

/// The users whose files hold charges, by kuid. Lives in a softirq-safe
/// lock (`Context::users`): a file's last charge may go where a
/// completion dropped the last reference to what held it.
pub(crate) struct Users(RBTree<u32, UserEntry>);

impl Users {
    /// No users.
    pub(crate) fn new() -> Self {
        Self(RBTree::new())
    }
}

/// A file's share of its user's count.
struct UserRef {
    context: Arc<Context>,
    kuid: u32,
    tally: Arc<Tally>,
}

impl UserRef {
    /// Joins the count of user `kuid` (process context: allocates).
    fn join(context: &Arc<Context>, kuid: u32) -> Result<Self> {
        // Allocated before the lock, in case the user is new.
        let fresh = Arc::new(Tally::new(), GFP_KERNEL)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let tally = {
            let mut users = context.users.lock();
            match users.0.get_mut(&kuid) {
                Some(e) => {
                    e.files += 1;
                    e.tally.clone()
                }
                None => {
                    let entry = UserEntry {
                        files: 1,
                        tally: fresh.clone(),
                    };
                    users.0.insert(node.into_node(kuid, entry));
                    fresh
                }
            }
        };
        Ok(Self {
            context: context.clone(),
            kuid,
            tally,
        })
    }
}

impl Drop for UserRef {
    fn drop(&mut self) {
        let gone = {
            let mut users = self.context.users.lock();
            match users.0.get_mut(&self.kuid) {
                Some(e) if e.files > 1 => {
                    e.files -= 1;
                    None
                }
                _ => users.0.remove(&self.kuid),
            }
        };
        // Freed outside the lock.
        drop(gone);
    }
}

/// What one file holds, charged to it and to its user.
pub(crate) struct Charges {
    file: Tally,
    /// `None` for a disk's connection: no user opened it.
    user: Option<UserRef>,
}

impl Charges {
    /// The charges of a file opened by the user `kuid` (`None`: a disk's
    /// connection, capped by the file caps only).
    pub(crate) fn new(context: &Arc<Context>, kuid: Option<u32>) -> Result<Arc<Self>> {
        let user = kuid.map(|k| UserRef::join(context, k)).transpose()?;
        Ok(Arc::new(
            Self {
                file: Tally::new(),
                user,
            },
            GFP_KERNEL,
        )?)
    }

    fn user_tally(&self) -> Option<&Tally> {
        self.user.as_ref().map(|u| &*u.tally)
    }

    /// Charges one object of `kind` (`what`: the call, for the log; `None`
    /// when the caller's own line says why): `ENOSPC` beyond the file's
    /// cap, `EDQUOT` beyond the user's, with a rate-limited line that names
    /// the module parameter.
    pub(crate) fn take(&self, kind: Kind, what: Option<&str>) -> Result<(), Errno> {
        let file_cap = ffi::cap(kind, false);
        let user_cap = ffi::cap(kind, true);
        charge(kind, &self.file, file_cap, self.user_tally(), user_cap).map_err(|r| {
            let Some(what) = what else {
                return r.errno();
            };
            warn_user!(
                "{}: the {} {} {} already, its cap ({}): errno {}\n",
                what,
                if r.user {
                    "user's files hold"
                } else {
                    "file holds"
                },
                r.cap,
                kind.noun(),
                kind.param(r.user),
                r.errno().get()
            );
            r.errno()
        })
    }

    /// Gives back one charge of `kind` taken by [`Charges::take`].
    pub(crate) fn give(&self, kind: Kind) {
        discharge(kind, &self.file, self.user_tally());
    }

    /// A charge of `kind`, given back when the returned token drops.
    pub(crate) fn token(self: &Arc<Self>, kind: Kind, what: &str) -> Result<Charge, Errno> {
        self.take(kind, Some(what))?;
        Ok(Charge {
            charges: self.clone(),
            kind,
        })
    }
}

/// One charge, held by the object it counts; given back on drop.
pub(crate) struct Charge {
    charges: Arc<Charges>,
    kind: Kind,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.charges.give(self.kind);
    }
}
