// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Builds the selftest's C parts: the verbs side of the hostile RoCE peer
//! (`csrc/verbs_peer_cm.c` and `csrc/verbs_peer_io.c`, which share
//! `csrc/verbs_peer.h`) and the documentation's liburing example
//! (`csrc/uring_example.c`, against the UAPI header). Links rdma-core's
//! static libraries with the rxe provider and liburing's, so that the
//! selftest stays one static binary for the guests' initramfs.

fn main() {
    for f in [
        "csrc/verbs_peer.h",
        "csrc/verbs_peer_cm.c",
        "csrc/verbs_peer_io.c",
        "csrc/uring_example.c",
        "../../include/uapi/rrdma.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .file("csrc/verbs_peer_cm.c")
        .file("csrc/verbs_peer_io.c")
        .warnings(true)
        .extra_warnings(true)
        .compile("verbs_peer");
    cc::Build::new()
        .file("csrc/uring_example.c")
        .include("../../include/uapi")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("uring_example");
    // After the objects that need them, in dependency order.
    for lib in [
        "rdmacm",
        "rxe-rdmav34",
        "ibverbs",
        "nl-route-3",
        "nl-3",
        "uring",
    ] {
        println!("cargo:rustc-link-lib=static={lib}");
    }
    println!("cargo:rustc-link-search=native=/usr/lib/x86_64-linux-gnu");
}
