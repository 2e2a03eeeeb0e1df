# SPDX-License-Identifier: GPL-2.0
# `make bench`: perftest and rrdma bench side by side on the provider given
# as the argument (siw or rxe), alternating A B A B, in the topology named
# by rrdma.topology= (scripts/bench.sh):
#
#   pair, pair-1cpu  two guests (2 or 1 vCPUs each); guest a is the server,
#                    guest b the client.
#   local            one guest: the server in the initial network namespace
#                    on veth0, the client in namespace "b" on veth1, one
#                    RDMA device on each end.  Where the provider cannot
#                    connect across namespaces (siw on 6.12 and 7.3, rxe on
#                    6.12), both ends stay in the initial namespace and
#                    rdma_cm carries the connection over the local device;
#                    the report names which ("local-netns"/"local-loopback",
#                    with the failed probe's error).
#
# The server side runs `rrdma serve` (4 KiB and 512 B blocks), a UDP echo
# and one perftest server per perftest step (each waits for its client).
# The client side measures ICMP and UDP round trips once, then walks the
# schedule and writes one `RRDMA-BENCH {json}` line per measurement to the
# results port, which scripts/bench-report.py reads.
. ./lib.sh
. ./benchprof.sh

prov=$RRDMA_ARG
topo=$(sed -n 's/.*rrdma\.topology=\([a-z0-9-]*\).*/\1/p' /proc/cmdline)
topo=${topo:-pair}
ROUNDS=$(sed -n 's/.*rrdma\.rounds=\([0-9]*\).*/\1/p' /proc/cmdline)
ROUNDS=${ROUNDS:-3}
# rrdma.tests=a,b: only these tests of the schedule (all by default).
TESTS=$(sed -n 's/.*rrdma\.tests=\([a-z_,]*\).*/\1/p' /proc/cmdline | tr , ' ')
SIZES="4096 65536 1048576"
# `make profile-lat` profiles the 4 KiB READ only.
[ "$PROFILE" = 1 ] && SIZES=4096
DEPTH=16
RATE_SIZES="512 4096"
RATE_DEPTHS="1 16 128"
# Aggregate WRITE bandwidth by queue pairs (perftest -q, rrdma bench
# --queues: one connection and thread each), depth 16 per queue pair; at 2,
# also 2 threads on one connection with and without its data lanes.
QUEUE_SIZES="4096 65536"
QUEUES="1 2"
SECS=2
# rrdma.lat_iters=N: READ-latency iterations (`make profile-lat` takes more).
LAT_ITERS=$(sed -n 's/.*rrdma\.lat_iters=\([0-9]*\).*/\1/p' /proc/cmdline)
LAT_ITERS=${LAT_ITERS:-300}
FLOOR_ITERS=100

# The schedule: "ROUND TEST SIZE DEPTH [QUEUES]" lines, each run by
# perftest then rrdma.  `rate` is WRITE's message rate, `write_q` WRITE's
# bandwidth through QUEUES queue pairs.
schedule() {
	if [ -n "$TESTS" ]; then
		full_schedule | while read -r line; do
			set -- $line
			case " $TESTS " in *" $2 "*) echo "$line" ;; esac
		done
	else
		full_schedule
	fi
}

full_schedule() {
	r=1
	while [ $r -le "$ROUNDS" ]; do
		for s in $SIZES; do
			echo "$r write_bw $s $DEPTH"
			echo "$r read_bw $s $DEPTH"
		done
		for s in $SIZES; do
			echo "$r read_lat $s 1"
		done
		for s in $RATE_SIZES; do
			for d in $RATE_DEPTHS; do
				echo "$r rate $s $d"
			done
		done
		for s in $QUEUE_SIZES; do
			for q in $QUEUES; do
				echo "$r write_q $s $DEPTH $q"
			done
		done
		r=$((r + 1))
	done
}

perftest_args() { # DEV TEST SIZE DEPTH [QUEUES]
	case $2 in
	write_bw | rate) echo "ib_write_bw -R -d $1 -F -s $3 -D $SECS -t $4" ;;
	write_q) echo "ib_write_bw -R -d $1 -F -s $3 -D $SECS -t $4 -q ${5:-1}" ;;
	read_bw) echo "ib_read_bw -R -d $1 -F -s $3 -D $SECS -t $4 -o $4" ;;
	read_lat) echo "ib_read_lat -R -d $1 -F -s $3 -n $LAT_ITERS" ;;
	esac
}

# The server: every test's peer, until the client says quit.  It listens
# on $SRV_ADDR: with one guest, the server's own address (a wildcard listen
# would also reach for the client's device, in the other namespace).  With
# two guests it starts each perftest server when the client asks (TCP port
# 7490, `sh bench.sh step`); with one, the client starts each itself.
server() { # DEV
	rrdma-selftest udp-echo 7480 >/dev/null 2>&1 &
	epid=$!
	rrdma serve --listen $SRV_ADDR:7471 --control 7470 --blocks 8192 --access rw \
		>/tmp/serve.out 2>&1 &
	spid=$!
	rrdma serve --listen $SRV_ADDR:7472 --control 7473 --block-size 512 --blocks 8192 \
		--access rw >/tmp/serve512.out 2>&1 &
	spid512=$!
	# With two guests, perftest servers on the client's request (step_ask).
	rm -f /tmp/pt.quit /tmp/pt.pid
	bad=0
	while [ "$topo" != local ] && [ ! -f /tmp/pt.quit ] && [ $bad -lt 50 ]; do
		if timeout 1800 nc -l -p 7490 -e sh /tests/guest/bench.sh step; then
			bad=0
		else
			bad=$((bad + 1))
			sleep 0.2
		fi
	done
	# Until the client says quit (the guest's own timeout bounds it).
	wait_exit $spid 18000
	wait_exit $spid512 100
	kill $epid
}

emit() { echo "RRDMA-BENCH $*" >&9; }

# Waits (up to ~30 s) until a perftest server listens: its rdma_cm id on
# perftest's port.  A client that connects earlier is refused, and after a
# failed first attempt perftest 4.5's client sometimes dies in librdmacm (a
# general protection fault in rdma_resolve_addr); it also happens, more
# rarely, against a listening server (rxe: "Operation not supported"
# first).  The client then retries with a fresh server (step_ask): a
# server that outlived its client must not meet the next step's client.
pt_listening() {
	wait_cm_listen 18515 "$prov"
}

# Ends the perftest server of an earlier step or attempt, if any.
step_stop() {
	[ -f /tmp/pt.pid ] || return 0
	p=$(cat /tmp/pt.pid)
	rm -f /tmp/pt.pid
	kill "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

# step_start ROUND TEST SIZE DEPTH [QUEUES]: a fresh perftest server for
# the step on $dev, listening when this returns.
step_start() {
	step_stop
	timeout 300 $(perftest_args "$dev" "$2" "$3" "$4" "${5:-1}") </dev/null >>/tmp/pt-server.out 2>&1 &
	echo $! >/tmp/pt.pid
	pt_listening
}

# step_ask ROUND TEST SIZE DEPTH [QUEUES]: the client's side: a listening perftest
# server for the step (on the peer, or here with one guest).
step_ask() {
	if [ "$topo" = local ]; then
		step_start "$@"
		return 0
	fi
	[ "$(echo "start $*" | timeout 60 nc "$PEER" 7490)" = ready ]
}

# CPU time from /proc/stat's "cpu" line (USER_HZ ticks), sampled around
# each run of either tool: this guest and the peer's (serve's `cpustat`);
# with one guest, the one guest's, for both sides together.
cpu_here() { sed -n 's/^cpu  *//p' /proc/stat; }
cpu_peer() { echo cpustat | $CLI nc "$PEER" 7470; }
cpu_begin() {
	c0=$(cpu_here)
	[ "$topo" = local ] || p0=$(cpu_peer)
}
cpu_json() {
	if [ "$topo" = local ]; then
		echo "\"cpu\":{\"guest\":[\"$c0\",\"$(cpu_here)\"]}"
	else
		echo "\"cpu\":{\"client\":[\"$c0\",\"$(cpu_here)\"],\"server\":[\"$p0\",\"$(cpu_peer)\"]}"
	fi
}

# run_tool TOOL WHAT ARG...: one run of `rrdma bench $t ARG...`, its
# result emitted as TOOL's with the CPU time beside; a failure is counted
# and shown with WHAT (how the run differs from the plain one).
run_tool() {
	rt_tool=$1 rt_what=$2
	shift 2
	prof_start
	cpu_begin
	if out=$($CLI rrdma bench $t "$@" --json 2>&1); then
		emit "{\"kind\":\"run\",\"tool\":\"$rt_tool\",$tag,\"result\":$out,$(cpu_json)}"
		prof_stop "$rt_tool"
	else
		prof_kill
		fails=$((fails + 1))
		echo "rrdma bench $rt_what $test $size $depth: $out"
	fi
}

# run_with PARAM VALUE TOOL ARG...: run_tool with the module parameter
# PARAM set to VALUE, and set back as it was.
run_with() {
	rw_param=/sys/module/rrdma/parameters/$1 rw_what="($1=$2)" rw_value=$2 rw_tool=$3
	shift 3
	rw_was=$(cat "$rw_param")
	echo "$rw_value" >"$rw_param"
	run_tool "$rw_tool" "$rw_what" "$@"
	echo "$rw_was" >"$rw_param"
}

# ICMP and UDP round trips of this topology (the floor under every RDMA
# figure), once before the rounds.
floor() {
	for s in 8 4096 60000; do
		out=$($CLI ping -c 20 -s "$s" "$PEER" 2>&1)
		avg=$(echo "$out" | icmp_avg_us)
		if [ -n "$avg" ]; then
			emit "{\"kind\":\"floor\",\"provider\":\"$prov\",\"topology\":\"$topology\",\"test\":\"icmp_avg\",\"size\":$s,\"usec\":$avg}"
		else
			fails=$((fails + 1))
			echo "ping -s $s: $(echo "$out" | tail -n 2)"
		fi
		if out=$($CLI rrdma-selftest udp-ping "$PEER:7480" "$s" $FLOOR_ITERS 2>&1); then
			emit "{\"kind\":\"floor\",\"provider\":\"$prov\",\"topology\":\"$topology\",\"test\":\"udp\",\"size\":$s,\"usec\":$(echo "$out" | udp_p50_us),\"udp\":$out}"
		else
			fails=$((fails + 1))
			echo "udp-ping $s: $out"
		fi
	done
}

# The client: the schedule, perftest (A) then rrdma (B) for each line.
client() { # DEV
	emit "{\"kind\":\"memcpy\",\"provider\":\"$prov\",\"topology\":\"$topology\",\"value\":$(rrdma-selftest memcpy)}"
	if [ "$topo" != local ]; then
		emit "{\"kind\":\"memory\",\"provider\":\"$prov\",\"topology\":\"$topology\",\"value\":$(rrdma-selftest memory "$PEER")}"
	fi
	floor
	schedule >/tmp/schedule
	while read -r round test size depth queues; do
		queues=${queues:-1}
		echo "# step $round $test $size $depth $queues at $(cut -d' ' -f1 /proc/uptime) s"
		tag="\"provider\":\"$prov\",\"topology\":\"$topology\",\"test\":\"$test\",\"size\":$size,\"depth\":$depth,\"queues\":$queues,\"round\":$round"
		# A: perftest, once its server listens.
		# Up to 5 attempts, each with a fresh server.
		n=0
		while :; do
			out="perftest server did not start"
			if step_ask "$round" "$test" "$size" "$depth" "$queues"; then
				prof_start
				cpu_begin
				out=$(timeout 120 $CLI $(perftest_args "$1" "$test" "$size" "$depth" "$queues") "$PEER" 2>&1) &&
					break
			fi
			n=$((n + 1))
			retries=$((retries + 1))
			echo "perftest $test $size $depth: attempt $n failed: $(echo "$out" | tail -n 1)"
			[ $n -ge 5 ] && break
			sleep 1
		done
		cpu=$(cpu_json)
		line=$(echo "$out" | awk -v s="$size" '$1 == s { print; exit }')
		if [ -z "$line" ]; then
			prof_kill
			fails=$((fails + 1))
			echo "perftest $test $size $depth: no result: $(echo "$out" | tail -n 3)"
		else
			prof_stop perftest
			set -- "$1" $line
			if [ "$test" = read_lat ]; then
				# #bytes #iter t_min t_max t_typical t_avg t_stdev 99% 99.9%
				emit "{\"kind\":\"run\",\"tool\":\"perftest\",$tag,\"iterations\":$3,\"t_min\":\"$4\",\"p50\":\"$6\",\"t_avg\":\"$7\",\"p99\":\"$9\",\"p99_9\":\"${10}\",$cpu}"
			else
				# #bytes #iterations BW_peak BW_avg MsgRate.  With -D,
				# iterations over the requested seconds (timed by
				# alarm(2), the guest's clock) is the rate; perftest's
				# own MB/s samples its cycle counter, unreliable under
				# TCG, and is kept for reference.
				emit "{\"kind\":\"run\",\"tool\":\"perftest\",$tag,\"iterations\":$3,\"seconds\":$SECS,\"bw_reported_mbps\":\"$5\",$cpu}"
			fi
		fi
		# B: rrdma, same size, depth and duration.
		case $test in
		write_bw) args="--op write --size $size --depth $depth --duration $SECS" ;;
		read_bw) args="--op read --size $size --depth $depth --duration $SECS" ;;
		read_lat) args="--latency --op read --size $size --iters $LAT_ITERS" ;;
		rate) args="--op write --size $size --depth $depth --duration $SECS" ;;
		write_q) args="--op write --size $size --depth $depth --duration $SECS --queues $queues" ;;
		esac
		t=$tok4k
		[ "$size" = 512 ] && t=$tok512
		run_tool rrdma "(ioctl)" $args
		# E: writes that complete once sent (RRDMA_OP_F_SENT), as
		# perftest's do, one fence at the end of the run (timed).
		# The rate also through an IOPOLL ring, whose wait polls the
		# completion queue as perftest's does.
		case $test in
		write_bw | rate) run_tool rrdma-sent --sent $args --sent ;;
		esac
		[ "$test" = rate ] &&
			run_tool rrdma-sent-iopoll "--sent --engine uring-iopoll" $args --sent --engine uring-iopoll
		# G: the rate with read(2)'s gathering (read_gather=Y, off by
		# default), placed and sent: what it changes against B and E.
		if [ "$test" = rate ]; then
			run_with read_gather Y rrdma-gather $args
			run_with read_gather Y rrdma-sent-gather $args --sent
		fi
		# C: two threads on one connection (io_uring), with its data
		# lanes (a queue pair per CPU) and without (queue_pairs=1), in
		# turn: what the lanes add.
		if [ "$test" = write_q ] && [ "$queues" -gt 1 ]; then
			for qp in 1 0; do
				echo $qp >/sys/module/rrdma/parameters/queue_pairs
				tool=rrdma-lanes
				[ $qp = 1 ] && tool=rrdma-1qp
				run_tool $tool "--threads $queues (queue_pairs=$qp)" --op write --size $size \
					--depth $depth --duration $SECS --engine uring --threads $queues
			done
			echo 0 >/sys/module/rrdma/parameters/queue_pairs
		fi
		# F: the READ latency without polling (sync_poll=N): what the
		# default's adaptive polling (B) changes.
		[ "$test" = read_lat ] && run_with sync_poll N rrdma-nopoll $args
		# H: the READ latency with a fixed 1 ms window (sync_poll_us=1000,
		# the longest): how close the adaptive window (B) comes to
		# polling every operation to its end.
		[ "$test" = read_lat ] && run_with sync_poll_us 1000 rrdma-poll-fixed $args
		# D: the message rate and the READ latency through an IOPOLL
		# ring (the waiting task polls the completion queue, as perftest
		# does), with its adaptive spin (the default), then with the
		# spin fixed at 50 us (the default until 2026-11-29), the two in
		# turns: first one, then the other.
		case $test in
		rate | read_lat)
			[ $((round % 2)) = 1 ] &&
				run_with iopoll_spin_us 50 rrdma-iopoll-fixed $args --engine uring-iopoll
			run_tool rrdma-iopoll "--engine uring-iopoll" $args --engine uring-iopoll
			[ $((round % 2)) = 0 ] &&
				run_with iopoll_spin_us 50 rrdma-iopoll-fixed $args --engine uring-iopoll
			;;
		esac
		# C: the message rate again, through io_uring commands.
		[ "$test" = rate ] && run_tool rrdma-uring "--engine uring" $args --engine uring
	done </tmp/schedule
	emit "{\"kind\":\"perftest_failed_attempts\",\"provider\":\"$prov\",\"topology\":\"$topology\",\"value\":$retries}"
	if [ "$topo" = local ]; then step_stop; else echo quit | nc "$PEER" 7490 >/dev/null; fi
	echo quit | $CLI nc "$PEER" 7470 >/dev/null
	echo quit | $CLI nc "$PEER" 7473 >/dev/null
}

# wait_control PORT...: waits (~30 s each) until every `rrdma serve
# --control PORT` on $PEER hands out a token.
wait_control() {
	for port; do
		i=0
		until echo tokens | $CLI nc "$PEER" "$port" 2>/dev/null | grep -q rw ||
			[ $i -ge 150 ]; do
			sleep 0.2
			i=$((i + 1))
		done
	done
}

# `sh bench.sh step` (run by nc on the server, a connection's input and
# output its own): "start ROUND TEST SIZE DEPTH [QUEUES]" -> "ready", or
# "quit".
if [ "${1:-}" = step ]; then
	dev=${prov}0
	read -r cmd step
	case $cmd in
	start) step_start $step && echo ready ;;
	quit) step_stop; touch /tmp/pt.quit; echo bye ;;
	esac
	exit 0
fi

# local_setup NETNS: one guest, a veth pair with a device of type $prov on
# each end: veth1 in namespace b (NETNS=1) or both ends here.
local_setup() {
	if [ "$1" = 1 ]; then
		/usr/bin/ip netns add b &&
			/usr/bin/ip link add veth0 type veth peer name veth1 netns b &&
			/usr/bin/ip -n b addr add 10.9.0.2/24 dev veth1 &&
			/usr/bin/ip -n b link set veth1 up && /usr/bin/ip -n b link set lo up
	else
		make_veth && /usr/bin/ip addr add 10.9.0.2/24 dev veth1
	fi || return 1
	/usr/bin/ip addr add 10.9.0.1/24 dev veth0 && /usr/bin/ip link set veth0 up &&
		rdma link add "${prov}_a" type "$prov" netdev veth0 &&
		$CLI rdma link add "${prov}_b" type "$prov" netdev veth1 &&
		wait_active "${prov}_a" && wait_active "${prov}_b"
}

local_teardown() {
	$CLI rdma link del "${prov}_b"
	rdma link del "${prov}_a"
	/usr/bin/ip link del veth0
	[ -z "$CLI" ] || /usr/bin/ip netns del b
}

fails=0
retries=0
CLI=
SRV_ADDR=0.0.0.0
if [ "$topo" != local ]; then
	dev=${prov}0
	cdev=$dev
	topology=$topo
	PEER=$RRDMA_PEER
	wire_up "$prov" "$dev"
	if [ "$RRDMA_ROLE" = a ]; then
		server "$dev"
		ok "bench server on $dev"
	fi
else
	load_modules
	mkdir -p /run/netns
	ip link set lo up
	dev=${prov}_a
	cdev=${prov}_b
	PEER=10.9.0.1
	SRV_ADDR=$PEER
	CLI="/usr/bin/ip netns exec b"
	check "veth pair across netns b, $prov on each end" local_setup 1
	# Can this provider connect across namespaces on this kernel?
	rrdma serve --listen $PEER:7479 --control 7478 --blocks 16 >/tmp/probe-serve.out 2>&1 &
	ppid=$!
	wait_control 7478
	probe=$($CLI rrdma bench --peer $PEER:7479 --token @$PEER:7478/rw --op read \
		--size 4096 --iters 1 2>&1)
	rc=$?
	echo quit | $CLI nc $PEER 7478 >/dev/null
	wait_exit $ppid 100
	if [ $rc = 0 ]; then
		topology=local-netns
	else
		# No: both ends in this namespace; rdma_cm then carries the
		# connection to the local address over the server's device.
		why=$(echo "$probe" | tail -n 1 | tr -d '"\\')
		echo "# bench local: $prov cannot connect across namespaces: $why"
		cat /tmp/probe-serve.out
		emit "{\"kind\":\"note\",\"provider\":\"$prov\",\"topology\":\"local-loopback\",\"value\":\"across namespaces: $why\"}"
		topology=local-loopback
		local_teardown
		CLI=
		check "veth pair in one namespace, $prov on each end" local_setup 0
		# rdma_cm puts the client's end on the server's device too.
		cdev=$dev
	fi
	server "$dev" >/tmp/server.log 2>&1 &
	srv=$!
	ok "bench $topology on $prov"
fi
if [ "$RRDMA_ROLE" = b ] || [ "$topo" = local ]; then
	[ "$topo" = local ] || wait_peer
	wait_control 7470 7473
	tok4k="--peer $PEER:7471 --token @$PEER:7470/rw"
	tok512="--peer $PEER:7472 --token @$PEER:7473/rw"
	client "$cdev"
	check "every measurement on $prov ($topology) produced a result" test "$fails" = 0
fi
if [ "$topo" = local ]; then
	# (Not through check: its subshell cannot wait for our child.)
	if wait_exit $srv 300; then ok "bench server exits"; else fail "bench server exits" "status $?"; fi
	cat /tmp/server.log
	grep -i "fail\|error\|unexpected" /tmp/pt-server.out | sort | uniq -c
	local_teardown
else
	rdma link del "$dev"
fi
check "rmmod rrdma" rmmod rrdma
