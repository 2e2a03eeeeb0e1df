# SPDX-License-Identifier: GPL-2.0
# Two-guest adversarial test (run on both guests) on the provider given as
# the test argument (siw or rxe): guest a serves a 96 MiB region and an
# agent that removes and re-adds its RDMA device on request; guest b runs
# `rrdma-selftest attack`: exporter-side revoke and device loss under load,
# refused calls, stalled user copies, concurrency, restricted exports, with
# synchronous operations busy-polling (module parameter sync_poll_us).
# "PROVIDER,hostile", "PROVIDER,stall" (rxe only), "PROVIDER,stalled-copies"
# (user copies stalled on userfaultfd pages), "PROVIDER,keepalive",
# "PROVIDER,reconnect" or "PROVIDER,unexport" (UNEXPORT under write load
# and the check that its scan sees late writes) runs that part alone.
# "PROVIDER,flood[,SECONDS]": the connect flood alone (default 40 s), with
# the exporter keeping 8 connections (`serve --max-conns`) and the hung
# task detector at 20 s on both guests.
. ./lib.sh

IFS=, read -r prov part secs <<EOA
$RRDMA_ARG
EOA
part=${part:-attack}
dev=${prov}0
keep=""
if [ "$part" = flood ]; then
	keep="--max-conns 8"
	echo 20 >/proc/sys/kernel/hung_task_timeout_secs
fi

wire_up "$prov" "$dev"
# The full run's tracepoints: each kind fires somewhere in it; the
# exporter's side (a) and the importer's (b).
traced_a() {
	trace_has rrdma_conn_new accept && trace_has rrdma_conn_state event=established &&
		trace_has rrdma_unexport && trace_has rrdma_device_remove "device=$dev"
}
traced_b() {
	trace_has rrdma_conn_new connect && trace_has rrdma_conn_state event=established &&
		trace_has rrdma_reconnect_attempt && trace_has rrdma_op_failed &&
		trace_has rrdma_import_revoked && trace_has rrdma_conn_state event=user_close &&
		trace_has rrdma_device_remove "device=$dev"
}
traced=""
[ "$part" = attack ] && trace_start && traced=1

if [ "$RRDMA_ROLE" = a ]; then
	rrdma-selftest agent 7469 $dev $prov >/tmp/agent.out 2>&1 &
	agent=$!
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 24576 --access rw --access ro \
		$keep >/tmp/serve.out 2>&1 &
	pid=$!
	wait_exit $pid "$(serve_ticks 3000)"
	check "serve ends cleanly on quit" test $? = 0
	kill $agent 2>/dev/null
	cat /tmp/serve.out /tmp/agent.out
else
	wait_peer
	wait_tokens
	quick=$(quick_on_debug)
	# Synchronous operations busy-poll here (sync_poll_us): the attacks
	# on teardown meet tasks that hold poll references on queue pairs.
	echo 200 >/sys/module/rrdma/parameters/sync_poll_us
	case $part in
	attack) tap "attack $prov" rrdma-selftest attack $RRDMA_PEER $RRDMA_SELF $prov $quick ;;
	flood) tap "flood $prov" rrdma-selftest flood $RRDMA_PEER $prov ${secs:-40} ;;
	keepalive | reconnect) tap "$part $prov" rrdma-selftest $part $RRDMA_PEER $quick ;;
	*) tap "$part $prov" rrdma-selftest $part $RRDMA_PEER $prov ;;
	esac
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
fi

rdma link del $dev
if [ -n "$traced" ]; then
	trace_stop
	trace_summary
	if [ "$RRDMA_ROLE" = a ]; then
		check "tracepoints (a): accept, established, unexport, device removal" traced_a
	else
		check "tracepoints (b): connect, established, reconnect attempt, failed operation, import revoked, close, device removal" \
			traced_b
	fi
elif [ "$part" = attack ]; then
	skip "tracepoints" "no tracefs here (CONFIG_TRACING off in this kernel)"
fi
check "rmmod rrdma" rmmod rrdma
