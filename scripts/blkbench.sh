#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make blkbench`: rrdma-blk against nvme-rdma and RNBD with fio, on the
# same two guests, the same RAM-backed sizes, jobs and durations,
# alternating rrdma, nvme, rnbd in each round (tests/guest/blkbench.sh), on
# siw and on rxe; then a table of medians and ratios, with what each cost
# the serving guest's CPU (scripts/blkbench-report.py).  It runs on 7.3,
# which `make check` builds; BENCH_KERNEL, BENCH_ROUNDS (default 3) and
# BENCH_PROVIDERS as for `make bench`.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${BENCH_KERNEL:-7.3}
ROUNDS=${BENCH_ROUNDS:-3}
PROVIDERS=${BENCH_PROVIDERS:-siw rxe}
prepare_guests "$KVER"
out=build/blkbench
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
logs=
for prov in $PROVIDERS; do
	log "blkbench on $prov: kernel $KVER, $ROUNDS rounds"
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results "$out/results.txt" --logdir "$out" --label "blkbench $prov" \
		--test blkbench --arg "$prov" --guests 2 --timeout 3600 --memory 1024 \
		--append "rrdma.rounds=$ROUNDS" >"$out/guest-$prov.log" 2>&1 || true
	logs="$logs $out/blkbench_$prov/console-b.log"
done
python3 "$HERE/blkbench-report.py" --kernel "$KVER" --rounds "$ROUNDS" $logs | tee "$out/report.txt"
if grep -q '^FAIL' "$out/results.txt"; then
	grep '^FAIL' "$out/results.txt"
	die "blkbench runs failed; see $out/"
fi
