// SPDX-License-Identifier: GPL-2.0

//! The debug kernels' quick forms: a command's optional `quick` argument,
//! and the smaller rounds it asks for (siw moves about 45 KB/s under
//! KASAN; every path still runs).

/// Whether a command of `n` arguments (`args`) ends in an optional
/// `quick` (debug kernels: fewer samples); `None` if the count is wrong.
pub(crate) fn quick_arg(args: &[String], n: usize) -> Option<bool> {
    match &args[n.min(args.len())..] {
        [] if args.len() == n => Some(false),
        [q] if q == "quick" => Some(true),
        _ => None,
    }
}

/// `full` rounds (or samples), or with `quick` (debug kernels) `full / by`
/// of them and at least one: every path still runs, with less data.
pub(crate) fn fewer(quick: bool, full: u64, by: u64) -> u64 {
    if quick {
        (full / by).max(1)
    } else {
        full
    }
}
