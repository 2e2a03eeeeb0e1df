# SPDX-License-Identifier: GPL-2.0
# librrdma, the C library, in two guests on the provider given as the test
# argument (siw or rxe): guest a runs the C example's server, guest b its
# client (write, read back, verify on both sides, between the guests), then
# the library's own tests (rrdma-ctest) over its own address, counted by
# `perf stat` on rrdma's tracepoints (a tracepoint perf can use).
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
wire_up "$prov" "$dev"
wait_peer

if [ "$RRDMA_ROLE" = a ]; then
	check "C example: server verifies what the client wrote" \
		timeout 300 rrdma-cexample serve 7480 7481 256
else
	check "C example: client writes, reads back, server confirms" \
		timeout 300 rrdma-cexample client "$RRDMA_PEER" 7480 7481
	# perf finds the tracepoints in tracefs.
	if command -v perf >/dev/null && trace_start; then
		trace_stop
		tap "librrdma" timeout 300 perf stat -a -x, -o /tmp/perf.out -e rrdma:rrdma_conn_new \
			-e rrdma:rrdma_conn_state -e rrdma:rrdma_unexport -- rrdma-ctest "$RRDMA_SELF" 7482
		sed 's/^/perf stat: /' /tmp/perf.out
		# rrdma-ctest connects twice, both accepted (system-wide: accepts run in
		# rdma_cm's work), and unexports twice.
		check "perf stat counts rrdma's tracepoints: connections, states, unexports" sh -c \
			"awk -F, '/rrdma_conn_new/ && \$1 >= 4 { n++ } /rrdma_conn_state/ && \$1 >= 8 { n++ }
				/rrdma_unexport/ && \$1 >= 2 { n++ } END { exit n != 3 }' /tmp/perf.out || cat /tmp/perf.out"
	else
		skip "perf stat counts rrdma's tracepoints" "no perf or no tracefs here"
		tap "librrdma" timeout 300 rrdma-ctest "$RRDMA_SELF" 7482
	fi
	# Every object the tests made is gone with their files.
	check "no rrdma file left open" sh -c '! grep -q rrdma /proc/*/fdinfo/* 2>/dev/null'
fi

check "rdma link del $dev" rdma link del $dev
check "rmmod rrdma" rmmod rrdma
