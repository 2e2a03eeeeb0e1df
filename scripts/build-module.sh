#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rrdma.ko and rrdma_kunit.ko against one of the test kernels:
#
#   scripts/build-module.sh 6.12|7.3 [base|debug] [clippy]
#
# The sources are mirrored into a directory per checkout and kernel so that
# builds for different kernels, or of two worktrees, do not share objects
# (6.12 has no `make MO=`).  For 7.3
# the build runs inside the trixie tree, with the toolchain that built that
# kernel.  The modules land in build/mod-<kernel>-<variant>/; the directory
# is printed as the last line.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")

KVER=${1:?usage: build-module.sh 6.12|7.3 [base|debug] [clippy]}
VARIANT=${2:-${VARIANT:-base}}
CLIPPY=${3:-}
KDIR=$("$HERE/kernel.sh" "$KVER" "$VARIANT" | tail -1)
OUT=$REPO/build/mod-$KVER-$VARIANT
mkdir -p "$OUT"

case "$KVER" in
7.3)
	ROOT=${KDIR%/rrdma-cache/*}
	RUN=(chroot_run "$ROOT")
	kdir_in=${KDIR#"$ROOT"}
	src_in=/rrdma-cache/mod-src/$(echo "$REPO" | sha256sum | cut -c1-8)-$KVER-$VARIANT
	LLVM_ARG=LLVM=-19
	;;
*)
	ROOT=""
	RUN=()
	kdir_in=$KDIR
	src_in=$CACHE/mod-src/$(echo "$REPO" | sha256sum | cut -c1-8)-$KVER-$VARIANT
	LLVM_ARG=LLVM=1
	;;
esac

# Mirror only the module's sources; keep timestamps so rebuilds are incremental.
# By content, and stamped with the copy's time: a file whose content changed
# is newer than its object even if the repo's copy is older (a checkout of
# an older commit), so kbuild rebuilds it.
mkdir -p "$ROOT$src_in"
rsync -rl --checksum --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' --exclude '*.mod*' \
	--exclude '*.d' --exclude 'modules.order' --exclude 'Module.symvers' \
	--include 'Kbuild' --include 'include/***' --include 'rust/' --include 'rust/module/***' \
	--include 'rust/abi/' --include 'rust/abi/src/***' --exclude '*' \
	"$REPO/" "$ROOT$src_in/"

extra=()
[ "$CLIPPY" = clippy ] && extra+=(CLIPPY=1)
log "building rrdma modules for $KVER ($VARIANT)${CLIPPY:+ with clippy}"
"${RUN[@]}" make -s -C "$kdir_in" M="$src_in" "$LLVM_ARG" "${extra[@]}" modules
cp "$ROOT$src_in"/*.ko "$OUT/"
echo "$OUT"
