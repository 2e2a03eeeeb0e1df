# SPDX-License-Identifier: GPL-2.0
#
# Connection stress (`make connstress`): the importer connects and imports
# right after a perftest ib_read_bw run has loaded the link, N times
# (rrdma.n=, default 200), and each import must be answered.  Found siw's
# lost first message (scripts/kpatch/*/0002-*): the exporter's socket held
# the IMPORT request unreceived while the importer waited, in 1 of 30 to
# 150 connections.  On a failure it prints the exporter's work counts
# before and after, and the local TCP sockets with queued bytes.
. ./lib.sh
prov=$RRDMA_ARG
dev=${prov}0
n=$(sed -n 's/.*rrdma\.n=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$n" ] || n=200
wire_up "$prov" "$dev"
# perftest's client and server, one run each per round.
load() { timeout 120 ib_read_bw -R -d $dev -F -s 65536 -D 1 -t 16 -o 16 "$@" >/dev/null 2>&1; }
if [ "$RRDMA_ROLE" = a ]; then
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 8192 --access rw \
		>/tmp/serve.out 2>&1 &
	spid=$!
	i=0
	while [ $i -lt $n ]; do
		load
		i=$((i + 1))
	done
	wait_exit $spid 1500
	ok "server"
else
	wait_peer
	wait_tokens
	t="--peer $RRDMA_PEER:7471 --token @$RRDMA_PEER:7470/rw --timeout-ms 10000"
	i=0; bad=0
	while [ $i -lt $n ]; do
		k=0
		until load "$RRDMA_PEER"; do
			k=$((k + 1)); [ $k -ge 40 ] && break; sleep 0.5
		done
		before=$(echo fdinfo | nc "$RRDMA_PEER" 7470)
		if ! out=$(rrdma bench $t --op read --size 65536 --depth 16 --duration 0.5 2>&1); then
			bad=$((bad + 1))
			echo "# connection $i: $out"
			echo "# exporter before: $before"
			echo "# exporter after:  $(echo fdinfo | nc "$RRDMA_PEER" 7470)"
			echo "# queued here: $(awk 'NR > 1 && $5 != "00000000:00000000"' /proc/net/tcp)"
		fi
		i=$((i + 1))
	done
	echo "# $bad of $n connections failed"
	check "every import of $n connections answered" test $bad = 0
	echo quit | nc "$RRDMA_PEER" 7470 >/dev/null
fi
rdma link del "$dev"
check "rmmod rrdma" rmmod rrdma
