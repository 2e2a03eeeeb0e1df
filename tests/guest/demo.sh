# SPDX-License-Identifier: GPL-2.0
# `make demo` (run on both guests): guest a serves a region over the
# provider given as the argument (siw or rxe); guest b imports it, writes
# and reads blocks, verifies checksums and prints a short bench table.
# What the demo shows goes to the results port between RRDMA-DEMO markers.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
wire_up "$prov" "$dev"

say() { echo "$*" >&9; }
show() {
	"$@" >/tmp/show.out 2>&1
	rc=$?
	cat /tmp/show.out >&9
	return $rc
}

if [ "$RRDMA_ROLE" = a ]; then
	say "RRDMA-DEMO-BEGIN"
	say "guest a ($RRDMA_SELF): rrdma serve (4096-byte blocks, 1024 of them)"
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 1024 --access rw --access ro \
		>/tmp/serve.out 2>&1 &
	pid=$!
	wait_exit $pid 1500
	sed 's/^/  /' /tmp/serve.out >&9
	say "RRDMA-DEMO-END"
else
	wait_peer
	wait_tokens
	t="--peer $RRDMA_PEER:7471 --token @$RRDMA_PEER:7470"
	say "RRDMA-DEMO-BEGIN"
	say "guest b ($RRDMA_SELF) on $dev: tokens from the peer: $(echo tokens | nc "$RRDMA_PEER" 7470)"
	dd if=/dev/urandom of=/tmp/data bs=4096 count=256 2>/dev/null
	say "\$ rrdma write $t/rw --first 100 --input /tmp/data   (1 MiB of random data)"
	show rrdma write $t/rw --first 100 --input /tmp/data
	say "\$ rrdma read $t/ro --first 100 --count 256 --output /tmp/back"
	rrdma read $t/ro --first 100 --count 256 --output /tmp/back 2>&9
	say "sha256 written: $(sha256sum </tmp/data | cut -c1-64)"
	say "sha256 read:    $(sha256sum </tmp/back | cut -c1-64)"
	check "data read back on $dev is bit-exact" cmp /tmp/data /tmp/back
	say "\$ rrdma verify $t/rw"
	show rrdma verify $t/rw
	check "verify on $dev" grep -q ': OK$' /tmp/show.out
	say "\$ rrdma bench $t/rw --op write --size 4096 --size 65536 --size 1048576 --duration 1"
	show rrdma bench $t/rw --op write --size 4096 --size 65536 --size 1048576 --duration 1
	say "\$ rrdma bench $t/rw --op read --size 4096 --size 65536 --size 1048576 --duration 1"
	show rrdma bench $t/rw --op read --size 4096 --size 65536 --size 1048576 --duration 1
	say "\$ rrdma bench $t/rw --latency --size 4096 --iters 300"
	show rrdma bench $t/rw --latency --size 4096 --iters 300
	check "bench on $dev" grep -q "t_avg" /tmp/show.out
	say "RRDMA-DEMO-END"
	echo quit | nc "$RRDMA_PEER" 7470 >/dev/null
fi
rdma link del "$dev"
check "rmmod rrdma" rmmod rrdma
