// SPDX-License-Identifier: GPL-2.0

//! When a connection's data lanes open (`lanes.rs` connects them): at the
//! first operation that could take one, on the active side; at the passive
//! side's first (wire version 6), which asks the active side for them
//! (`Ctrl::LanesWanted`) through the lanes work; or at the active side's
//! establishment, when that ask came first.

use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, WorkItem};

use super::{ctrl::answer, Conn, ConnInner};
use crate::abi::wire::{self, Ctrl};
use crate::ffi;

impl_has_work! {
    impl HasWork<Self, 4> for Conn { self.lanes_work }
}

/// Opens the lanes an operation asked for ([`Conn::path_for_ops`]).
impl WorkItem<4> for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        Conn::scoped(this, |this| {
            let mut g = this.inner.lock();
            // Still established, and not opened since (a reconnect in
            // between asks again with its own first operation).
            if !(g.state.is_connected() && g.paths.len() == 1 && g.lanes > 0) {
                return;
            }
            if this.active {
                this.open_lanes(&mut g);
            } else if let Err(e) = answer(&mut g, &this.shared.ctrl, Ctrl::LanesWanted) {
                // The next operation asks again; this one stays on the
                // connection's own queue pair.
                g.lanes_deferred = true;
                crate::ffi::warn_user!("cannot ask the peer for data lanes: errno {}\n", e.get());
            }
        });
    }
}

impl Conn {
    /// Whether this connection's first operation has its lanes opened:
    /// any granted on the active side; on the passive side, those a peer
    /// that takes [`Ctrl::LanesWanted`] granted (`g.version` is the
    /// negotiated one from the connect request on).
    pub(super) fn ops_open_lanes(&self, g: &ConnInner) -> bool {
        g.lanes > 0 && (self.active || g.version >= wire::LANES_WANTED_VERSION)
    }

    /// The passive side asks for the lanes ([`Ctrl::LanesWanted`]): the
    /// active side opens them as for its own first operation, once, or at
    /// its establishment if the ask came first (on iWARP the passive side
    /// is established first, and a receive can be handled before the
    /// active side's event); `false` if this side is the passive one (the
    /// peer broke the protocol).
    pub(super) fn lanes_wanted(self: &Arc<Self>) -> bool {
        if !self.active {
            return false;
        }
        if self.shared.backs_disk() {
            // A disk opens the lanes its requests use itself (none on
            // iWARP): the peer cannot tell it is one.
            return true;
        }
        let mut g = self.inner.lock();
        match g.state.is_connected() {
            true => self.open_deferred_lanes(&mut g),
            false => g.lanes_asked = true,
        }
        true
    }

    /// Has the lanes work open the lanes if they wait for a first
    /// operation (once per establishment).
    pub(super) fn open_deferred_lanes(self: &Arc<Self>, g: &mut ConnInner) {
        if g.lanes_deferred {
            g.lanes_deferred = false;
            // Queued already: that run opens them.
            let _ = ffi::wq().enqueue::<Arc<Conn>, 4>(self.clone());
        }
    }

    /// The path an operation submitted now on `cpu` takes (or a disk's
    /// request with tag `cpu`, `OnPath::Disk`; `ConnInner::pick_path`);
    /// the first after an establishment with lanes granted asks for them.
    pub(super) fn path_for_ops(self: &Arc<Self>, g: &mut ConnInner, cpu: u32) -> usize {
        self.open_deferred_lanes(g);
        g.pick_path(cpu)
    }
}
