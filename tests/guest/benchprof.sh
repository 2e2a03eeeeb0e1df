# SPDX-License-Identifier: GPL-2.0
# Sourced by bench.sh.  With rrdma.profile=1 on the kernel command line
# (`make profile-lat`), each READ-latency run of either tool (perftest's
# ib_read_lat and every rrdma variant) runs under `perf record -a -g -e
# cpu-clock` (a timer, the only sampling event a TCG guest has, one
# sample per millisecond of a CPU's time), and perf's reports of it go to
# the results port as `RRDMA-PROF TOOL ROUND PROVIDER TOPOLOGY ITERS KIND
# LINE` lines: KIND `self` (samples by task, object and symbol),
# `children` (by symbol, with what it calls) and `packets` (the frames
# every network interface of the guest sent during the run).
# scripts/bench-profile.py turns them into CPU microseconds per READ,
# rrdma's runs beside perftest's.  Without rrdma.profile=1 the functions
# below do nothing.

PROFILE=$(sed -n 's/.*rrdma\.profile=\([01]\).*/\1/p' /proc/cmdline)
prof_pid=
if [ "$PROFILE" = 1 ]; then
	command -v perf >/dev/null || fail "perf in the guest" "guest.py --tool perf"
	# Kernel symbols for perf (root may read them; the default hides
	# them from perf's own checks).
	echo 0 >/proc/sys/kernel/kptr_restrict
	echo -1 >/proc/sys/kernel/perf_event_paranoid
fi

# prof_start: the recording of the run about to start, if this is a
# profiled READ-latency run (any earlier one, a failed attempt's, ends).
# perf runs beside the tool, not around it, so that its messages stay out
# of the tool's output; it records once its file has a header.
prof_start() {
	[ "$PROFILE" = 1 ] && [ "$test" = read_lat ] || return 0
	prof_kill
	rm -f /tmp/perf.data
	perf record -q -a -g -e cpu-clock -c 1000000 -o /tmp/perf.data \
		>/tmp/perf.err 2>&1 &
	prof_pid=$!
	i=0
	until [ -s /tmp/perf.data ] || [ $i -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	prof_pkts=$(tx_packets)
}

# Frames sent by every interface here and in namespace b (if any): with
# one guest, both ends of every connection.
tx_packets() {
	{
		cat /proc/net/dev
		[ -z "$CLI" ] || $CLI cat /proc/net/dev
	} | awk -F: 'NF == 2 { split($2, f, " "); n += f[10] } END { print n + 0 }'
}

prof_kill() {
	[ -n "$prof_pid" ] || return 0
	kill -INT "$prof_pid" 2>/dev/null
	wait "$prof_pid" 2>/dev/null
	prof_pid=
}

# prof_stop TOOL: ends the recording and writes perf's reports of it as
# TOOL's.
prof_stop() {
	[ -n "$prof_pid" ] || return 0
	prof_kill
	pfx="RRDMA-PROF $1 $round $prov $topology $LAT_ITERS"
	echo "$pfx packets $(($(tx_packets) - prof_pkts))" >&9
	perf report -i /tmp/perf.data --stdio -n --no-children -s comm,dso,sym -g none \
		--percent-limit 0.02 2>/dev/null | grep -E '^# Samples|^ ' |
		sed "s|^|$pfx self |" >&9
	perf report -i /tmp/perf.data --stdio -n --children -s sym -g none \
		--percent-limit 1 2>/dev/null | grep '^ ' |
		sed "s|^|$pfx children |" >&9
}
