#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: rrdma against perftest on the same guests, devices, sizes,
# depths and durations, alternating A B A B over several rounds, on siw and
# on rxe, in three topologies (tests/guest/bench.sh): `pair` (two guests of
# 2 vCPUs), `pair-1cpu` (two guests of 1 vCPU: nothing oversubscribed on the
# 2-core host) and `local` (one guest of 2 vCPUs, client and server in one
# kernel on a veth pair); then the ratio tables, a JSON report and a PNG
# plot (scripts/bench-report.py).  It runs on 7.3, which `make check`
# builds; BENCH_KERNEL=6.12 runs it on the LTS kernel (built first if not
# cached); BENCH_ROUNDS sets the rounds (default 3); BENCH_TOPOLOGIES,
# BENCH_PROVIDERS and BENCH_TESTS (e.g. "read_lat rate") choose a subset.
# BENCH_PROFILE=1 (`make profile-lat`) records each READ-latency run of
# either tool with perf (BENCH_LAT_ITERS READs each, default 10000) and
# prints where each READ's CPU time goes (scripts/bench-profile.py), in
# build/profile-lat.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${BENCH_KERNEL:-7.3}
ROUNDS=${BENCH_ROUNDS:-3}
TOPOLOGIES=${BENCH_TOPOLOGIES:-pair pair-1cpu local}
PROVIDERS=${BENCH_PROVIDERS:-siw rxe}
TESTS=${BENCH_TESTS:-}
tests_arg=
[ -z "$TESTS" ] || tests_arg=" rrdma.tests=$(echo $TESTS | tr ' ' ,)"
out=build/bench
tools=
if [ "${BENCH_PROFILE:-0}" = 1 ]; then
	command -v perf >/dev/null || die "perf missing: run scripts/setup.sh (linux-perf)"
	tests_arg="$tests_arg rrdma.profile=1 rrdma.lat_iters=${BENCH_LAT_ITERS:-10000}"
	tools="--tool perf"
	out=build/profile-lat
fi
prepare_guests "$KVER"
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
logs=
for topo in $TOPOLOGIES; do
	case $topo in
	pair) guests=2 smp=2 ;;
	pair-1cpu) guests=2 smp=1 ;;
	local) guests=1 smp=2 ;;
	*) die "unknown topology $topo (pair, pair-1cpu, local)" ;;
	esac
	for prov in $PROVIDERS; do
		log "bench on $prov: $topo ($guests guest(s) of $smp vCPU), kernel $KVER, $ROUNDS rounds"
		python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
			--results "$out/results.txt" --logdir "$out" --label "bench $topo $prov" \
			--test bench --arg "$prov" --guests $guests --smp $smp --timeout 3600 \
			--memory 1024 --append "rrdma.rounds=$ROUNDS rrdma.topology=$topo$tests_arg" \
			--allow-log "$PERFTEST_CRASH" $tools \
			>"$out/guest-$topo-$prov.log" 2>&1 || true
		# The client's results: guest b's, or the one guest's.
		role=b
		[ $guests = 2 ] || role=a
		logs="$logs $out/bench_${topo}_$prov/results-$role.log"
	done
done
# Debian's python3 has the matplotlib setup.sh installs (a pyenv python3
# may come first in $PATH).
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
# The report covers what was measured even if a check failed (a failed
# measurement shows as a missing figure); the failures are listed after it
# and fail the run.
"$py" "$HERE/bench-report.py" --kernel "$KVER" --rounds "$ROUNDS" --out "$out" \
	$logs
[ -z "$tools" ] || "$py" "$HERE/bench-profile.py" $logs | tee "$out/profile.txt"
if grep -q '^FAIL' "$out/results.txt"; then
	grep '^FAIL' "$out/results.txt"
	die "bench runs failed; see $out/"
fi
