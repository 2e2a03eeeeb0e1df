#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make faults`: the fault suite (rust/selftest/src/faults/, run by
# tests/guest/faults.sh) on each provider in FAULTS_PROVIDERS (default
# "siw rxe") and each kernel in FAULTS_KERNELS (default "7.3:base
# 6.12:debug", VERSION:VARIANT), each fault lasting FAULTS_SECONDS (default
# 10); FAULTS_ONLY picks faults by key, joined by "+" (e.g.
# "loss-10+link-down").  Results and the tables in build/faults/.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

SECS=${FAULTS_SECONDS:-10}
out=build/faults
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for kv in ${FAULTS_KERNELS:-7.3:base 6.12:debug}; do
	k=${kv%%:*}
	var=${kv#*:}
	prepare_guests "$k" "$var"
	for prov in ${FAULTS_PROVIDERS:-siw rxe}; do
		label="faults $k $var $prov"
		log "$label: $SECS s per fault"
		python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
			--results "$out/results.txt" --logdir "$out" --label "$label" \
			--test faults --arg "$prov,$SECS${FAULTS_ONLY:+,$FAULTS_ONLY}" --guests 2 \
			--timeout $((900 + SECS * 60)) --memory 1024 >"$out/guest-$k-$var-$prov.log" 2>&1 || true
	done
done
for f in "$out"/faults_*/console-b.log; do
	[ -e "$f" ] || continue
	echo "== $(basename "$(dirname "$f")")"
	grep -a 'faults .*: # ' "$f" | sed 's/^.*faults [a-z]*: # //' || true
done
grep -c '^PASS' "$out/results.txt" | xargs -I{} echo "{} passed"
! grep '^FAIL' "$out/results.txt" || die "faults: failures above; see $out/"
