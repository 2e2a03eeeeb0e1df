# SPDX-License-Identifier: GPL-2.0
# Two-guest fault suite (run on both guests).  The test argument is
# "PROVIDER,SECONDS[,KEY+KEY...]": guest a serves a region (restarted when
# killed) and the agent; guest b runs `rrdma-selftest faults`, a
# checksummed workload through each fault (KEYs pick some; see
# rust/selftest/src/faults/) with a table of what each did.
. ./lib.sh

IFS=, read -r prov secs keys <<EOA
$RRDMA_ARG
EOA
prov=${prov:-siw}
secs=${secs:-4}
dev=${prov}0

wire_up "$prov" "$dev"

if [ "$RRDMA_ROLE" = a ]; then
	rrdma-selftest agent 7469 $dev $prov >/tmp/agent.out 2>&1 &
	agent=$!
	# `die` (the "exporter killed" fault) exits 9: serve again, with a new
	# region and new tokens.  `quit` ends the loop.
	(
		while :; do
			rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 256 --access rw \
				>>/tmp/serve.out 2>&1
			rc=$?
			[ $rc = 9 ] || exit $rc
			echo "serve was killed; serving again" >>/tmp/serve.out
		done
	) &
	loop=$!
	wait_exit $loop 9000
	check "serve ends cleanly on quit" test $? = 0
	echo quit | nc 127.0.0.1 7469 >/dev/null
	wait_exit $agent 50
	cat /tmp/serve.out /tmp/agent.out
else
	wait_peer
	wait_tokens
	quick=$(quick_on_debug)
	tap "faults $prov" rrdma-selftest faults $RRDMA_PEER $prov $secs $quick $(echo "$keys" | tr + ' ')
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
fi

check "rdma link del $dev at the end" rdma link del $dev
check "rmmod rrdma" rmmod rrdma
