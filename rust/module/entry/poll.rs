// SPDX-License-Identifier: GPL-2.0

//! The polling policy (`abi::poll`), for the C shim's IOPOLL polls of a
//! queue pair (`shim/poll.c`), which keep the queue pair's mean wait.

/// How long an IOPOLL poll that finds nothing spins before it sleeps, in
/// ns, given the queue pair's mean wait for its next completion `mean_ns`
/// (0: none yet); 0: it sleeps at once. Any context.
#[no_mangle]
extern "C" fn rrdma_rust_iopoll_window_ns(mean_ns: u64) -> u64 {
    crate::abi::poll::iopoll_window_ns(crate::ffi::iopoll_spin(), mean_ns)
}

/// The mean wait after one of `sample_ns` (`abi::poll::mean_after`). Any
/// context.
#[no_mangle]
extern "C" fn rrdma_rust_poll_mean_after(mean_ns: u64, sample_ns: u64) -> u64 {
    crate::abi::poll::mean_after(mean_ns, sample_ns)
}
