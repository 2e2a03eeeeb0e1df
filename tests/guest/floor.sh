# SPDX-License-Identifier: GPL-2.0
# `make floor` (run on both guests): the latency floor of the guests' own
# setup, under every RDMA figure of `make bench`.  On the provider given as
# the argument (siw or rxe), guest b measures, one at a time: ICMP ping, a
# UDP ping-pong, perftest ib_send_lat / ib_write_lat / ib_read_lat and
# rrdma's synchronous READ, at 8 B, 4 KiB and 64 KiB (UDP and ping: 60000
# B, below the datagram limit; rrdma: 4 KiB blocks, so no 8 B figure).
# Each figure is a `# floor ...` line on the console and a `RRDMA-FLOOR
# {json}` line on the results port; the checks are that every measurement
# produced a figure.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
SIZES="8 4096 65536"
ITERS=100

wire_up "$prov" "$dev"

emit() { # KIND SIZE P50_US [JSON-EXTRA]
	echo "# floor $prov $1 $2 B: p50 $3 us"
	echo "RRDMA-FLOOR {\"provider\":\"$prov\",\"kind\":\"$1\",\"size\":$2,\"p50_us\":$3${4:+,$4}}" >&9
}

PERFTESTS="ib_send_lat ib_write_lat ib_read_lat"

if [ "$RRDMA_ROLE" = a ]; then
	rrdma-selftest udp-echo 7480 >/dev/null 2>&1 &
	epid=$!
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 64 --access rw \
		>/tmp/serve.out 2>&1 &
	spid=$!
	for t in $PERFTESTS; do
		for s in $SIZES; do
			timeout 300 $t -R -d "$dev" -F -s "$s" -n $ITERS >/tmp/pt-server.out 2>&1 ||
				echo "perftest server $t $s failed: $(tail -n 2 /tmp/pt-server.out)"
		done
	done
	wait_exit $spid 1500
	kill $epid
	ok "floor server on $dev"
else
	wait_peer
	wait_tokens
	fails=0
	fail() { fails=$((fails + 1)); echo "$*"; }
	for s in $SIZES; do
		[ "$s" = 65536 ] && s=60000
		out=$(ping -c 20 -s "$s" "$RRDMA_PEER" 2>&1)
		avg=$(echo "$out" | icmp_avg_us)
		if [ -n "$avg" ]; then
			emit icmp_avg "$s" "$avg"
		else
			fail "ping -s $s: $(echo "$out" | tail -n 2)"
		fi
	done
	for s in 8 4096 60000; do
		if out=$(rrdma-selftest udp-ping "$RRDMA_PEER:7480" "$s" $ITERS 2>&1); then
			emit udp "$s" "$(echo "$out" | udp_p50_us)" \
				"\"udp\":$out"
		else
			fail "udp-ping $s: $out"
		fi
	done
	for t in $PERFTESTS; do
		for s in $SIZES; do
			n=0
			until out=$(timeout 120 $t -R -d "$dev" -F -s "$s" -n $ITERS "$RRDMA_PEER" 2>&1); do
				n=$((n + 1))
				[ $n -ge 40 ] && break
				sleep 0.5
			done
			# #bytes #iter t_min t_max t_typical ... (microseconds)
			typ=$(echo "$out" | awk -v s="$s" '$1 == s { print $5; exit }')
			if [ -n "$typ" ]; then
				emit "$t" "$s" "$(awk -v a="$typ" 'BEGIN { printf "%.0f", a }')"
			else
				fail "$t $s: $(echo "$out" | tail -n 3)"
			fi
		done
	done
	tok="--peer $RRDMA_PEER:7471 --token @$RRDMA_PEER:7470/rw"
	# rrdma moves whole blocks (4 KiB here): no 8-byte figure.
	for s in 4096 65536; do
		if out=$(rrdma bench $tok --latency --op read --size "$s" --iters $ITERS --json 2>&1); then
			p50=$(echo "$out" | sed -n 's/.*"p50": *\([0-9.]*\).*/\1/p')
			emit rrdma_read "$s" "$(awk -v a="$p50" 'BEGIN { printf "%.0f", a }')" \
				"\"rrdma\":$out"
		else
			fail "rrdma bench read latency $s: $out"
		fi
	done
	check "every floor measurement on $dev produced a figure" test "$fails" = 0
	echo quit | nc "$RRDMA_PEER" 7470 >/dev/null
fi
rdma link del "$dev"
check "rmmod rrdma" rmmod rrdma
