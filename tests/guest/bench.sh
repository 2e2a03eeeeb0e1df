# SPDX-License-Identifier: GPL-2.0
# `make bench` (run on both guests): perftest and rrdma bench side by side on
# the provider given as the argument (siw or rxe), alternating A B A B.
#
# Both guests walk the same schedule.  Guest a runs `rrdma serve` for the
# whole run and one perftest server per perftest step (each waits for its
# client); guest b runs the clients and writes one `RRDMA-BENCH {json}` line
# per measurement to the results port, which scripts/bench-report.py reads.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
ROUNDS=$(sed -n 's/.*rrdma\.rounds=\([0-9]*\).*/\1/p' /proc/cmdline)
ROUNDS=${ROUNDS:-3}
SIZES="4096 65536 1048576"
DEPTH=16
SECS=2
LAT_ITERS=300

wire_up "$prov" "$dev"

emit() { echo "RRDMA-BENCH $*" >&9; }

# CPU time of this guest and of the peer (serve's `cpustat`): /proc/stat's
# "cpu" line, in USER_HZ ticks, sampled around each run of either tool.
cpu_here() { sed -n 's/^cpu  *//p' /proc/stat; }
cpu_peer() { echo cpustat | nc "$RRDMA_PEER" 7470; }
cpu_begin() { c0=$(cpu_here); p0=$(cpu_peer); }
cpu_json() {
	echo "\"cpu\":{\"client\":[\"$c0\",\"$(cpu_here)\"],\"server\":[\"$p0\",\"$(cpu_peer)\"]}"
}

# The schedule: "ROUND TEST SIZE" lines, each run by perftest then rrdma.
schedule() {
	r=1
	while [ $r -le "$ROUNDS" ]; do
		for s in $SIZES; do
			echo "$r write_bw $s"
			echo "$r read_bw $s"
		done
		for s in $SIZES; do
			echo "$r read_lat $s"
		done
		r=$((r + 1))
	done
}

perftest_args() { # TEST SIZE
	case $1 in
	write_bw) echo "ib_write_bw -R -d $dev -F -s $2 -D $SECS -t $DEPTH" ;;
	read_bw) echo "ib_read_bw -R -d $dev -F -s $2 -D $SECS -t $DEPTH -o $DEPTH" ;;
	read_lat) echo "ib_read_lat -R -d $dev -F -s $2 -n $LAT_ITERS" ;;
	esac
}

if [ "$RRDMA_ROLE" = a ]; then
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 8192 --access rw \
		>/tmp/serve.out 2>&1 &
	spid=$!
	schedule >/tmp/schedule
	while read -r round test size; do
		# Each server waits for its client.
		timeout 300 $(perftest_args "$test" "$size") >/tmp/pt-server.out 2>&1 ||
			echo "perftest server $test $size failed: $(tail -n 2 /tmp/pt-server.out)"
	done </tmp/schedule
	# Serve until the peer says quit.
	wait_exit $spid 1500
	ok "bench server on $dev"
else
	wait_peer
	wait_tokens
	emit "{\"kind\":\"memcpy\",\"provider\":\"$prov\",\"value\":$(rrdma-selftest memcpy)}"
	emit "{\"kind\":\"memory\",\"provider\":\"$prov\",\"value\":$(rrdma-selftest memory "$RRDMA_PEER")}"
	t="--peer $RRDMA_PEER:7471 --token @$RRDMA_PEER:7470/rw"
	fails=0
	schedule >/tmp/schedule
	while read -r round test size; do
		# A: perftest (its server may still be starting: retry).
		cpu_begin
		n=0
		until out=$(timeout 120 $(perftest_args "$test" "$size") "$RRDMA_PEER" 2>&1); do
			n=$((n + 1))
			[ $n -ge 40 ] && break
			sleep 0.5
		done
		cpu=$(cpu_json)
		line=$(echo "$out" | awk -v s="$size" '$1 == s { print; exit }')
		if [ -z "$line" ]; then
			fails=$((fails + 1))
			echo "perftest $test $size: no result: $(echo "$out" | tail -n 3)"
		else
			set -- $line
			if [ "$test" = read_lat ]; then
				# #bytes #iter t_min t_max t_typical t_avg t_stdev 99% 99.9%
				emit "{\"kind\":\"run\",\"provider\":\"$prov\",\"tool\":\"perftest\",\"test\":\"$test\",\"size\":$size,\"round\":$round,\"iterations\":$2,\"t_min\":\"$3\",\"p50\":\"$5\",\"t_avg\":\"$6\",\"p99\":\"$8\",\"p99_9\":\"$9\",$cpu}"
			else
				# #bytes #iterations BW_peak BW_avg MsgRate.  With -D,
				# iterations over the requested seconds (timed by
				# alarm(2), the guest's clock) is the rate; perftest's
				# own MB/s samples its cycle counter, unreliable under
				# TCG, and is kept for reference.
				emit "{\"kind\":\"run\",\"provider\":\"$prov\",\"tool\":\"perftest\",\"test\":\"$test\",\"size\":$size,\"round\":$round,\"iterations\":$2,\"seconds\":$SECS,\"bw_reported_mbps\":\"$4\",$cpu}"
			fi
		fi
		# B: rrdma, same size, depth and duration.
		case $test in
		write_bw) args="--op write --size $size --depth $DEPTH --duration $SECS" ;;
		read_bw) args="--op read --size $size --depth $DEPTH --duration $SECS" ;;
		read_lat) args="--latency --op read --size $size --iters $LAT_ITERS" ;;
		esac
		cpu_begin
		if out=$(rrdma bench $t $args --json 2>&1); then
			emit "{\"kind\":\"run\",\"provider\":\"$prov\",\"tool\":\"rrdma\",\"test\":\"$test\",\"size\":$size,\"round\":$round,\"result\":$out,$(cpu_json)}"
		else
			fails=$((fails + 1))
			echo "rrdma bench $test $size: $out"
		fi
	done </tmp/schedule
	check "every measurement on $dev produced a result" test "$fails" = 0
	echo quit | nc "$RRDMA_PEER" 7470 >/dev/null
fi
rdma link del "$dev"
check "rmmod rrdma" rmmod rrdma
