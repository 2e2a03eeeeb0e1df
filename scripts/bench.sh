#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: rrdma against perftest on the same two guests, devices,
# sizes, depth and duration, alternating A B A B over several rounds, on siw
# and on rxe; then the ratio table, a JSON report and a PNG plot
# (scripts/bench-report.py).  BENCH_KERNEL=7.3 runs it on the newest kernel;
# BENCH_ROUNDS sets the rounds (default 3).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${BENCH_KERNEL:-6.12}
ROUNDS=${BENCH_ROUNDS:-3}
prepare_guests "$KVER"
out=build/bench
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for prov in siw rxe; do
	log "bench on $prov: two guests, kernel $KVER, $ROUNDS rounds"
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results "$out/results.txt" --logdir "$out" --label "bench $prov" \
		--test bench --arg "$prov" --guests 2 --timeout 2400 --memory 1024 \
		--append "rrdma.rounds=$ROUNDS" >"$out/guest-$prov.log" 2>&1 || true
done
if grep -q '^FAIL' "$out/results.txt"; then
	grep '^FAIL' "$out/results.txt"
	die "bench runs failed; see $out/"
fi
# Debian's python3 has the matplotlib setup.sh installs (a pyenv python3
# may come first in $PATH).
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" "$HERE/bench-report.py" --kernel "$KVER" --rounds "$ROUNDS" --out "$out" \
	"$out/bench_siw/results-b.log" "$out/bench_rxe/results-b.log"
