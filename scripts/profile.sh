#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make profile`: where the initiator's CPU goes in rrdma's data path.  Two
# guests (2 vCPUs each) on siw, then rxe; guest b runs `rrdma bench` WRITEs
# through SUBMIT ioctls and io_uring commands, each under `perf record -a`,
# and prints perf's report of each (tests/guest/profile.sh): samples per
# module and the hottest symbols.  PROFILE_KERNEL (default 7.3) and
# PROFILE_PROVIDERS choose where; PROFILE_CASES the runs ("SIZE:DEPTH:ENGINE[:THREADS]
# ...", threads on one connection, its data lanes).  Output in build/profile/profile-PROVIDER.txt.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${PROFILE_KERNEL:-7.3}
PROVIDERS=${PROFILE_PROVIDERS:-siw rxe}
command -v perf >/dev/null || die "perf missing: run scripts/setup.sh (linux-perf)"
prepare_guests "$KVER"
out=build/profile
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
append=
[ -z "${PROFILE_CASES:-}" ] || append="rrdma.profile_cases=${PROFILE_CASES// /,}"
for prov in $PROVIDERS; do
	log "profile on $prov: two guests, kernel $KVER"
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
		--results "$out/results.txt" --logdir "$out" --label "profile $prov" \
		--test profile --arg "$prov" --guests 2 --timeout 1200 --memory 1024 \
		${append:+--append "$append"} >"$out/guest-$prov.log" 2>&1 || true
	sed -n '/^RRDMA-PROFILE-BEGIN/,/^RRDMA-PROFILE-END/p' \
		"$out/profile_$prov/results-b.log" | tee "$out/profile-$prov.txt"
done
if grep -q '^FAIL' "$out/results.txt"; then
	grep '^FAIL' "$out/results.txt"
	die "profile runs failed; see $out/"
fi
