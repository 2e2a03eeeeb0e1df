#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) an rrdma test kernel in the cache outside the repo.
#
#   scripts/kernel.sh 6.12|7.3 [base|debug]
#
# Prints the kernel build directory (usable as KDIR) as its last line.  The
# build directory name carries the kernel version, the variant and a hash of
# the config fragments, this script and the toolchain, so a change to any of
# them builds afresh and an unchanged one is reused.  6.12 is built on the
# host from Debian's linux-source-6.12; 7.3 needs clang >= 17 and rustc >=
# 1.85, so it is built inside a debootstrapped Debian trixie tree (see
# scripts/trixie.sh) and its KDIR lives inside that tree.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

KVER=${1:?usage: kernel.sh 6.12|7.3 [base|debug]}
VARIANT=${2:-${VARIANT:-base}}
case "$VARIANT" in base|debug) ;; *) die "unknown variant '$VARIANT'";; esac

frags=("$HERE/kconfig/base.config")
if [ "$VARIANT" = debug ]; then
	frags+=("$HERE/kconfig/debug.config")
else
	frags+=("$HERE/kconfig/tracing.config")
fi

case "$KVER" in
6.12)
	ROOT=""
	RUN=()
	LLVM_ARG=LLVM=1
	TARBALL=/usr/src/linux-source-6.12.tar.xz
	toolchain="$(rustc --version) $(clang --version | head -1) $(bindgen --version)"
	;;
7.3)
	ROOT=$("$HERE/trixie.sh" | tail -1)
	RUN=(chroot_run "$ROOT")
	LLVM_ARG=LLVM=-19
	TARBALL=/usr/src/linux-source-7.3.tar.xz
	toolchain=$(chroot_run "$ROOT" sh -c 'rustc --version; clang-19 --version | head -1; bindgen --version')
	;;
*) die "unsupported kernel '$KVER' (supported: 6.12, 7.3)";;
esac

[ -f "$ROOT$TARBALL" ] || die "$ROOT$TARBALL missing: run scripts/setup.sh"

# Patches this project carries on the version's source (scripts/kpatch/KVER,
# applied in name order when the source is extracted): fixes of the kernel
# itself that the tests need, each with its reason in its header.
shopt -s nullglob
patches=("$HERE/kpatch/$KVER/"*.patch)
shopt -u nullglob
patch_sum=""
[ ${#patches[@]} -eq 0 ] || patch_sum="patches $(cat "${patches[@]}" | sha256sum | cut -c1-12)"

# Bump RECIPE when a change to the build steps below needs fresh kernels.
RECIPE=1
key=$( { cat "${frags[@]}"; echo "recipe $RECIPE"; [ -z "$patch_sum" ] || echo "$patch_sum"
	echo "$toolchain"; } | sha256sum | cut -c1-12)
# Paths as seen by the build (inside the chroot for 7.3).
src=/rrdma-cache/src/$(basename "$TARBALL" .tar.xz)
out=/rrdma-cache/kernel/$KVER-$VARIANT-$key
if [ -z "$ROOT" ]; then
	src=$CACHE/src/$(basename "$TARBALL" .tar.xz)
	out=$CACHE/kernel/$KVER-$VARIANT-$key
fi

if [ -f "$ROOT$out/.rrdma-complete" ]; then
	log "kernel $KVER ($VARIANT) reused from $ROOT$out"
	echo "$ROOT$out"
	exit 0
fi

# The marker holds the patch set's hash (empty without patches): another
# set extracts afresh.
if [ ! -f "$ROOT$src/.rrdma-extracted" ] ||
	[ "$(cat "$ROOT$src/.rrdma-extracted")" != "$patch_sum" ]; then
	log "extracting $TARBALL"
	rm -rf "$ROOT$src"
	mkdir -p "$(dirname "$ROOT$src")"
	tar -C "$(dirname "$ROOT$src")" -xf "$ROOT$TARBALL"
	for p in "${patches[@]}"; do
		log "applying $(basename "$p")"
		patch -d "$ROOT$src" -p1 --quiet --forward <"$p" || die "$(basename "$p") does not apply"
	done
	echo "$patch_sum" >"$ROOT$src/.rrdma-extracted"
fi

log "building kernel $KVER ($VARIANT) into $ROOT$out (several minutes)"
rm -rf "$ROOT$out"
mkdir -p "$ROOT$out/frags"
cp "${frags[@]}" "$ROOT$out/frags/"
jobs=$(( $(nproc) + 1 ))
kmake() { "${RUN[@]}" make -s -C "$src" O="$out" "$LLVM_ARG" "$@"; }
kmake tinyconfig >/dev/null
"${RUN[@]}" sh -c "cd '$out' && '$src/scripts/kconfig/merge_config.sh' -m -O '$out' '$out/.config' $out/frags/*.config" >/dev/null
kmake olddefconfig >/dev/null
# Fail loudly if Kconfig dropped something the tests depend on.
for opt in RUST MODULES INFINIBAND INFINIBAND_ADDR_TRANS INFINIBAND_USER_ACCESS \
	KUNIT VIRTIO_NET DEVTMPFS SERIAL_8250_CONSOLE NET_NS VETH ACPI HPET_TIMER X86_PM_TIMER KALLSYMS \
	IO_URING BLOCK EVENT_TRACING; do
	grep -q "^CONFIG_$opt=y" "$ROOT$out/.config" ||
		die "CONFIG_$opt is not =y after olddefconfig (see $ROOT$out/.config)"
done
for opt in RDMA_RXE RDMA_SIW; do
	grep -q "^CONFIG_$opt=m" "$ROOT$out/.config" || die "CONFIG_$opt is not =m"
done
if [ "$VARIANT" = debug ]; then
	for opt in KASAN PROVE_LOCKING DEBUG_KMEMLEAK DEBUG_OBJECTS UBSAN UBSAN_BOUNDS UBSAN_SHIFT SOFTLOCKUP_DETECTOR; do
		grep -q "^CONFIG_$opt=y" "$ROOT$out/.config" || die "CONFIG_$opt is not =y"
	done
fi
# The compiler's output (pages of warnings) goes to a log beside the
# build; the screen gets a line a minute, and the log's end on failure.
blog=$ROOT$out/build.log
log "compiling (output in $blog; about 15 minutes on 2 cores, 25 for debug)"
t0=$SECONDS
kmake -j"$jobs" bzImage modules >"$blog" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
	sleep 5
	if [ $(( (SECONDS - t0) % 60 )) -lt 5 ] && kill -0 "$pid" 2>/dev/null; then
		log "... $(( (SECONDS - t0) / 60 )) min: $(find "$ROOT$out" -name '*.o' | wc -l) objects compiled"
	fi
done
if ! wait "$pid"; then
	tail -n 30 "$blog" >&2
	die "kernel $KVER ($VARIANT) failed to build (log: $blog)"
fi
kmake modules_install INSTALL_MOD_PATH="$out/modinst" INSTALL_MOD_STRIP=1 >/dev/null
touch "$ROOT$out/.rrdma-complete"
# Builds of this version and variant with another key are stale now.
for stale in "$ROOT$(dirname "$out")/$KVER-$VARIANT-"*; do
	[ "$stale" = "$ROOT$out" ] || rm -rf "$stale"
done
log "kernel $KVER ($VARIANT) built"
echo "$ROOT$out"
