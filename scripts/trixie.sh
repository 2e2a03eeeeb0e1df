#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Create (or reuse) the Debian trixie tree that builds the 7.3 kernel and
# modules for it: bookworm's clang 14 and the host rustc do not meet 7.3's
# minimums (LLVM >= 17, rustc >= 1.85 matching the kernel's own build).
# Prints the tree's path as its last line.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PKGS=clang-19,lld-19,llvm-19,libclang-19-dev,rustc,rust-src,rustfmt,bindgen,make,flex,bison,bc,libelf-dev,libssl-dev,cpio,python3,kmod,xz-utils,ca-certificates
KPKG=linux-source-7.3

# Bump when the recipe below changes in a way that needs a new tree.
RECIPE=1
key=$(echo "$RECIPE $PKGS $KPKG $MIRROR" | sha256sum | cut -c1-12)
ROOT=$CACHE/trixie-$key

if [ -f "$ROOT/.rrdma-complete" ]; then
	echo "$ROOT"
	exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/setup.sh"
log "creating Debian trixie tree in $ROOT (about 5 minutes)"
rm -rf "$ROOT"
debootstrap --variant=minbase --include="$PKGS" trixie "$ROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
	die "debootstrap failed, see $CACHE/debootstrap.log"
echo "deb $MIRROR trixie-backports main" >"$ROOT/etc/apt/sources.list.d/backports.list"
chroot "$ROOT" apt-get update -qq
DEBIAN_FRONTEND=noninteractive chroot "$ROOT" apt-get install -y -qq --no-install-recommends \
	-t trixie-backports "$KPKG" >/dev/null
chroot "$ROOT" apt-get clean
mkdir -p "$ROOT/proc"
touch "$ROOT/.rrdma-complete"
echo "$ROOT"
