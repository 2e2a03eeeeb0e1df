#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make fuzz`: the ioctl fuzzer (rust/selftest/src/fuzz/, run by
# tests/guest/fuzz.sh) for FUZZ_SECONDS (default 1800) on each provider in
# FUZZ_PROVIDERS (default "siw rxe"), on FUZZ_KERNEL (default 6.12) built
# as FUZZ_VARIANT (default debug: KASAN, lockdep, kmemleak), with
# FUZZ_THREADS threads (default 4) and seed FUZZ_SEED (default: random,
# printed).  Results in build/fuzz/.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${FUZZ_KERNEL:-6.12}
VAR=${FUZZ_VARIANT:-debug}
SECS=${FUZZ_SECONDS:-1800}
THREADS=${FUZZ_THREADS:-4}
SEED=${FUZZ_SEED:-random}
prepare_guests "$KVER" "$VAR"
out=build/fuzz
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for prov in ${FUZZ_PROVIDERS:-siw rxe}; do
	log "fuzz on $prov: $SECS s, $THREADS threads, seed $SEED, kernel $KVER ($VAR)"
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results "$out/results.txt" --logdir "$out" --label "fuzz $prov" \
		--test fuzz --arg "$prov,$SECS,$THREADS,$SEED" --timeout $((600 + SECS * 2)) \
		--memory 1536 >"$out/guest-$prov.log" 2>&1 || true
done
grep -ah 'fuzz .*: # ' "$out"/fuzz_*/console-a.log || true
cat "$out/results.txt"
! grep -q '^FAIL' "$out/results.txt" || die "fuzz found something; see $out/"
