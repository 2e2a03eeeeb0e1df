# SPDX-License-Identifier: GPL-2.0
# Helpers for guest test scripts (busybox sh); sourced.  Results go to fd 9
# (the guest's second serial port), which scripts/guest.py reads.

RRDMA_KO=/lib/rrdma/rrdma.ko
RRDMA_KUNIT_KO=/lib/rrdma/rrdma_kunit.ko

# Debian's static busybox runs its own applets before $PATH: use iproute2's.
ip() { /usr/bin/ip "$@"; }
tc() { /usr/bin/tc "$@"; }

# A result reached 10 s or more after the previous one gets a console line
# saying so: the console log shows where a run's time goes.
stamp_last=0
stamp() {
	read -r stamp_now _ </proc/uptime
	stamp_now=${stamp_now%.*}
	[ $((stamp_now - stamp_last)) -lt 10 ] || [ "$stamp_last" = 0 ] ||
		echo "# $((stamp_now - stamp_last)) s to this result (at ${stamp_now} s): $1"
	stamp_last=$stamp_now
}
ok() { stamp "$*"; echo "RRDMA-TEST: ok $*" >&9; }
fail() { stamp "$1"; echo "RRDMA-TEST: not ok $1 # $2" >&9; echo "FAILED: $1: $2"; }
skip() { stamp "$1"; echo "RRDMA-TEST: skip $1 # $2" >&9; }

# check NAME CMD...: passes if CMD exits 0; its output is kept for the reason.
check() {
	name=$1; shift
	if out=$("$@" 2>&1); then ok "$name"; else fail "$name" "$(echo "$out" | tail -n 3 | tr '\n' ' ')"; fi
}

# check_fails NAME CMD...: passes if CMD exits non-zero.
check_fails() {
	name=$1; shift
	if out=$("$@" 2>&1); then fail "$name" "unexpectedly succeeded"; else ok "$name"; fi
}

# tap PREFIX CMD...: runs a TAP-printing program and forwards its results
# (and its "# " lines to the console).
tap() {
	prefix=$1; shift
	"$@" >/tmp/tap.out 2>&1
	rc=$?
	n=0
	while IFS= read -r line; do
		case "$line" in
		# TAP's "ok N - name # SKIP why": a check that could not run here.
		"ok "*" # SKIP "*) rest=${line#ok * - }; skip "$prefix: ${rest%% # SKIP *}" "${rest#* # SKIP }"; n=$((n + 1)) ;;
		"ok "*) ok "$prefix: ${line#ok * - }"; n=$((n + 1)) ;;
		"not ok "*) rest=${line#not ok * - }; fail "$prefix: ${rest%% # *}" "${rest#* # }"; n=$((n + 1)) ;;
		# Figures the program reports go to the console log.
		"# "*) echo "$prefix: $line" ;;
		esac
	done </tmp/tap.out
	if [ "$rc" != 0 ] && ! grep -q "^not ok" /tmp/tap.out; then
		fail "$prefix: runs" "exit $rc: $(tail -n 3 /tmp/tap.out | tr '\n' ' ')"
	fi
	[ "$n" -gt 0 ] || fail "$prefix: reports results" "no result lines"
}

# Loads the soft RDMA drivers (and, through modules.dep, their dependencies).
load_rdma_drivers() {
	modprobe rdma_rxe && modprobe siw
}

# "quick" on debug kernels (kmemleak present), which move data slowly:
# the selftests then use small transfers, longer timer intervals and
# longer limits.
quick_on_debug() {
	[ -e /sys/kernel/debug/kmemleak ] && echo quick
}

# serve_ticks N: how many 0.2 s looks of wait_exit a serving guest gives
# its peer's run: N, three times as many on a debug kernel (its runs take
# 3 to 10 times longer, and the machine's speed varies up to 2.8x; the
# harness's timeout still bounds the guest).
serve_ticks() {
	if [ -e /sys/kernel/debug/kmemleak ]; then echo $(($1 * 3)); else echo "$1"; fi
}

# Module parameters of the tests.  Keepalive: an answer waits behind the
# data its sender queued before it (one queue pair carries both), and
# these emulated links move data 100 to 10000 times slower than a NIC (an
# 8 MiB operation takes 20 to 40 s on a debug kernel), so the guests run
# keepalive with a limit of 2 minutes instead of the default 30 s, past any
# operation of the suites.  The keepalive checks and the fuzzer set short
# ones of their own.
# $RRDMA_LIMITS: the device clamps (limit_*) of a test emulating a small NIC.
# Data lanes on (queue_pairs=0, the module's default: one queue pair per
# vCPU), said here so that every suite runs them whatever the default;
# $RRDMA_QUEUE_PAIRS changes that.
rrdma_params() {
	echo "keepalive_ms=15000 keepalive_misses=8 queue_pairs=${RRDMA_QUEUE_PAIRS:-0} ${RRDMA_LIMITS:-}"
}

# The soft RDMA drivers and rrdma.ko, each a check.
load_modules() {
	load_rdma_drivers || fail "soft RDMA drivers load" "modprobe failed"
	check "rrdma.ko loads" insmod $RRDMA_KO $(rrdma_params)
}

# Round trips from the tools' output on stdin, in whole microseconds:
# busybox ping's "round-trip min/avg/max = a/b/c ms" average, and the p50
# of `rrdma-selftest udp-ping`'s JSON.  Nothing if there is none.
icmp_avg_us() {
	sed -n 's|.*min/avg/max = [0-9.]*/\([0-9.]*\)/.*|\1|p' | awk '{ printf "%.0f", $1 * 1000 }'
}
udp_p50_us() { sed -n 's/.*"p50_us": \([0-9]*\).*/\1/p'; }

# wire_up PROV DEV: a two-guest test's start on either guest: eth0 up with
# this guest's address, the soft RDMA drivers and rrdma.ko loaded, RDMA
# device DEV of type PROV on eth0 and ACTIVE.
wire_up() {
	# The checks that differ by provider (iWARP or not) read it.
	export RRDMA_PROV=$1
	ip link set lo up
	check "eth0 up with $RRDMA_SELF" sh -c \
		"/usr/bin/ip link set eth0 up && /usr/bin/ip addr add $RRDMA_SELF/24 dev eth0"
	load_modules
	check "rdma link add $2 on eth0" rdma link add "$2" type "$1" netdev eth0
	wait_active "$2"
}

# A veth pair, both ends up: one guest can carry siw and rxe without a NIC.
make_veth() {
	ip link add veth0 type veth peer name veth1 &&
		ip link set veth0 up && ip link set veth1 up &&
		ip link set lo up
}

# Waits until the named RDMA device's port is ACTIVE (at most ~10 s).
wait_active() {
	i=0
	while [ $i -lt 100 ]; do
		rdma link show "$1/1" 2>/dev/null | grep -q "state ACTIVE" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# wait_exit PID TICKS: waits up to TICKS x 0.2 s for background job PID;
# returns its exit status, or kills it and returns 124.
wait_exit() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt "$2" ]; do
		sleep 0.2
		i=$((i + 1))
	done
	if kill -0 "$1" 2>/dev/null; then
		kill "$1"
		return 124
	fi
	wait "$1"
}

# wait_cm_listen PORT PROV: waits (at most ~30 s) until an rdma_cm id
# listens on PORT and, on siw, the device too: rdma_cm marks the id LISTEN
# before siw's TCP listener (the port in hex, state 0A) is up, and a
# client that connects in between is refused.
wait_cm_listen() {
	i=0
	until rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1" ||
		[ $i -ge 150 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	hex=$(printf '%04X' "$1")
	while [ "$2" = siw ] && ! grep -q ":$hex 00000000:0000 0A" /proc/net/tcp &&
		[ $i -lt 150 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	sleep 0.2
}

# Waits until the peer answers ping (at most ~30 s).
wait_peer() {
	i=0
	until ping -c 1 -W 1 "$RRDMA_PEER" >/dev/null 2>&1 || [ $i -ge 30 ]; do i=$((i + 1)); done
}

# Waits until the peer's `rrdma serve --control 7470` hands out tokens.
wait_tokens() {
	i=0
	until echo tokens | nc "$RRDMA_PEER" 7470 2>/dev/null | grep -q rw || [ $i -ge 150 ]; do
		sleep 0.2
		i=$((i + 1))
	done
}

# Debug kernels: two kmemleak scans, 6 s apart.  A scan reports an object
# only if it is unreferenced, older than kmemleak's minimum age (5 s) and
# unchanged since the previous scan (its checksum starts at ~0, so the
# first scan that sees an object only records it): one scan reports
# nothing.  Reports accumulate in /sys/kernel/debug/kmemleak.
kmemleak_scan() {
	echo scan >/sys/kernel/debug/kmemleak
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
}

# rrdma's tracepoints (shim/trace.h) during a test: trace_start enables
# TRACE_SYSTEM rrdma (the module loaded) and copies the events to
# /tmp/rrdma.trace from the start; it fails on a kernel without tracefs
# (CONFIG_TRACING off).  trace_stop ends it; trace_has EVENT
# [TEXT] checks that an EVENT line (with TEXT) was recorded.
TRACEFS=/sys/kernel/tracing
trace_start() {
	[ -d $TRACEFS ] || return 1
	[ -e $TRACEFS/trace_pipe ] || mount -t tracefs nodev $TRACEFS 2>/dev/null || return 1
	[ -d $TRACEFS/events/rrdma ] || return 1
	echo 4096 >$TRACEFS/buffer_size_kb
	echo 1 >$TRACEFS/events/rrdma/enable || return 1
	cat $TRACEFS/trace_pipe >/tmp/rrdma.trace &
	TRACE_PID=$!
}

trace_stop() {
	echo 0 >$TRACEFS/events/rrdma/enable
	sleep 1
	kill $TRACE_PID
	wait $TRACE_PID 2>/dev/null
}

# trace_summary: how many of each event, and the first of each, on the
# console.
trace_summary() {
	echo "# trace: $(grep -c ' rrdma_' /tmp/rrdma.trace) rrdma events"
	for e in $(sed -n 's/.* \(rrdma_[a-z_]*\): .*/\1/p' /tmp/rrdma.trace | sort -u); do
		echo "#   $e: $(grep -c " $e: " /tmp/rrdma.trace), first: $(grep -m 1 " $e: " /tmp/rrdma.trace |
			sed 's/.*: rrdma_[a-z_]*: //')"
	done
}

trace_has() {
	grep " $1: " /tmp/rrdma.trace | grep -q -- "${2:-}" && return 0
	echo "no $1${2:+ with '$2'} in the trace ($(grep -c ' rrdma_' /tmp/rrdma.trace) rrdma events)"
	return 1
}
