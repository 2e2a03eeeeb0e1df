// SPDX-License-Identifier: GPL-2.0

//! Waiting until the last user of an object has let go.
//!
//! The xprtrdma pattern (`net/sunrpc/xprtrdma/ib_client.c`) in Rust terms:
//! an object shared through `Arc` carries a [`ReleaseGuard`] as its last
//! field; when the last `Arc` drops, the object's resources are freed first
//! and the guard then signals the [`Release`] that a remover waits on.

use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};

use crate::abi::Result;

/// A one-shot "released" signal.
#[pin_data]
pub(crate) struct Release {
    /// Whether the signal was given. A leaf.
    #[pin]
    done: Mutex<bool>,
    #[pin]
    cond: CondVar,
}

impl Release {
    /// A new, unsignalled release.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                done <- new_mutex!(false, "Release::done"),
                cond <- new_condvar!("Release::cond"),
            }),
            GFP_KERNEL,
        )
        .map_err(Into::into)
    }

    /// Whether the guard has dropped.
    #[allow(dead_code)] // Used by the KUnit suite.
    pub(crate) fn is_released(&self) -> bool {
        *self.done.lock()
    }

    /// Waits until the guard has dropped.
    ///
    /// Uninterruptible by design: it runs in the device removal path, where
    /// the caller cannot give up, and every holder is told to let go first.
    pub(crate) fn wait(&self) {
        let mut done = self.done.lock();
        while !*done {
            self.cond.wait(&mut done);
        }
    }
}

/// Signals its [`Release`] when dropped.
pub(crate) struct ReleaseGuard(Arc<Release>);

impl ReleaseGuard {
    /// A guard for `release`.
    pub(crate) fn new(release: Arc<Release>) -> Self {
        Self(release)
    }

    /// The release this guard signals, for a remover to wait on.
    pub(crate) fn release(&self) -> Arc<Release> {
        self.0.clone()
    }
}

impl Drop for ReleaseGuard {
    fn drop(&mut self) {
        *self.0.done.lock() = true;
        self.0.cond.notify_all();
    }
}
