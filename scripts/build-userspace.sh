#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rrdma's userspace binaries, statically linked so that they run in the
# guests' busybox initramfs as they are, into build/bin/; librrdma (the C
# library) into build/lib/, and its C example and tests into build/bin/,
# built against a staged `make install-lib` through pkg-config.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
TARGET=x86_64-unknown-linux-gnu

cd "$REPO/rust"
# With an explicit --target, RUSTFLAGS reach only the target binaries, not
# build scripts or proc macros.
RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release --locked \
	--target "$TARGET" --bins
mkdir -p "$REPO/build/bin"
for b in rrdma rrdma-selftest; do
	cp "target/$TARGET/release/$b" "$REPO/build/bin/$b"
done
# The CLI's man pages, from the same definitions as its --help; the C
# library's, from its header (whose text is the Rust docs of rust/capi).
rm -rf "$REPO/build/man"
"$REPO/build/bin/rrdma" man "$REPO/build/man" >/dev/null
"$HERE/capi-man.py" "$REPO/include/rrdma.h" "$REPO/build/man" >/dev/null

# librrdma: a host build (a shared library cannot be linked with
# crt-static), stripped of debug info (the static one is mostly std's).
cargo build --quiet --release --locked -p rrdma-c
ver=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml)
lib=$REPO/build/lib
rm -rf "$lib" && mkdir -p "$lib"
cp target/release/librrdma_c.so "$lib/librrdma.so.$ver"
cp target/release/librrdma_c.a "$lib/librrdma.a"
strip --strip-debug "$lib/librrdma.so.$ver" "$lib/librrdma.a"

# The C programs, as a user builds them: against the installed library
# (staged), statically for the guests.
stage=$REPO/build/stage
rm -rf "$stage"
make -s -C "$REPO" install-lib DESTDIR="$stage" PREFIX=/usr >/dev/null
export PKG_CONFIG_LIBDIR=$stage/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
flags=$(pkg-config --static --cflags --libs rrdma)
for prog in rrdma_example:rrdma-cexample rrdma_ctest:rrdma-ctest; do
	# glibc's static-link notes about getaddrinfo and getpwuid_r (std has
	# them; librrdma does not call them) are not ours to fix.
	# shellcheck disable=SC2086
	rm -f "$REPO/build/bin/${prog#*:}"
	gcc -std=gnu11 -O2 -Wall -Wextra -Werror -static "capi/c/${prog%%:*}.c" $flags \
		-o "$REPO/build/bin/${prog#*:}" 2>&1 | grep -v -e 'statically linked applications' \
		-e ': in function' >&2 || true
	[ -x "$REPO/build/bin/${prog#*:}" ] || die "could not build ${prog#*:}"
done
log "userspace binaries in build/bin, librrdma in build/lib, man pages in build/man"
