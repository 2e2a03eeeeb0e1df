#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make flood`: the connect flood of tests/guest/attack.sh's `flood` part
# (rust/selftest/src/flood.rs), FLOOD_ROUNDS times in a row (default 4) on
# each provider, FLOOD_SECONDS each (default 120), on the debug 6.12
# kernel (FLOOD_KERNEL, FLOOD_VARIANT to change; FLOOD_PROVIDERS, default
# "rxe siw"): connect, import and
# disconnect cycles while the exporter's accepts fail at each point and it
# tears old connections down; after each round a new connection must work
# and the kernel log must be clean.  `make check` runs one 40 s round on
# debug 6.12 rxe.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${FLOOD_KERNEL:-6.12}
VAR=${FLOOD_VARIANT:-debug}
ROUNDS=${FLOOD_ROUNDS:-4}
SECS=${FLOOD_SECONDS:-120}
PROVIDERS=${FLOOD_PROVIDERS:-rxe siw}
prepare_guests "$KVER" "$VAR"
out=build/flood
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for prov in $PROVIDERS; do
	for round in $(seq 1 "$ROUNDS"); do
		log "flood on $prov, round $round of $ROUNDS: $SECS s, kernel $KVER ($VAR)"
		python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
			--results "$out/results.txt" --logdir "$out" --label "flood $prov round $round" \
			--test attack --arg "$prov,flood,$SECS" --guests 2 --timeout $((600 + SECS * 2)) \
			--memory 1024 >"$out/guest-$prov-$round.log" 2>&1 || true
	done
done
grep -h '# flood' "$out"/flood_*/console-b.log 2>/dev/null || true
grep -c '^PASS' "$out/results.txt" | xargs -I{} echo "{} passed"
! grep '^FAIL' "$out/results.txt" || die "flood failed; see $out/"
