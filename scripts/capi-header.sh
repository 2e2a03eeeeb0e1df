#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `capi-header.sh [--check]`: regenerates include/rrdma.h, librrdma's API
# header, from rust/capi with cbindgen (installed once into the cache);
# with --check, fails if the committed header differs from what the
# sources give.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
VER=0.29.4
BIN=$CACHE/cbindgen-$VER/bin/cbindgen

if [ ! -x "$BIN" ]; then
	log "installing cbindgen $VER into $CACHE/cbindgen-$VER"
	cargo install --quiet --locked cbindgen --version "$VER" --root "$CACHE/cbindgen-$VER"
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# cbindgen warns about the two UAPI structs the header includes instead.
(cd "$REPO/rust/capi" && "$BIN" --quiet --config cbindgen.toml --crate rrdma-c --output "$out" .)
if [ "${1:-}" = --check ]; then
	diff -u "$REPO/include/rrdma.h" "$out" ||
		die "include/rrdma.h is not what rust/capi gives: run scripts/capi-header.sh"
else
	cp "$out" "$REPO/include/rrdma.h"
	log "include/rrdma.h regenerated"
fi
