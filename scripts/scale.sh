#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make scale`: how cost grows with what one file holds
# (tests/guest/scale.sh), on siw and rxe, 7.3: regions to SCALE_MAX
# (default 10000), exports to SCALE_EXPORTS (default 100000, the file's and
# the user's export caps raised to it), imports to SCALE_MAX/10 and
# SCALE_CONNS connection pairs (default 100), and one initiator's imports
# spread over SCALE_FANOUT exporters (default 16). Prints each size's figures,
# the ratios to size 1 and one JSON line per provider; fails if a call
# failed or the file's release did not finish. `make check` runs a short form.
# SCALE_KERNEL picks the kernel (7.3), SCALE_VARIANT its build (base; debug
# has /proc/slabinfo, so the memory figures name the slab caches).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${SCALE_KERNEL:-7.3}
MAX=${SCALE_MAX:-10000}
CONNS=${SCALE_CONNS:-100}
EXPORTS=${SCALE_EXPORTS:-100000}
FANOUT=${SCALE_FANOUT:-16}
prepare_guests "$KVER" "${SCALE_VARIANT:-base}"
out=build/scale
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for prov in siw rxe; do
	log "scale on $prov: $MAX regions, $EXPORTS exports, $CONNS connection pairs, kernel $KVER"
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results "$out/results.txt" --logdir "$out" --label "scale $prov" \
		--test scale --arg "$prov,$MAX,$CONNS,$EXPORTS,$FANOUT" --timeout $((600 + CONNS * 5)) \
		--memory 2048 --allow-log "$PERFTEST_CRASH" >"$out/guest-$prov.log" 2>&1 || true
done
for f in "$out"/scale_*/console-a.log; do
	[ -f "$f" ] && grep -hE '^(scale|fanout) [a-z]*: # ' "$f" | sed 's/^/  /'
done
echo "$(grep -c '^PASS' "$out/results.txt" || true) passed"
! grep -q '^FAIL' "$out/results.txt" || die "scale failed; see $out/"
