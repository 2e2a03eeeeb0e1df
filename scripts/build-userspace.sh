#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rrdma's userspace binaries, statically linked so that they run in the
# guests' busybox initramfs as they are, into build/bin/.
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
# The CLI's man pages, from the same definitions as its --help.
rm -rf "$REPO/build/man"
"$REPO/build/bin/rrdma" man "$REPO/build/man" >/dev/null
log "userspace binaries in build/bin, man pages in build/man"
