# SPDX-License-Identifier: GPL-2.0
# Two-guest data-path test (run on both guests) on the provider given as the
# test argument (siw or rxe): guest a serves a region with `rrdma serve`,
# guest b imports it and runs the checks of `rrdma-selftest remote`.
# "PROV,small": both guests emulate a small NIC (module limit_*
# parameters): 48-entry queues (26 of them for control messages), 64-entry
# completion queues, one SGE, 4-page registrations and 1024 registrations
# per device.  "PROV,stress": the thread and write-fence checks run 20
# rounds (RRDMA_ROUNDS), which the data lanes' cross-queue-pair ordering
# needs more than one round of.  "PROV,sync-poll": only the busy-polling
# check of the selftest, the file round trip and the read-only refusal.
# "PROV,user": the serving guest exports its own memory (REGION_REGISTER,
# `serve --user-memory`), so every check reaches the exporter's process
# memory itself.  The options combine: "PROV,small,sync-poll" runs those
# on a small NIC.
. ./lib.sh

prov=${RRDMA_ARG%%,*}
dev=${prov}0
export RRDMA_PROV=$prov
# The options after the provider, comma-separated: small, stress,
# sync-poll, user (which combine: "rxe,small,sync-poll").
opts=",${RRDMA_ARG#"$prov"},"
has() { case $opts in *",$1,"*) return 0 ;; esac; return 1; }
if has small; then
	RRDMA_LIMITS="limit_qp_wr=48 limit_cqe=64 limit_send_sge=1 limit_recv_sge=1"
	RRDMA_LIMITS="$RRDMA_LIMITS limit_sge_rd=1 limit_fast_reg_pages=4 limit_mr=1024"
	# 30 operation entries (48 less the drain's, 8 control sends and 9
	# export registrations) and 16 KiB chunks: an operation of 36 blocks of
	# 4 KiB needs at most 30 work requests, one of 37 blocks 33.  On
	# iWARP (siw) each READ segment also registers its sink: 20 blocks
	# need at most 28, 21 blocks 33.
	if [ "$prov" = siw ]; then
		export RRDMA_MAX_OP_BLOCKS=20
	else
		export RRDMA_MAX_OP_BLOCKS=36
	fi
fi
if has stress; then
	export RRDMA_ROUNDS=20
fi
# The bench's larger size: the largest operation the import allows.
big=$((${RRDMA_MAX_OP_BLOCKS:-16} * 4096))
ctl=$RRDMA_PEER:7470

wire_up "$prov" "$dev"

memory=
has user && memory=--user-memory
serve() {
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 256 --access rw --access ro \
		$memory >>/tmp/serve.out 2>&1 &
	pid=$!
}

tok="--peer $RRDMA_PEER:7471 --token @$ctl"

# A read-only import refuses a write with EPERM, which the CLI prints as
# "Operation not permitted (os error 1)": that refusal, not any failure (a
# connect or token failure fails too).  The control: the same token
# connects and reads, before and after; the refused write changed nothing.
ro_refuses() {
	rrdma read $tok/ro --count 74 --output /tmp/ro-before ||
		{ echo "control: the ro token does not read"; return 1; }
	if out=$(rrdma write $tok/ro --input /tmp/in 2>&1); then
		echo "the write succeeded: $out"
		return 1
	fi
	case $out in
	*"Operation not permitted (os error 1)"*) ;;
	*) echo "refused otherwise: $out"; return 1 ;;
	esac
	rrdma read $tok/ro --count 74 --output /tmp/ro-after ||
		{ echo "control: the ro token does not read after the write"; return 1; }
	cmp /tmp/ro-before /tmp/ro-after || { echo "the refused write changed blocks"; return 1; }
}

# The file round trip through the rw and ro tokens of the peer's second
# serve, and the read-only refusal.
file_checks() {
	check "verify 256 blocks on $dev" rrdma verify $tok/rw
	dd if=/dev/urandom of=/tmp/in bs=1000 count=300 2>/dev/null
	check "write a file on $dev" rrdma write $tok/rw --first 10 --input /tmp/in
	check "read it back on $dev" rrdma read $tok/ro --first 10 --count 74 --output /tmp/out
	check "file round trip is bit-exact" sh -c "head -c 300000 /tmp/out | cmp - /tmp/in"
	check "a read-only export refuses writes (EPERM; the token reads; nothing lands)" ro_refuses
}

# The file checks; on a small NIC under the trace, and what its import
# answers held.  There (9 export registrations in flight) an answer
# still carries more keys than one batch of registrations: the exporter
# registers the served MiB's 64 chunks of 16 KiB in batches, and answers
# with all 64 unless a batch finds no room in time.  Before, an answer
# held one batch: 7 rounds.
traced_file_checks() {
	traced=
	has small && trace_start && traced=1
	file_checks
	[ -n "$traced" ] || return 0
	trace_stop
	most=$(sed -n 's/.* rrdma_import_answer: .* nkeys=\([0-9]*\).*/\1/p' /tmp/rrdma.trace |
		sort -n | tail -n 1)
	echo "# import answers: $(grep -c ' rrdma_import_answer: ' /tmp/rrdma.trace)," \
		"most keys in one: ${most:-none}"
	check "a small NIC's import answer holds more keys than one batch (9)" \
		test "${most:-0}" -gt 9
}

if [ "$RRDMA_ROLE" = a ]; then
	serve
	wait_exit $pid "$(serve_ticks 1500)"
	check "serve ends cleanly on quit" test $? = 0
	# Second run: the peer's bench is in flight when serve dies.
	serve
	wait_exit $pid "$(serve_ticks 1500)"
	check "serve dies on request (peer death)" test $? = 9
	cat /tmp/serve.out
elif has sync-poll; then
	wait_peer
	wait_tokens
	tap "sync-poll $prov" rrdma-selftest sync-poll $RRDMA_PEER
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
	sleep 1
	wait_tokens
	traced_file_checks
	echo die | nc $RRDMA_PEER 7470 >/dev/null
else
	wait_peer
	wait_tokens
	tap "remote $RRDMA_ARG" rrdma-selftest remote $RRDMA_PEER $(quick_on_debug)
	# (The selftest revoked the rw token last; ask the peer to quit and
	# start over with fresh tokens.)
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
	sleep 1
	wait_tokens
	traced_file_checks
	check "bench runs" rrdma bench $tok/rw --size 4096 --size $big --duration 1
	check "bench --engine uring runs (writes and reads)" sh -c \
		"rrdma bench $tok/rw --engine uring --op write --size 4096 --size $big --duration 1 &&
		rrdma bench $tok/rw --engine uring --op read --size 4096 --duration 1"
	check "bench --engine uring-sqpoll runs (writes and reads)" sh -c \
		"rrdma bench $tok/rw --engine uring-sqpoll --op write --size 4096 --duration 1 &&
		rrdma bench $tok/rw --engine uring-sqpoll --op read --size 4096 --latency --iters 200"
	# Two queue pairs: two connections, each with its own thread and file.
	rrdma bench $tok/rw --op write --size 4096 --queues 2 --duration 1 --json \
		>/tmp/bench-q2.json 2>&1
	check "bench --queues 2 moves blocks through two connections" sh -c \
		"grep -q '\"queues\":2,' /tmp/bench-q2.json &&
		grep -q '\"iterations\":[1-9]' /tmp/bench-q2.json"
	# Two threads on one connection (its data lanes), each with its own
	# io_uring ring.
	# Writes that complete once sent, a fence every 64 and one at the end,
	# through SUBMIT and io_uring.
	for eng in ioctl uring; do
		rrdma bench $tok/rw --op write --size 4096 --engine $eng --sent --fence-every 64 \
			--duration 1 --json >/tmp/bench-sent.json 2>&1
		check "bench --sent --fence-every 64 ($eng): writes and fences complete" sh -c \
			"grep -q '\"sent\":true,' /tmp/bench-sent.json &&
			grep -q '\"iterations\":[1-9]' /tmp/bench-sent.json &&
			grep -q '\"fences\":[1-9]' /tmp/bench-sent.json"
	done
	rrdma bench $tok/rw --op write --size 4096 --threads 2 --engine uring \
		--duration 1 --json >/tmp/bench-t2.json 2>&1
	check "bench --threads 2 moves blocks through one connection" sh -c \
		"grep -q '\"threads\":2,' /tmp/bench-t2.json &&
		grep -q '\"iterations\":[1-9]' /tmp/bench-t2.json"
	# One-sided: during a timed bench the exporter's module runs no
	# callback (work counts asked of serve before and after the run); the
	# counts themselves do move (the imports' control messages).  The
	# connections closed before (the selftest's, the last bench's) end on
	# the exporter with rdma_cm events that can come a while later (a
	# closing process tears its connections down in the background): each
	# bench starts once the exporter's count of them stood still for 1 s.
	for op in write read; do
		i=0
		while [ $i -lt 30 ]; do
			w1=$(echo fdinfo | nc $RRDMA_PEER 7470 | grep rrdma-work-cm-events)
			sleep 1
			w2=$(echo fdinfo | nc $RRDMA_PEER 7470 | grep rrdma-work-cm-events)
			[ "$w1" = "$w2" ] && break
			i=$((i + 1))
		done
		f=/tmp/bench-$op.json
		rrdma bench $tok/rw --op $op --size 4096 --depth 16 --duration 1 --json >$f 2>&1
		echo "# exporter work, $op bench: $(sed -n 's/.*\("iterations":[0-9]*\).*\("exporter_work":{[^}]*}\).*/\1 \2/p' $f)"
		grep -q '"iterations"' $f || sed 's/^/# /' $f
		check "the exporter's module does nothing during a 1 s $op bench" sh -c \
			"grep -q '\"exporter_work\":{\"cm-events\":0,\"completions\":0,\"ctrl-recv\":0,\"read-gathered\":0,\"softirq\":0,\"sync-polled\":0,\"uring-polled\":0}' $f &&
			grep -q '\"iterations\":[1-9]' $f"
	done
	check "the exporter's work counts move on control messages" sh -c \
		"echo fdinfo | nc $RRDMA_PEER 7470 | grep -q 'rrdma-work-ctrl-recv=[1-9]'"
	# iWARP sinks come with a queue pair's first operation: the exporter's
	# connections post none, so they hold none of the device's MRs.
	check "the exporter's queue pairs allocated no READ or fence sinks" sh -c \
		"echo fdinfo | nc $RRDMA_PEER 7470 | grep -q 'rrdma-sink-allocs=0'"

	# Device removal under load: operations fail, nothing hangs, and a new
	# connection works once the device is back.
	rrdma bench $tok/rw --duration 60 >/tmp/bench1.out 2>&1 &
	bpid=$!
	sleep 1
	check "rdma link del $dev under load" rdma link del $dev
	wait_exit $bpid 100
	rc=$?
	if [ $rc = 124 ]; then
		fail "bench fails after its device went away" "still running after 20 s"
	else
		check "bench fails after its device went away" test $rc != 0
	fi
	check "rdma link add $dev again" rdma link add $dev type $prov netdev eth0
	wait_active $dev
	check "a new connection works on the new $dev" rrdma verify $tok/rw --count 16

	# Peer death: the serving process is killed with operations in flight.
	rrdma bench $tok/rw --duration 60 >/tmp/bench2.out 2>&1 &
	bpid=$!
	sleep 1
	echo die | nc $RRDMA_PEER 7470 >/dev/null
	wait_exit $bpid 100
	rc=$?
	if [ $rc = 124 ]; then
		fail "bench fails when the peer dies" "still running after 20 s"
	else
		check "bench fails when the peer dies" test $rc != 0
	fi
	cat /tmp/bench1.out /tmp/bench2.out
fi

rdma link del $dev
check "rmmod rrdma" rmmod rrdma
