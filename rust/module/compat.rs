// SPDX-License-Identifier: GPL-2.0

//! The one place that knows the differences between supported kernels.
//!
//! Kbuild sets `--cfg rrdma_compat="k6_12"` for kernels before 6.13 and
//! `"k7"` otherwise (see `Kbuild`); everything else in the crate calls the
//! functions re-exported here and stays version-agnostic.

#[cfg(rrdma_compat = "k6_12")]
#[path = "compat/k6_12.rs"]
mod imp;

#[cfg(not(rrdma_compat = "k6_12"))]
#[path = "compat/k7.rs"]
mod imp;

pub(crate) use imp::*;
