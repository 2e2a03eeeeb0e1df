# SPDX-License-Identifier: GPL-2.0
# Two-guest data-path test (run on both guests) on the provider given as the
# test argument (siw or rxe): guest a serves a region with `rrdma serve`,
# guest b imports it and runs the checks of `rrdma-selftest remote`.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
ctl=$RRDMA_PEER:7470

ip link set lo up
check "eth0 up with $RRDMA_SELF" sh -c "/usr/bin/ip link set eth0 up && /usr/bin/ip addr add $RRDMA_SELF/24 dev eth0"
load_rdma_drivers || fail "soft RDMA drivers load" "modprobe failed"
check "rrdma.ko loads" insmod $RRDMA_KO
check "rdma link add $dev on eth0" rdma link add $dev type $prov netdev eth0
wait_active $dev

if [ "$RRDMA_ROLE" = a ]; then
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 256 --access rw --access ro \
		>/tmp/serve.out 2>&1 &
	pid=$!
	# Serve until the peer says quit (or the test's time runs out).
	i=0
	while kill -0 $pid 2>/dev/null && [ $i -lt 1500 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	if kill -0 $pid 2>/dev/null; then
		fail "serve ends on quit" "still running"
		kill $pid
	else
		wait $pid
		check "serve exits cleanly" test $? = 0
	fi
	cat /tmp/serve.out
else
	i=0
	until ping -c 1 -W 1 "$RRDMA_PEER" >/dev/null 2>&1 || [ $i -ge 30 ]; do i=$((i + 1)); done
	i=0
	until rrdma info >/dev/null && echo tokens | nc $RRDMA_PEER 7470 2>/dev/null | grep -q rw || [ $i -ge 100 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	check "verify 256 blocks on $dev" rrdma verify --peer $RRDMA_PEER:7471 --token @$ctl/rw
	dd if=/dev/urandom of=/tmp/in bs=1000 count=300 2>/dev/null
	check "write a file on $dev" rrdma write --peer $RRDMA_PEER:7471 --token @$ctl/rw --first 10 --input /tmp/in
	check "read it back on $dev" rrdma read --peer $RRDMA_PEER:7471 --token @$ctl/ro --first 10 --count 74 --output /tmp/out
	check "file round trip is bit-exact" sh -c "head -c 300000 /tmp/out | cmp - /tmp/in"
	check_fails "RO export refuses writes" rrdma write --peer $RRDMA_PEER:7471 --token @$ctl/ro --input /tmp/in
	for i in 1 2 3; do rrdma bench --peer $RRDMA_PEER:7471 --token @$ctl/rw --size 4096 --size 65536 --duration 1; done
	echo quit | nc $RRDMA_PEER 7470
fi

rdma link del $dev
check "rmmod rrdma" rmmod rrdma
