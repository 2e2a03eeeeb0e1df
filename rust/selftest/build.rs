// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Builds the verbs side of the hostile RoCE peer (`csrc/verbs_peer.c`)
//! and links rdma-core's static libraries with the rxe provider, so that
//! the selftest stays one static binary for the guests' initramfs.

fn main() {
    println!("cargo:rerun-if-changed=csrc/verbs_peer.c");
    cc::Build::new()
        .file("csrc/verbs_peer.c")
        .warnings(true)
        .extra_warnings(true)
        .compile("verbs_peer");
    // After the object that needs them, in dependency order.
    for lib in ["rdmacm", "rxe-rdmav34", "ibverbs", "nl-route-3", "nl-3"] {
        println!("cargo:rustc-link-lib=static={lib}");
    }
    println!("cargo:rustc-link-search=native=/usr/lib/x86_64-linux-gnu");
}
