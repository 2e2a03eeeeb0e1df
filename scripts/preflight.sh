#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# `preflight.sh KDIR`: whether rrdma can be built against the kernel build
# tree KDIR, before kbuild says it in pages.  Refuses in one line naming
# what is missing: a configured tree, Linux 6.12 or newer, CONFIG_RUST, the
# RDMA core with rdma_cm, the kernel's Rust metadata (rust/libkernel.rmeta,
# which distributions ship apart: Ubuntu's linux-lib-rust-KREL), a rustc
# that is the kernel's own (crates of another rustc do not link), and the
# kernel's C compiler.  On success it prints kbuild's arguments for that
# kernel as its only output: LLVM=1, or LLVM=-N for a versioned clang-N
# (with its ld.lld), for a GCC-built kernel CC= when plain gcc is not of the
# kernel's major version, and RUSTC= when the environment sets it (the
# kernel's Makefile would not take it from there).
#
# bindgen is not checked: it ran when the kernel was built, and an
# out-of-tree module does not run it again.
#
# Used by `make` (modules), and by DKMS (dkms.conf's PRE_BUILD and MAKE).
# Plain POSIX sh: DKMS runs it on hosts without bash.
set -eu

KDIR=${1:?usage: preflight.sh KDIR}
RUSTC_SET=${RUSTC:-}
RUSTC=${RUSTC:-rustc}

krel=$(cat "$KDIR/include/config/kernel.release" 2>/dev/null || true)
fail() {
	echo "rrdma: cannot build for ${krel:-$KDIR}: $*" >&2
	exit 1
}

[ -f "$KDIR/.config" ] && [ -n "$krel" ] ||
	fail "$KDIR is not a configured kernel build tree (install the kernel's headers: linux-headers-\$(uname -r) on Debian and Ubuntu, linux-headers on Arch; or set KDIR)"

# The value of CONFIG_$1 in the tree's .config, quotes removed.
conf() {
	sed -n "s/^CONFIG_$1=//p" "$KDIR/.config" | sed 's/^"//; s/"$//'
}

major=${krel%%.*}
rest=${krel#*.}
minor=${rest%%[!0-9]*}
case "$major.$minor" in
*[!0-9.]* | .* | *.) fail "cannot read the kernel version from '$krel'" ;;
esac
[ "$major" -gt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -ge 12 ]; } ||
	fail "Linux $major.$minor is older than 6.12, the oldest rrdma supports"
[ "$(conf RUST)" = y ] ||
	fail "the kernel has no Rust support (CONFIG_RUST is not set): rrdma needs a kernel built with CONFIG_RUST=y"
case $(conf INFINIBAND) in
y | m) ;;
*) fail "the kernel has no RDMA core (CONFIG_INFINIBAND is not set)" ;;
esac
[ "$(conf INFINIBAND_ADDR_TRANS)" = y ] ||
	fail "the kernel has no rdma_cm (CONFIG_INFINIBAND_ADDR_TRANS is not set)"
[ -f "$KDIR/rust/libkernel.rmeta" ] ||
	fail "$KDIR lacks the kernel's Rust metadata (rust/libkernel.rmeta): on Ubuntu install linux-lib-rust-$krel; elsewhere build against the kernel's own build tree"

want=$(conf RUSTC_VERSION_TEXT)
have=$("$RUSTC" --version 2>/dev/null || true)
[ -n "$have" ] || fail "no $RUSTC (the kernel was built with $want)"
[ -z "$want" ] || [ "$have" = "$want" ] ||
	fail "$RUSTC is '$have', the kernel was built with '$want' (its crates only link with the same rustc; set RUSTC or PATH)"

want=$(conf CC_VERSION_TEXT)
args=""
[ -z "${RUSTC_SET:-}" ] || args="RUSTC=$RUSTC"
if [ "$(conf CC_IS_CLANG)" = y ]; then
	n=$(($(conf CLANG_VERSION) / 10000))
	if clang --version 2>/dev/null | head -n 1 | grep -q "clang version $n\."; then
		llvm=1 lld=ld.lld
	elif command -v "clang-$n" >/dev/null; then
		llvm=-$n lld=ld.lld-$n
	else
		fail "the kernel was built with '$want', and neither clang nor clang-$n is version $n"
	fi
	command -v "$lld" >/dev/null || fail "the kernel was built with '$want', and $lld is missing"
	args="$args LLVM=$llvm"
else
	# The kernel's gcc by major version (the kernel itself only warns
	# about another minor): plain gcc, or the one it was built with
	# (gcc-12, x86_64-linux-gnu-gcc-13).
	n=$(($(conf GCC_VERSION) / 10000))
	cc=""
	for c in gcc "${want%% *}"; do
		if [ "$("$c" -dumpversion 2>/dev/null | cut -d. -f1)" = "$n" ]; then
			cc=$c
			break
		fi
	done
	[ -n "$cc" ] || fail "the kernel was built with '$want', and neither gcc nor ${want%% *} is version $n"
	[ "$cc" = gcc ] || args="$args CC=$cc"
fi
echo $args
