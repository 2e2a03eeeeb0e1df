// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Gives the shared library its soname, `librrdma.so.0`: the major version
//! of the C ABI, raised only when a change breaks a program built before.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librrdma.so.0");
}
