#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `install-check.sh KVER VARIANT`: `make install` into a staging tree puts
# the module (under the kernel's release, in updates/), the udev rule, the
# CLI and the UAPI header in place with their modes, and `make uninstall`
# removes each; without a kernel tree or a built module, each refuses with
# a line that says why.
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
	"usr/local/share/man/man1/rrdma.1 644"
)
# A page for each command the CLI's --help lists.
for c in $(build/bin/rrdma --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]*\) .*/\1/p' | grep -v '^help$'); do
	want+=("usr/local/share/man/man1/rrdma-$c.1 644")
done
[ ${#want[@]} -gt 8 ] || die "make install: the CLI's --help lists too few commands: ${#want[@]} files"
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
fi
log "make install: $(find "$stage" -type f | wc -l) files staged for $krel"

make -s uninstall "${args[@]}" >/dev/null
left=$(find "$stage" -type f)
[ -z "$left" ] || die "make uninstall left: $left"

# Refusals: no kernel tree, no module.
out=$(make -s install KDIR=/nonexistent DESTDIR="$stage" 2>&1) && die "install without a kernel tree succeeded"
echo "$out" | grep -q 'no kernel release' || die "install without a kernel tree: $out"
out=$(make -s install KDIR="$kdir" MODULE=/nonexistent.ko DESTDIR="$stage" 2>&1) &&
	die "install without a module succeeded"
echo "$out" | grep -q 'missing: run make' || die "install without a module: $out"
log "make install and uninstall: staged, removed, refusals explained"
