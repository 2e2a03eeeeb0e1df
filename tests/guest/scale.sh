# SPDX-License-Identifier: GPL-2.0
# How cost grows with what one file holds (issue 47), in one guest, on the
# provider of the argument "PROV,MAX,CONNS" (siw or rxe): rrdma-selftest
# scale connects the file to this guest's own address and grows its
# regions to MAX, its exports to the file's cap, its imports to MAX/10 and
# its connection pairs to CONNS, measuring at each size (see
# rust/selftest/src/scale.rs); every call must succeed, and once the file
# is closed its release must have run to its end. First, the per-file and
# per-user caps on connections, regions and exports
# (rust/selftest/src/caps.rs).
. ./lib.sh

# Last, the fan-out: one initiator's imports spread over FANOUT exporters
# (rust/selftest/src/fanout.rs).
# "PROV[,MAX[,CONNS[,EXPORTS[,FANOUT]]]]" (defaults 1000, 20, the module's
# export caps and 8; an empty EXPORTS keeps the caps).
old_ifs=$IFS
IFS=,
set -- $RRDMA_ARG
IFS=$old_ifs
prov=$1 max=${2:-1000} conns=${3:-20} exports=${4:-} fanout=${5:-8}

# cmtime_beside PROV RRDMA_P50_US: rdma_cm's own connect time on the same
# device and address, beside rrdma's: rdma-core's cmtime, one connection
# per run (as rrdma's connects are timed one at a time), CMTIME_RUNS runs
# against one server; each run's time is the sum of its steps up to the
# connection's establishment (create id, resolve address, resolve route,
# create QP, connect), as rrdma's CONNECT does them all.
cmtime_beside() {
	runs=${CMTIME_RUNS:-21}
	cmtime -b 10.77.0.1 -p 7470 >/tmp/cmtime-server.log 2>&1 &
	server=$!
	# On siw the id listens before the device does (lib.sh).
	wait_cm_listen 7470 "$1"
	: >/tmp/cmtime.us
	i=0
	while [ $i -lt "$runs" ]; do
		# A run refused or timed out on a slow guest is tried again, twice:
		# the check is that rdma_cm connects, not how soon it is ready.
		tries=0
		until cmtime -s 10.77.0.1 -p 7470 -c 1 >/tmp/cmtime.out 2>&1; do
			tries=$((tries + 1))
			[ $tries -ge 3 ] && break
			sleep 1
		done
		[ $tries -ge 3 ] && break
		awk -F: '/^(create id|resolve addr|resolve route|create qp|connect) *:/ {
			n = split($2, f, " "); us += f[n]; step[++steps] = f[n] }
			END { if (steps == 5) printf "%.0f %.0f %.0f %.0f %.0f %.0f\n",
				us, step[1], step[2], step[3], step[4], step[5] }' /tmp/cmtime.out >>/tmp/cmtime.us
		i=$((i + 1))
	done
	kill $server 2>/dev/null
	wait $server 2>/dev/null
	got=$(grep -c . /tmp/cmtime.us)
	if [ "$got" != "$runs" ]; then
		fail "cmtime $1: $runs runs of rdma_cm's own connect" \
			"$got timed: $(tail -n 3 /tmp/cmtime.out | tr '\n' ' ')"
		return
	fi
	ok "cmtime $1: $runs runs of rdma_cm's own connect"
	# The p50 of each column: the whole, then each step in its order.
	p50s=
	for col in 1 2 3 4 5 6; do
		p50s="$p50s $(cut -d' ' -f$col /tmp/cmtime.us | sort -n | sed -n "$((runs / 2 + 1))p")"
	done
	set -- "$1" "$2" $p50s
	cm_max=$(sort -n /tmp/cmtime.us | tail -n 1 | cut -d' ' -f1)
	ratio=$(awk -v a="${2:-0}" -v b="$3" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "?x" }')
	echo "scale $1: # rdma_cm's own connect (cmtime, $runs runs of one connection): p50 $3 us" \
		"(step p50s: create id $4, resolve address $5, route $6, create QP $7, connect $8), max $cm_max us;" \
		"rrdma's connect p50 ${2:-?} us is $ratio of it"
}

# perftest's 4 KiB WRITE message rate (Mpps) through QPS queue pairs of
# DEPTH each, client and server on this guest's own address: what the
# provider itself does when the same work is spread over more queue pairs.
# Up to 3 attempts, each with a fresh server: perftest 4.5's client
# sometimes dies in librdmacm (a general protection fault, which the
# kernel logs; check.sh allows that report for this test).
pt_rate() { # PROV QPS DEPTH
	args="-R -d ${1}0 -F -s 4096 -D 2 -t $3 -q $2 -p 18600"
	for pt_try in 1 2 3; do
		timeout 30 ib_write_bw $args >/tmp/pt-server.out 2>&1 &
		server=$!
		wait_cm_listen 18600 "$1"
		timeout 30 ib_write_bw $args 10.77.0.1 >/tmp/pt-client.out 2>&1
		rate=$(awk '$1 == 4096 && NF == 5 { r = $5 } END { if (r != "") print r }' \
			/tmp/pt-client.out)
		# A server whose client died waits for it until its timeout.
		[ -n "$rate" ] || kill $server 2>/dev/null
		wait $server
		if [ -n "$rate" ]; then
			echo "$rate"
			return
		fi
		echo "# perftest attempt $pt_try gave no rate: $(tail -n 2 /tmp/pt-client.out | tr '\n' ' ')" >&2
		sleep 1
	done
}

# Beside rrdma's fan-out: perftest's rate with 32 WRITEs in flight on one
# queue pair, and on 8 with 4 each (as the fan-out's 8 connections), in
# alternated order; the ratio says whether a drop is the provider's.
pt_fanout() { # PROV
	one= eight=
	for round in 1 2; do
		one="$one $(pt_rate "$1" 1 32)"
		eight="$eight $(pt_rate "$1" 8 4)"
	done
	set -- "$1" $one $eight
	if [ $# -ne 5 ]; then
		fail "fanout $1: perftest beside it" "ib_write_bw gave no rate: $(tail -n 2 /tmp/pt-client.out | tr '\n' ' ')"
		return
	fi
	ok "fanout $1: perftest beside it"
	awk -v p="$1" -v a="$2" -v b="$3" -v c="$4" -v d="$5" 'BEGIN {
		printf "fanout %s: # perftest beside it (ib_write_bw 4 KiB, 32 in flight, busy-polled, 2 alternated rounds): 1 queue pair %.0f ops/s, 8 with 4 each %.0f ops/s: %.2fx\n",
			p, (a + b) * 5e5, (c + d) * 5e5, (c + d) / (a + b) }'
}

load_modules
make_veth || fail "veth pair" "ip link failed"
check "veth0 has 10.77.0.1" ip addr add 10.77.0.1/24 dev veth0
check "rdma link add ${prov}0 on veth0" rdma link add ${prov}0 type $prov netdev veth0
wait_active ${prov}0
tap "caps $prov" rrdma-selftest caps 10.77.0.1
if [ -n "$exports" ]; then
	check "export caps $exports" sh -c "echo $exports > /sys/module/rrdma/parameters/max_file_exports &&
		echo $exports > /sys/module/rrdma/parameters/max_user_exports"
fi
# On a debug kernel, fewer samples: that run looks for failed calls and
# leaks, not figures. Its fan-out rounds took 345 s of its 500 with all
# of them (2026-12-01), and perftest's figure beside them means nothing
# there.
quick=$(quick_on_debug)
tap "scale $prov" rrdma-selftest scale 10.77.0.1 "$max" "$conns" $quick
[ "$conns" -gt 0 ] && cmtime_beside "$prov" "$(sed -n 's/.*: connect p50 \([0-9]*\) us.*/\1/p' /tmp/tap.out)"
tap "fanout $prov" rrdma-selftest fanout 10.77.0.1 "$fanout" $quick
[ -n "$quick" ] || pt_fanout "$prov"
check "rdma link del ${prov}0" rdma link del ${prov}0
check "rmmod rrdma" rmmod rrdma
