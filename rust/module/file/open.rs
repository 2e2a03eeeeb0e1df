// SPDX-License-Identifier: GPL-2.0

//! A file's life: the state `open` builds and what `release` tears down.

use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc};

use super::FileState;
use crate::abi::conn::Event;
use crate::abi::Result;
use crate::conn::Conn;
use crate::context::Context;
use crate::ffi::FileWaitq;
use crate::listener::Listener;
use crate::objects::{Object, Objects};
use crate::shared::Shared;

impl FileState {
    /// The state of a file being opened; `waitq` is the file's wait queue
    /// (valid until its release returns).
    pub(crate) fn open(context: Arc<Context>, waitq: FileWaitq) -> Result<Arc<Self>> {
        let shared = Shared::new(context.clone(), Some(waitq))?;
        let (registry, registered) = (context.clone(), shared.clone());
        registry.add_file(registered.clone())?;
        Arc::pin_init(
            pin_init!(FileState {
                context,
                shared,
                objects <- new_mutex!(Objects::new(), "FileState::objects"),
            }),
            GFP_KERNEL,
        )
        .inspect_err(|_| registry.remove_file(&registered))
        .map_err(Into::into)
    }

    /// The file is closed: every object of the file dies with it.
    pub(crate) fn release(self: Arc<Self>) {
        // Its disks are not its: each has a connection of its own, which
        // BLK_UNMAP ends.
        // Listeners first (no new connections), then every connection:
        // their operations complete with errors and their QPs are drained.
        // The table is taken out whole (no allocation that could fail) and
        // emptied outside its lock: closing a listener takes rdma_cm and
        // socket locks, and mmap(2) takes the table's lock under the mmap
        // lock.
        let objects = self.objects.lock().take_all();
        for o in objects.values() {
            if let Object::Listener(l) = o {
                Listener::close(l);
            }
        }
        drop(objects);
        // `destroy` returns once the connection is torn down (waiting for a
        // teardown another path started), which unregisters it.
        loop {
            let conn = self.shared.conns.lock().iter().next().cloned();
            match conn {
                Some(c) => {
                    Conn::destroy(&c, Event::UserClose);
                    self.shared.unregister(&c);
                }
                None => break,
            }
        }
        // Emptied outside the table's lock: the last references to
        // regions may go with it.
        let exports = self.shared.exports.lock().take_all();
        drop(exports);
        self.context.remove_file(&self.shared);
    }
}
