#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: boot two guests linked by a virtual wire, load rrdma on both
# and add a soft RDMA device (siw, then rxe); guest a serves a region, guest b
# imports it, writes and reads blocks, verifies checksums and runs a short
# bench.  It runs on 7.3, the kernel `make check` builds (so that a demo
# after it starts at once); DEMO_KERNEL=6.12 runs it on the LTS kernel
# (built first if it is not cached: about 15 minutes).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${DEMO_KERNEL:-7.3}
prepare_guests "$KVER"
mkdir -p build/demo
for prov in siw rxe; do
	log "demo on $prov: two guests, kernel $KVER"
	: >build/demo/results.txt
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results build/demo/results.txt --logdir build/demo --label "demo $prov" \
		--test demo --arg "$prov" --guests 2 --timeout 300 >/dev/null || true
	for role in a b; do
		echo "---- guest $role ($prov) ----"
		sed -n '/^RRDMA-DEMO-BEGIN/,/^RRDMA-DEMO-END/p' "build/demo/demo_$prov/results-$role.log" |
			grep -v '^RRDMA-DEMO-'
	done
	if grep -q '^FAIL' build/demo/results.txt; then
		grep '^FAIL' build/demo/results.txt
		exit 1
	fi
done
