// SPDX-License-Identifier: GPL-2.0

//! CPU affinity of the calling thread: which CPUs it may run on, and
//! pinning it to some (an operation goes on the submitting CPU's queue
//! pair, so pinning chooses the path a test exercises).

use crate::ensure;

/// The CPUs this thread may run on.
pub(crate) fn cpus() -> Vec<usize> {
    // SAFETY: a zeroed `cpu_set_t` is an empty set; the call writes at
    // most its size into it.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return vec![0];
    }
    // SAFETY: `set` is an initialized `cpu_set_t`.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to `cpu` (its operations then go on that CPU's
/// queue pair).
pub(crate) fn pin(cpu: usize) -> Result<(), String> {
    pin_to(&[cpu])
}

/// Lets the calling thread run on `cpus` (from [`cpus`]) only.
pub(crate) fn pin_to(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: a zeroed `cpu_set_t` is an empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` is below CPU_SETSIZE (it came from `cpus()`).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is an initialized `cpu_set_t` of the size given.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    ensure(
        r == 0,
        format!(
            "sched_setaffinity({cpus:?}): {}",
            std::io::Error::last_os_error()
        ),
    )
}
