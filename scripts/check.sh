#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check`: set-up, kernels, builds, host tests, lint, KUnit and guest
# tests on every kernel in $KERNELS (default: 7.3) and again under KASAN,
# lockdep and kmemleak on $DEBUG_KERNELS (default: 6.12).  Every check is
# one `PASS|FAIL|SKIP name` line in build/results.txt; the last line printed
# is the summary `N passed, N failed[, N skipped]`, after a line that says
# how many distinct checks those results are of (scripts/distinct-checks.py).
#
# 6.12 runs in its debug build only: a cold run builds two kernels, not
# three (13 to 18 minutes each on a 2-core machine; a cold run took 77 of
# CI's 90 minutes, 2026-12-01, and 64 on a clean clone, 2026-12-02).  `make check-full` (KERNELS="6.12 7.3") adds the 6.12 base
# kernel and its perftest pair test, and the debug kernel's remote and
# small-NIC tests and its runs on rxe.  Each guest run's time is in
# build/logs/guest-times.txt.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KERNELS=${KERNELS:-7.3}
VARIANT=${VARIANT:-base}
# Kernels on which the single-guest tests, and the data-path tests on
# $DEBUG_PROVIDERS, also run under KASAN, lockdep, kmemleak and debug
# objects ("" to skip).
DEBUG_KERNELS=${DEBUG_KERNELS-6.12}
DEBUG_PROVIDERS=${DEBUG_PROVIDERS-siw rxe}
# Providers on which the debug kernels run the two-guest data-path test
# (`make check-full`: both, rxe's with the exporter's own memory; `make
# check`: none, to keep a cold run well within CI's 90 minutes: CI's cold
# run took 77 min on 2026-12-01, of which debug remote siw's 552 s on a
# slow day).  Under KASAN `make check` still moves data through the
# attack (io_uring, UNEXPORT under load, reconnects), block-device, C
# library, flood, scale and fuzzer runs; the remote test runs on 7.3.
DEBUG_REMOTE_PROVIDERS=${DEBUG_REMOTE_PROVIDERS-}
# Providers on which the debug kernels also run the small-NIC data-path
# test (`make check-full`: both; `make check` runs it on 7.3 only, to keep
# a cold run well within CI's 90 minutes).
DEBUG_SMALL_PROVIDERS=${DEBUG_SMALL_PROVIDERS-}
# Providers on which the debug kernels run the block device's test
# (`make check-full`: both; `make check`: siw, for the same reason).
DEBUG_BLK_PROVIDERS=${DEBUG_BLK_PROVIDERS-siw}
# Providers on which the debug kernels run the attack test (`make
# check-full`: both; `make check`: siw, rxe's on 7.3, for the same reason).
DEBUG_ATTACK_PROVIDERS=${DEBUG_ATTACK_PROVIDERS-siw}
# Providers on which the debug kernels run the C library's test and the
# fuzzer's short form (`make check-full`: both; `make check`: siw, the
# library's rxe run on 7.3; on a slow machine, 2026-12-01, each rxe run
# took about 95 s).
DEBUG_CAPI_PROVIDERS=${DEBUG_CAPI_PROVIDERS-siw}
DEBUG_FUZZ_PROVIDERS=${DEBUG_FUZZ_PROVIDERS-siw}
mkdir -p build
RESULTS=$REPO/build/results.txt
LOGS=$REPO/build/logs
: >"$RESULTS"
rm -rf "$LOGS"
mkdir -p "$LOGS"
T0=$(date +%s)

record() { echo "$1 $2" >>"$RESULTS"; echo "$1 $2"; }

# step NAME CMD...: one result line for a build-like step; output to a log.
step() {
	local name=$1 logf
	shift
	logf=$LOGS/$(echo "$name" | tr -c 'A-Za-z0-9.-' '_').log
	local t=$SECONDS
	if "$@" >"$logf" 2>&1; then
		record PASS "$name ($((SECONDS - t)) s)"
	else
		record FAIL "$name # see $logf"
		tail -n 30 "$logf" | sed 's/^/    /'
		return 1
	fi
}

summary() {
	local p f s line distinct checks
	p=$(grep -c '^PASS' "$RESULTS")
	f=$(grep -c '^FAIL' "$RESULTS")
	s=$(grep -c '^SKIP' "$RESULTS")
	# Most checks run once per kernel, provider and limit: say how many
	# different ones the results hold.
	distinct=$(python3 "$HERE/distinct-checks.py" "$RESULTS" 2>/dev/null) || distinct="?"
	echo
	echo "check took $(( $(date +%s) - T0 )) s; results in $RESULTS, logs in $LOGS"
	if [ "$f" -gt 0 ]; then
		echo "failures:"
		grep '^FAIL' "$RESULTS" | sed 's/^/  /'
	fi
	checks="checks: $((p + f + s)) results of $distinct distinct checks (across kernels, providers and limits)"
	line="$p passed, $f failed"
	[ "$s" -gt 0 ] && line="$line, $s skipped"
	printf '%s\n%s\n' "$checks" "$line" >"$REPO/build/summary.txt"
	echo "$checks"
	echo "$line"
	[ "$f" -eq 0 ]
}

step "setup" "$HERE/setup.sh" || { summary; exit 1; }

# Host tests: each cargo test case is one result.
if (cd rust && cargo test --workspace --locked --quiet -- --format=pretty) >"$LOGS/cargo-test.log" 2>&1; then :; fi
grep -E '^test .* \.\.\. (ok|FAILED|ignored)$' "$LOGS/cargo-test.log" | while read -r _ name _ res; do
	case $res in ok) echo "PASS host: $name" ;; FAILED) echo "FAIL host: $name" ;; *) echo "SKIP host: $name" ;; esac
done >>"$RESULTS"
grep -q '^test result: FAILED\|^error' "$LOGS/cargo-test.log" &&
	record FAIL "host: cargo test # see $LOGS/cargo-test.log"
grep -c '^PASS host' "$RESULTS" | xargs -I{} echo "host tests: {} passed"

step "build: userspace (static)" "$HERE/build-userspace.sh"
step "lint: rustfmt" "$HERE/lint.sh" rustfmt
step "lint: cargo clippy" "$HERE/lint.sh" clippy
step "lint: include/rrdma.h is what rust/capi gives (cbindgen)" "$HERE/capi-header.sh" --check
step "lint: Documentation/rrdma.rst parses" "$HERE/lint.sh" docs
step "lint: no source file over 500 lines" "$HERE/lint.sh" sizes
# `make profile-lat`'s report from a recorded sample: per-READ figures,
# the cut-off, the idle loop and perf left out.
step "report: bench-profile.py reads a recorded profile" sh -c \
	"python3 '$HERE/bench-profile.py' '$HERE/testdata/profile-sample.log' |
	diff -u '$HERE/testdata/profile-sample.txt' -"
# `make blkbench`'s tables from recorded lines: medians, ratios, and the
# ratios' range over rounds.
step "report: blkbench-report.py reads recorded runs" sh -c \
	"python3 '$HERE/blkbench-report.py' --kernel 7.3 --rounds 3 \
	'$HERE/testdata/blkbench_siw-sample.log' '$HERE/testdata/blkbench_rxe-sample.log' |
	diff -u '$HERE/testdata/blkbench-sample.txt' -"

# g KERNEL VARIANT --label LABEL ARGS...: one guest.py run on the kernel whose
# build directory is in $kdir.  A harness that dies without recording
# anything is a failure too.
g() {
	local before t=$SECONDS
	before=$(wc -l <"$RESULTS")
	# guest.py runs one guest run at a time on this machine.
	python3 "$HERE/guest.py" --kdir "$kdir" --modules "$REPO/build/mod-$1-$2" \
		--bindir "$REPO/build/bin" --results "$RESULTS" --logdir "$LOGS" "${@:3}" \
		>"$LOGS/guest-$(echo "$4" | tr -c 'A-Za-z0-9.-' '_').log" 2>&1
	[ "$(wc -l <"$RESULTS")" -gt "$before" ] ||
		record FAIL "$4: guest harness ran # see $LOGS"
	# Where the time goes (CI's 90 minutes): build/logs/guest-times.txt.
	echo "$((SECONDS - t)) s $4" >>"$LOGS/guest-times.txt"
	log "$4: $((SECONDS - t)) s"
}

linted=""
for k in $KERNELS; do
	if ! step "build: kernel $k ($VARIANT)" "$HERE/kernel.sh" "$k" "$VARIANT"; then continue; fi
	if ! step "build: modules for $k" "$HERE/build-module.sh" "$k" "$VARIANT"; then continue; fi
	step "lint: stack frames of rrdma.ko for $k" "$HERE/stack-frames.py" "$REPO/build/mod-$k-$VARIANT/rrdma.ko"
	step "install: make install and uninstall, staged ($k)" "$HERE/install-check.sh" "$k" "$VARIANT"
	# DKMS in the tree that built 7.3; its module then runs a guest test.
	dkms_built=""
	[ "$k" = 7.3 ] && step "install: preflight refusals; DKMS build, install, remove ($k)" \
		"$HERE/dkms-check.sh" "$k" "$VARIANT" "$REPO/build/mod-$k-dkms" && dkms_built=1
	[ "$k" = 6.12 ] && step "lint: checkpatch and clippy on $k" "$HERE/lint.sh" kernel "$k"
	[ "$k" = 6.12 ] && linted=1
	kdir=$("$HERE/kernel.sh" "$k" "$VARIANT" 2>/dev/null | tail -1)
	log "guest tests on $k"
	g "$k" "$VARIANT" --label "$k basic" --test basic --timeout 600
	for prov in siw rxe; do
		g "$k" "$VARIANT" --label "$k pair $prov" --test pair --arg "$prov" --guests 2 --timeout 400
		# The serving guest exports its own memory (REGION_REGISTER) here;
		# the small-NIC run, a created region.  On siw both guests load
		# the module DKMS built, when it did (one run, not two).
		if [ "$prov" = siw ] && [ -n "$dkms_built" ]; then
			g "$k" dkms --label "$k remote siw (DKMS-built module)" --test remote \
				--arg "siw,user" --guests 2 --timeout 600
		else
			g "$k" "$VARIANT" --label "$k remote $prov" --test remote --arg "$prov,user" \
				--guests 2 --timeout 600
		fi
		# The same as a small NIC (module limit_* parameters).
		g "$k" "$VARIANT" --label "$k remote $prov small" --test remote --arg "$prov,small" \
			--guests 2 --timeout 600
		g "$k" "$VARIANT" --label "$k attack $prov" --test attack --arg "$prov" --guests 2 \
			--timeout 900 --memory 1024
		g "$k" "$VARIANT" --label "$k blk $prov" --test blk --arg "$prov" --guests 2 --timeout 600
		g "$k" "$VARIANT" --label "$k capi $prov" --test capi --arg "$prov" --guests 2 --timeout 400
	done
	# The short form of `make scale`: one file's tables grown (regions to
	# 1000, exports to the cap, 16 connection pairs, a fan-out to 8
	# exporters), the release runs to its end.
	g "$k" "$VARIANT" --label "$k scale siw" --test scale --arg "siw,1000,16" --timeout 600 \
		--memory 1024 --allow-log "$PERFTEST_CRASH"
	# The short form of `make faults`: each fault once, on one provider
	# or the other, for 4 s.
	g "$k" "$VARIANT" --label "$k faults siw" --test faults --guests 2 --timeout 900 --memory 1024 \
		--arg "siw,4,loss-10+delay-20-10-ms+corrupt-1+exporter-paused+importer-killed+rdma-link-del-exporter+rmmod-in-flight"
	g "$k" "$VARIANT" --label "$k faults rxe" --test faults --guests 2 --timeout 900 --memory 1024 \
		--arg "rxe,4,loss-1+duplicate-5+reorder-25+link-down+importer-paused+exporter-killed+rdma-link-del-importer"
done

for k in $DEBUG_KERNELS; do
	[ "$VARIANT" = debug ] && break
	if ! step "build: kernel $k (debug)" "$HERE/kernel.sh" "$k" debug; then continue; fi
	if ! step "build: modules for $k (debug)" "$HERE/build-module.sh" "$k" debug; then continue; fi
	[ "$k" = 6.12 ] && [ -z "$linted" ] &&
		step "lint: checkpatch and clippy on $k (debug)" "$HERE/lint.sh" kernel "$k" debug
	kdir=$("$HERE/kernel.sh" "$k" debug 2>/dev/null | tail -1)
	log "guest tests on $k (debug)"
	g "$k" debug --label "$k debug basic" --test basic --timeout 1200 --memory 1024
	for prov in $DEBUG_PROVIDERS; do
		# rxe's serving guest exports its own memory (REGION_REGISTER).
		mem=""
		[ "$prov" = rxe ] && mem=",user"
		case " $DEBUG_REMOTE_PROVIDERS " in
		*" $prov "*)
			g "$k" debug --label "$k debug remote $prov" --test remote --arg "$prov$mem" \
				--guests 2 --timeout 1500 --memory 1024 ;;
		esac
		case " $DEBUG_SMALL_PROVIDERS " in
		*" $prov "*)
			g "$k" debug --label "$k debug remote $prov small" --test remote --arg "$prov,small" \
				--guests 2 --timeout 1500 --memory 1024 ;;
		esac
		case " $DEBUG_CAPI_PROVIDERS " in
		*" $prov "*)
			g "$k" debug --label "$k debug capi $prov" --test capi --arg "$prov" --guests 2 \
				--timeout 900 --memory 1024 ;;
		esac
		case " $DEBUG_ATTACK_PROVIDERS " in
		*" $prov "*)
			g "$k" debug --label "$k debug attack $prov" --test attack --arg "$prov" \
				--guests 2 --timeout 1800 --memory 1536 ;;
		esac
	done
	# rrdma-blk on siw (the iWARP paths: READ sinks, fences, sent writes'
	# copies); rxe's under the debug kernel in check-full.
	for prov in $DEBUG_BLK_PROVIDERS; do
		g "$k" debug --label "$k debug blk $prov" --test blk --arg "$prov" --guests 2 \
			--timeout 1800 --memory 1024
	done
	# The same under KASAN and kmemleak, smaller: 200 regions, 8
	# connection pairs, exports to a cap of 512 (not the default 4096),
	# a tenth of the samples per size and one fan-out round of 4 batches
	# without perftest beside it (scale.sh: quick on debug kernels).
	g "$k" debug --label "$k debug scale rxe" --test scale --arg "rxe,200,8,512" --timeout 1200 \
		--memory 1024 --allow-log "$PERFTEST_CRASH"
	# The short form of `make flood`: one 40 s round on rxe, where a lane
	# accept's failure once wedged the exporter (issue 43).
	g "$k" debug --label "$k debug flood rxe" --test attack --arg "rxe,flood,40" --guests 2 \
		--timeout 900 --memory 1024
	# The short form of `make fuzz`: a fixed seed, 30 seconds.
	for prov in $DEBUG_FUZZ_PROVIDERS; do
		g "$k" debug --label "$k debug fuzz $prov" --test fuzz --arg "$prov,30,4,1" \
			--timeout 600 --memory 1024
	done
done

summary
