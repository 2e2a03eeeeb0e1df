# SPDX-License-Identifier: GPL-2.0
# `make demo` (run on both guests): guest a serves a region over the
# provider given as the argument (siw or rxe); guest b imports it, writes
# and reads blocks, verifies checksums and prints a short bench table,
# then maps it as a disk, /dev/rrdmab0, with an ext4 file system on it.
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
	say "guest a ($RRDMA_SELF): rrdma serve (4096-byte blocks, 4096 of them)"
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 4096 --access rw --access ro \
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
	say "\$ rrdma map $t/rw   (the export as a disk; the kernel keeps it)"
	show rrdma map $t/rw
	check "map on $dev: /dev/rrdmab0" test -b /dev/rrdmab0
	say "\$ mkfs.ext4 -q /dev/rrdmab0 && mount /dev/rrdmab0 /mnt && cp /tmp/data /mnt/data"
	mkdir -p /mnt
	mkfs.ext4 -q -F /dev/rrdmab0 && mount -t ext4 /dev/rrdmab0 /mnt && cp /tmp/data /mnt/data && sync
	say "\$ df -h /mnt"
	show df -h /mnt
	say "\$ grep . /sys/block/rrdmab0/rrdma/*"
	show grep . /sys/block/rrdmab0/rrdma/peer /sys/block/rrdmab0/rrdma/state \
		/sys/block/rrdmab0/rrdma/reconnects /sys/block/rrdmab0/rrdma/fences
	umount /mnt
	echo 3 >/proc/sys/vm/drop_caches
	mount -t ext4 /dev/rrdmab0 /mnt
	say "after umount, dropped caches and mount again: sha256 $(sha256sum </mnt/data | cut -c1-64)"
	check "ext4 on /dev/rrdmab0 over $dev: the file comes back" cmp /tmp/data /mnt/data
	umount /mnt
	say "\$ rrdma unmap 0"
	show rrdma unmap 0
	check "unmap on $dev" test ! -e /sys/block/rrdmab0
	say "RRDMA-DEMO-END"
	echo quit | nc "$RRDMA_PEER" 7470 >/dev/null
fi
rdma link del "$dev"
check "rmmod rrdma" rmmod rrdma
