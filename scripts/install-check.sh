#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `install-check.sh KVER VARIANT`: `make install` into a staging tree puts
# the module (under the kernel's release, in updates/), the udev rule, the
# CLI, the C library with its headers and pkg-config file, and the man
# pages in place with their modes; a C program builds against the staged
# library through pkg-config and runs with it; `make uninstall` removes
# each; without a kernel tree or a built module, each refuses with a line
# that says why.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

kdir=$("$HERE/kernel.sh" "$1" "$2" 2>/dev/null | tail -1)
krel=$(cat "$kdir/include/config/kernel.release")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
args=(KDIR="$kdir" MODULE="build/mod-$1-$2/rrdma.ko" DESTDIR="$stage")

make -s install "${args[@]}" >/dev/null
want=(
	"lib/modules/$krel/updates/rrdma.ko 644"
	"etc/udev/rules.d/60-rrdma.rules 644"
	"usr/local/bin/rrdma 755"
	"usr/local/include/linux/rrdma.h 644"
	"usr/local/include/rrdma.h 644"
	"usr/local/lib/librrdma.so.$(sed -n 's/^version = "\(.*\)"/\1/p' rust/Cargo.toml) 755"
	"usr/local/lib/librrdma.a 644"
	"usr/local/lib/pkgconfig/rrdma.pc 644"
	"usr/local/share/man/man1/rrdma.1 644"
	"usr/local/share/man/man3/rrdma.3 644"
	"usr/local/share/man/man3/rrdma_submit.3 644"
)
# A page for each command the CLI's --help lists.
for c in $(build/bin/rrdma --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]*\) .*/\1/p' | grep -v '^help$'); do
	want+=("usr/local/share/man/man1/rrdma-$c.1 644")
done
[ ${#want[@]} -gt 14 ] || die "make install: the CLI's --help lists too few commands: ${#want[@]} files"
for w in "${want[@]}"; do
	set -- $w
	[ -f "$stage/$1" ] || die "make install: $1 missing"
	mode=$(stat -c %a "$stage/$1")
	[ "$mode" = "$2" ] || die "make install: $1 has mode $mode, not $2"
done
cmp -s "$stage/usr/local/include/linux/rrdma.h" include/uapi/rrdma.h ||
	die "make install: the header differs from include/uapi/rrdma.h"
grep -q 'GROUP="rdma", MODE="0660"' "$stage/etc/udev/rules.d/60-rrdma.rules" ||
	die "make install: the udev rule does not give /dev/rrdma to group rdma"
modinfo -F vermagic "$stage/lib/modules/$krel/updates/rrdma.ko" | grep -q "^$krel " ||
	die "make install: the module is not built for $krel"
page=$stage/usr/local/share/man/man1/rrdma-map.1
if command -v man >/dev/null; then
	man -l "$page" 2>/dev/null | grep -q "rrdma map \[" ||
		die "make install: rrdma-map.1 does not render with a synopsis"
	man -l "$stage/usr/local/share/man/man3/rrdma.3" 2>/dev/null |
		grep -q "int rrdma_submit(struct rrdma \*dev," ||
		die "make install: rrdma.3 does not render rrdma_submit's prototype"
fi

# A C program against the installed library, shared, as a user builds it.
lib=$stage/usr/local/lib
[ "$(readlink "$lib/librrdma.so")" = librrdma.so.0 ] || die "make install: librrdma.so is not a link to librrdma.so.0"
flags=$(PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage pkg-config --cflags --libs rrdma)
# shellcheck disable=SC2086
gcc -Wall -Werror -o "$stage/cexample" rust/capi/c/rrdma_example.c $flags ||
	die "make install: the C example does not build against the installed library ($flags)"
readelf -d "$stage/cexample" | grep -q 'NEEDED.*\[librrdma.so.0\]' ||
	die "make install: the C example does not need librrdma.so.0"
out=$(LD_LIBRARY_PATH=$lib "$stage/cexample" 2>&1) && die "the C example without arguments succeeded"
echo "$out" | grep -q "(librrdma [0-9.]*)" || die "the C example with the installed library: $out"
rm -f "$stage/cexample"
log "make install: $(find "$stage" -type f | wc -l) files staged for $krel"

make -s uninstall "${args[@]}" >/dev/null
left=$(find "$stage" ! -type d)
[ -z "$left" ] || die "make uninstall left: $left"

# The library alone: no kernel tree needed, and all of it goes again.
make -s install-lib DESTDIR="$stage" >/dev/null
[ -f "$stage/usr/local/lib/pkgconfig/rrdma.pc" ] || die "make install-lib: rrdma.pc missing"
make -s uninstall-lib DESTDIR="$stage" >/dev/null
left=$(find "$stage" ! -type d)
[ -z "$left" ] || die "make uninstall-lib left: $left"

# Refusals: no kernel tree, no module.
out=$(make -s install KDIR=/nonexistent DESTDIR="$stage" 2>&1) && die "install without a kernel tree succeeded"
echo "$out" | grep -q 'no kernel release' || die "install without a kernel tree: $out"
out=$(make -s install KDIR="$kdir" MODULE=/nonexistent.ko DESTDIR="$stage" 2>&1) &&
	die "install without a module succeeded"
echo "$out" | grep -q 'missing: run make' || die "install without a module: $out"
log "make install and uninstall: staged, removed, refusals explained"
