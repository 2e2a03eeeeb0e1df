# SPDX-License-Identifier: GPL-2.0
# Two-guest data-path test (run on both guests) on the provider given as the
# test argument (siw or rxe): guest a serves a region with `rrdma serve`,
# guest b imports it and runs the checks of `rrdma-selftest remote`.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
ctl=$RRDMA_PEER:7470

wire_up "$prov" "$dev"

serve() {
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 256 --access rw --access ro \
		>>/tmp/serve.out 2>&1 &
	pid=$!
}

tok="--peer $RRDMA_PEER:7471 --token @$ctl"

if [ "$RRDMA_ROLE" = a ]; then
	serve
	wait_exit $pid 1500
	check "serve ends cleanly on quit" test $? = 0
	# Second run: the peer's bench is in flight when serve dies.
	serve
	wait_exit $pid 1500
	check "serve dies on request (peer death)" test $? = 9
	cat /tmp/serve.out
else
	wait_peer
	wait_tokens
	tap "remote $prov" rrdma-selftest remote $RRDMA_PEER
	# (The selftest revoked the rw token last; ask the peer to quit and
	# start over with fresh tokens.)
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
	sleep 1
	wait_tokens
	check "verify 256 blocks on $dev" rrdma verify $tok/rw
	dd if=/dev/urandom of=/tmp/in bs=1000 count=300 2>/dev/null
	check "write a file on $dev" rrdma write $tok/rw --first 10 --input /tmp/in
	check "read it back on $dev" rrdma read $tok/ro --first 10 --count 74 --output /tmp/out
	check "file round trip is bit-exact" sh -c "head -c 300000 /tmp/out | cmp - /tmp/in"
	check_fails "a read-only export refuses writes" rrdma write $tok/ro --input /tmp/in
	check "bench runs" rrdma bench $tok/rw --size 4096 --size 65536 --duration 1
	# One-sided: during a timed bench the exporter's module runs no
	# callback (work counts asked of serve before and after the run); the
	# counts themselves do move (the imports' control messages).
	for op in write read; do
		f=/tmp/bench-$op.json
		rrdma bench $tok/rw --op $op --size 4096 --depth 16 --duration 1 --json >$f 2>&1
		echo "# exporter work, $op bench: $(sed -n 's/.*\("iterations":[0-9]*\).*\("exporter_work":{[^}]*}\).*/\1 \2/p' $f)"
		check "the exporter's module does nothing during a 1 s $op bench" sh -c \
			"grep -q '\"exporter_work\":{\"cm-events\":0,\"completions\":0,\"ctrl-recv\":0}' $f &&
			grep -q '\"iterations\":[1-9]' $f"
	done
	check "the exporter's work counts move on control messages" sh -c \
		"echo fdinfo | nc $RRDMA_PEER 7470 | grep -q 'rrdma-work-ctrl-recv=[1-9]'"

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
