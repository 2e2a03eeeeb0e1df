#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `dkms-check.sh KVER VARIANT OUTDIR`: DKMS builds and installs rrdma for
# kernel KVER the way a host would: `make dkms` stages the sources in
# /usr/src/rrdma-VERSION of the tree that built the kernel (the trixie
# chroot for 7.3), the kernel's modules and build tree are in
# /lib/modules/KREL as its packages put them, `dkms install` builds (preflight first) and
# installs into updates/dkms, and the installed module is copied to OUTDIR
# for a guest run.  Before that, the preflight's refusals, each on a copy
# of the kernel's configuration with one thing missing, and one through
# DKMS itself (the reason is make.log's).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=$1 VARIANT=$2 OUT=$3
kdir=$("$HERE/kernel.sh" "$KVER" "$VARIANT" | tail -1)
krel=$(cat "$kdir/include/config/kernel.release")
version=$(sed -n 's/^version = "\(.*\)"/\1/p' rust/Cargo.toml)

# The preflight on fake trees: the kernel's .config with one change, the
# host's rustc and clang as the kernel's own, so that only the change can
# refuse.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
clang_v=$(clang --version | sed -n '1s/.*clang version \([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p')
read -r cmaj cmin cpatch <<<"$clang_v"
# fake_tree NAME RELEASE SED: a tree in $fake/NAME, its .config edited by SED.
fake_tree() {
	local t=$fake/$1
	mkdir -p "$t/include/config" "$t/rust"
	echo "$2" >"$t/include/config/kernel.release"
	: >"$t/rust/libkernel.rmeta"
	sed -e "s/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT=\"$(rustc --version)\"/" \
		-e "s/^CONFIG_CLANG_VERSION=.*/CONFIG_CLANG_VERSION=$((cmaj * 10000 + cmin * 100 + cpatch))/" \
		-e "$3" "$kdir/.config" >"$t/.config"
	echo "$t"
}
# refuses NAME WANT TREE [ENV...]: the preflight refuses TREE saying WANT.
refuses() {
	local out
	if out=$(env "${@:4}" "$HERE/preflight.sh" "$3" 2>&1); then
		die "preflight: $1 accepted: $out"
	fi
	[ "$(echo "$out" | wc -l)" = 1 ] || die "preflight: $1: more than one line: $out"
	echo "$out" | grep -q "$2" || die "preflight: $1: '$out' does not say '$2'"
	log "preflight refuses $1: $out"
}
ok=$(fake_tree ok "$krel" '')
args=$("$HERE/preflight.sh" "$ok") || die "preflight refused a tree the host can build for"
[ "$args" = LLVM=1 ] || die "preflight: '$args' for the host's own clang, not LLVM=1"
args=$(RUSTC=rustc "$HERE/preflight.sh" "$ok")
[ "$args" = "RUSTC=rustc LLVM=1" ] || die "preflight: '$args' with RUSTC set, not 'RUSTC=rustc LLVM=1'"
# A GCC-built kernel, as Debian and Ubuntu build theirs: the compiler named
# by its version text (gcc-N), plain gcc if that is the same major version.
gmaj=$(gcc -dumpversion | cut -d. -f1)
gcc_tree() {
	fake_tree "$1" "$krel" "/^CONFIG_CC_IS_CLANG=/d; /^CONFIG_CLANG_VERSION=/d
s/^CONFIG_GCC_VERSION=.*/CONFIG_GCC_VERSION=$(($2 * 10000 + 201))/
s/^CONFIG_CC_VERSION_TEXT=.*/CONFIG_CC_VERSION_TEXT=\"gcc-$2 (Debian $2.2.0-14) $2.2.0\"/"
}
args=$("$HERE/preflight.sh" "$(gcc_tree gcc "$gmaj")") || die "preflight refused a GCC $gmaj kernel with gcc $gmaj here"
[ -z "$args" ] || die "preflight: '$args' for a GCC $gmaj kernel, where plain gcc is $gmaj"
refuses "no gcc of the kernel's" "neither gcc nor gcc-99 is version 99" "$(gcc_tree gcc99 99)"
refuses "no tree" "not a configured kernel build tree" "$fake/none"
refuses "Linux 6.6" "older than 6.12" "$(fake_tree old 6.6.30 '')"
refuses "no CONFIG_RUST" "no Rust support" "$(fake_tree norust "$krel" '/^CONFIG_RUST=/d')"
refuses "no RDMA core" "no RDMA core" "$(fake_tree noib "$krel" '/^CONFIG_INFINIBAND=/d')"
refuses "no rdma_cm" "no rdma_cm" "$(fake_tree nocm "$krel" '/^CONFIG_INFINIBAND_ADDR_TRANS=/d')"
t=$(fake_tree normeta "$krel" '')
rm "$t/rust/libkernel.rmeta"
refuses "no Rust metadata" "linux-lib-rust-$krel" "$t"
refuses "another rustc" "the kernel was built with 'rustc" "$ok" RUSTC="$HERE/testdata/rustc-other"
refuses "no clang of the kernel's" "neither clang nor clang-99" \
	"$(fake_tree clang99 "$krel" 's/^CONFIG_CLANG_VERSION=.*/CONFIG_CLANG_VERSION=990100/')"

# DKMS in the tree that built the kernel.
case "$KVER" in
7.3) root=${kdir%/rrdma-cache/*} kdir_in=${kdir#"$root"} ;;
*) die "DKMS is checked in the 7.3 kernel's build tree only" ;;
esac
if ! chroot_run "$root" sh -c 'command -v dkms' >/dev/null; then
	log "installing dkms in $root"
	chroot_run "$root" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive chroot_run "$root" apt-get install -y -qq \
		--no-install-recommends dkms >/dev/null
fi
make -s dkms DESTDIR="$root"
inch() { chroot_run "$root" "$@"; }
# The kernel as its package installs it: its modules (a modules_install
# tree) and the build link.
inch rm -rf "/lib/modules/$krel"
inch mkdir -p /lib/modules
inch cp -a "$kdir_in/modinst/lib/modules/$krel" /lib/modules/
inch ln -sfn "$kdir_in" "/lib/modules/$krel/build"
inch dkms remove "rrdma/$version" --all >/dev/null 2>&1 || true

# Refused through DKMS: the preflight's line is the build log's reason.
if inch env RUSTC=rustc-none dkms build "rrdma/$version" -k "$krel" >/dev/null 2>&1; then
	die "dkms build with no rustc succeeded"
fi
grep -q "^rrdma: cannot build for $krel: no rustc-none" "$root/var/lib/dkms/rrdma/$version/build/make.log" ||
	die "dkms build refused without the preflight's reason in make.log"

inch dkms install "rrdma/$version" -k "$krel"
inch dkms status rrdma | grep -q "rrdma/$version, $krel, .*: installed" ||
	die "dkms status does not say installed: $(inch dkms status rrdma)"
ko=$root/lib/modules/$krel/updates/dkms/rrdma.ko
[ -f "$ko" ] || die "dkms install put no $ko"
modinfo -F vermagic "$ko" | grep -q "^$krel " || die "the DKMS module is not built for $krel"
grep -q "^updates/dkms/rrdma.ko:" "$root/lib/modules/$krel/modules.dep" ||
	die "depmod did not list the DKMS module"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ko" "$OUT/"
inch dkms remove "rrdma/$version" --all >/dev/null
[ ! -e "$ko" ] || die "dkms remove left $ko"
log "dkms: built, installed, listed by depmod and removed for $krel; the module in $OUT"
