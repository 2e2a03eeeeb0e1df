#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make connstress`: many connections, each importing right after perftest
# has loaded the link (tests/guest/connstress.sh), on siw and rxe.
# CONNSTRESS_N sets the connections per provider (default 200, ~11 minutes
# each); CONNSTRESS_KERNEL=7.3 uses the newest kernel.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${CONNSTRESS_KERNEL:-6.12}
N=${CONNSTRESS_N:-200}
prepare_guests "$KVER"
out=build/connstress
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for prov in siw rxe; do
	log "connstress on $prov: $N connections, kernel $KVER"
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results "$out/results.txt" --logdir "$out" --label "connstress $prov" \
		--test connstress --arg "$prov" --guests 2 --timeout $((300 + N * 10)) \
		--memory 1024 --append "rrdma.n=$N" >"$out/guest-$prov.log" 2>&1 || true
done
grep -h '^# ' "$out"/connstress_*/console-b.log || true
cat "$out/results.txt"
! grep -q '^FAIL' "$out/results.txt" || die "connstress failed; see $out/"
