# SPDX-License-Identifier: GPL-2.0
# rrdma-blk between two guests, on the provider given as the test argument
# (siw or rxe): guest a serves a 16 MiB region (rw and ro exports) with
# `rrdma serve`; guest b maps it as /dev/rrdmab0 with `rrdma map` and
# checks, with the block layer's own tools (dd, cmp, blockdev):
#  - fio: 4 jobs of random writes at depth 32 over the whole disk, every
#    block checked (crc32c);
#  - ext4 on the disk: files written, remounted, the same checksums;
#  - swap on the disk under a memory cgroup cap: every page comes back;
#  - direct and buffered I/O round trips are bit-exact, and what a flush
#    acknowledged is in the exporter's memory (read back through a
#    separate import, not the disk); the flushes were fences;
#  - a read-only export, or `map --ro`, gives a read-only disk;
#  - BLK_UNMAP refuses an open disk (EBUSY) unless forced, and the map
#    command ends when its disk is unmapped; a closed mapping file takes
#    its disk with it, an open user then gets I/O errors;
#  - `rrdma-selftest blk`: bad, foreign (no CAP_SYS_ADMIN), stale (the
#    import given back) and racing (unmap under I/O) arguments, and the
#    connection ended under the disk.
. ./lib.sh

prov=${RRDMA_ARG%%,*}
dev=${prov}0
ctl=$RRDMA_PEER:7470
tok="--peer $RRDMA_PEER:7471 --token @$ctl"
disk=/dev/rrdmab0
# The export's size (DISK_MIB); the data checks use its first MIB MiB, fio
# its first FIO_MIB; swap caps a process at CAP_MIB and has it touch
# TOUCH_MIB.  A debug kernel (KASAN) moves data slowly.
DISK_MIB=64 MIB=16 FIO_MIB=64 CAP_MIB=16 TOUCH_MIB=40
[ -n "$(quick_on_debug)" ] && DISK_MIB=16 MIB=4 FIO_MIB=4 CAP_MIB=8 TOUCH_MIB=12

wire_up "$prov" "$dev"

# map rw|ro [ARGS...]: maps the rw or the ro export with `rrdma map` in
# the background, its exit status to /tmp/map.rc, and waits for its disk.
map() {
	rm -f /tmp/map.rc
	(rrdma map $tok/"$@" >/tmp/map.out 2>&1; echo $? >/tmp/map.rc) &
	i=0
	until [ -b $disk ] || [ $i -ge 100 ] || [ -e /tmp/map.rc ]; do
		sleep 0.2
		i=$((i + 1))
	done
	[ -b $disk ]
}

# The exporter's memory, read through an import of its own (not the disk).
exporter_has() {
	rrdma read $tok/ro --count $(($1 / 4096)) --output /tmp/remote >/dev/null &&
		cmp /tmp/remote "$2"
}

direct_round_trip() {
	dd if=/dev/urandom of=/tmp/pat bs=1M count=$MIB 2>/dev/null
	# Written through the disk's volatile write cache (completes once
	# sent), and flushed (a fence: placed) by the fsync at the end.
	dd if=/tmp/pat of=$disk bs=64k oflag=direct conv=fsync 2>/dev/null || return 1
	dd if=$disk of=/tmp/back bs=64k count=$((MIB * 16)) iflag=direct 2>/dev/null || return 1
	cmp /tmp/pat /tmp/back || return 1
	exporter_has $((MIB << 20)) /tmp/pat
}

# Odd sizes and offsets through the page cache, then written back.
buffered_round_trip() {
	dd if=/dev/urandom of=/tmp/pat2 bs=1000 count=777 2>/dev/null
	dd if=/tmp/pat2 of=$disk bs=1000 seek=3 conv=notrunc 2>/dev/null || return 1
	sync
	echo 3 >/proc/sys/vm/drop_caches
	dd if=$disk of=/tmp/back2 bs=1000 skip=3 count=777 2>/dev/null || return 1
	cmp /tmp/pat2 /tmp/back2 || return 1
	# Bytes 0..3000 kept what the direct check wrote.
	head -c 3000 /tmp/pat >/tmp/expect2
	cat /tmp/pat2 >>/tmp/expect2
	rrdma read $tok/ro --count 191 --output /tmp/remote2 >/dev/null &&
		head -c 780000 /tmp/remote2 | cmp - /tmp/expect2
}

# The disk's flushes were fences on its import: the mapping file's
# fdinfo counts them (posted, or complete at once where nothing was
# unplaced).
flushes_are_fences() {
	n=$(cat /proc/"$(pidof rrdma)"/fdinfo/* 2>/dev/null |
		awk '/^rrdma-op-fences(-at-once)?:/ { n += $2 } END { print n + 0 }')
	echo "fences: $n"
	[ "$n" -gt 0 ]
}

# fio over the whole disk (its first 4 MiB on a debug kernel): 4 jobs, each on its quarter, random writes of
# 4 to 128 KiB at depth 32 through io_uring, each block with a crc32c
# header, then every block read back and checked.
fio_verify() {
	fio --name=blk --thread --filename=$disk --direct=1 --ioengine=io_uring --iodepth=32 \
		--numjobs=4 --size=$((FIO_MIB / 4))M --offset_increment=$((FIO_MIB / 4))M \
		--rw=randwrite --bssplit=4k/50:64k/30:128k/20 --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --group_reporting >/tmp/fio.out 2>&1 ||
		{ tail -n 5 /tmp/fio.out; return 1; }
	grep -q "err= 0" /tmp/fio.out || { grep "err=" /tmp/fio.out; return 1; }
	grep -E "^ +(read|write):" /tmp/fio.out | sed 's/^ */# fio: /'
}

# ext4: files written, unmounted, mounted again (caches dropped): the
# same checksums; unmapping the mounted disk is EBUSY.
ext4_round_trip() {
	mkfs.ext4 -q -F $disk || return 1
	mkdir -p /mnt/blk
	mount -t ext4 $disk /mnt/blk || return 1
	mkdir /mnt/blk/d
	for i in 1 2 3 4 5 6 7 8; do
		dd if=/dev/urandom of=/mnt/blk/d/f$i bs=$((i * 3000 + 17)) count=64 2>/dev/null
	done
	cp /tmp/pat /mnt/blk/big
	(cd /mnt/blk && md5sum d/* big) >/tmp/sums
	if out=$(rrdma unmap 0 2>&1); then echo "unmapped while mounted"; return 1; fi
	case $out in *"Device or resource busy"*) ;; *) echo "unmap refused otherwise: $out"; return 1 ;; esac
	umount /mnt/blk || return 1
	echo 3 >/proc/sys/vm/drop_caches
	mount -t ext4 $disk /mnt/blk || return 1
	(cd /mnt/blk && md5sum -c /tmp/sums >/dev/null) || { umount /mnt/blk; echo "checksums differ"; return 1; }
	umount /mnt/blk
}

# Swap: a process in a memory cgroup capped at CAP_MIB touches TOUCH_MIB,
# every page with its own pattern, then checks every page; the pages it
# cannot keep go to the disk (the only swap) and come back.
swap_round_trip() {
	mkswap $disk >/dev/null || return 1
	swapon $disk || return 1
	mkdir -p /sys/fs/cgroup
	grep -q " /sys/fs/cgroup cgroup2 " /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup || return 1
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control || return 1
	mkdir -p /sys/fs/cgroup/blk
	echo $((CAP_MIB << 20)) >/sys/fs/cgroup/blk/memory.max || return 1
	out=$(sh -c "echo \$\$ >/sys/fs/cgroup/blk/cgroup.procs && exec rrdma-selftest touch-pages $TOUCH_MIB" 2>&1)
	rc=$?
	# The cgroup's peak of swap use (a kernel without VM event counters
	# has no pswpout).
	peak=$(cat /sys/fs/cgroup/blk/memory.swap.peak 2>/dev/null)
	swapoff $disk || { echo "swapoff failed"; return 1; }
	echo "# swap: $out; the cgroup's swap peaked at ${peak:-?} bytes"
	[ $rc = 0 ] || { echo "$out"; return 1; }
	[ "${peak:-0}" -gt $((1 << 20)) ] || { echo "under 1 MiB swapped out: ${peak:-?}"; return 1; }
}

read_only_disk() {
	[ "$(cat /sys/block/rrdmab0/ro)" = 1 ] || { echo "ro is not 1"; return 1; }
	if dd if=/dev/zero of=$disk bs=4k count=1 oflag=direct 2>/dev/null; then
		echo "a write succeeded"
		return 1
	fi
	rrdma read $tok/ro --count $((MIB * 256)) --output /tmp/remote >/dev/null || return 1
	dd if=$disk of=/tmp/ro bs=64k count=$((MIB * 16)) iflag=direct 2>/dev/null &&
		cmp /tmp/ro /tmp/remote
}

# An open disk: EBUSY; closed, it unmaps, and its map command ends.
unmap_busy() {
	exec 3<$disk
	out=$(rrdma unmap 0 2>&1) && { echo "unmap of an open disk succeeded"; exec 3<&-; return 1; }
	exec 3<&-
	case $out in *"Device or resource busy"*) ;; *) echo "refused otherwise: $out"; return 1 ;; esac
	rrdma unmap 0 || return 1
	[ ! -e /sys/block/rrdmab0 ] || { echo "still in sysfs"; return 1; }
	i=0
	while [ ! -e /tmp/map.rc ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	[ "$(cat /tmp/map.rc 2>/dev/null)" = 0 ] ||
		{ echo "map did not end with 0: $(cat /tmp/map.rc 2>&1) $(tail -n 2 /tmp/map.out)"; return 1; }
}

# The mapping process dies with a reader holding the disk open: the disk
# goes; the reader's next read fails or finds the disk empty (a removed
# disk has no sectors), past the first page (the partition scan's).
owner_dies() {
	exec 3<$disk
	kill "$(pidof rrdma)"
	i=0
	while [ -e /sys/block/rrdmab0 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	[ ! -e /sys/block/rrdmab0 ] || { exec 3<&-; echo "the disk outlived its file"; return 1; }
	n=$(dd bs=4k count=1 skip=100 <&3 2>/dev/null | wc -c)
	exec 3<&-
	[ "$n" = 0 ] || { echo "read $n bytes of the removed disk"; return 1; }
}

if [ "$RRDMA_ROLE" = a ]; then
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks $((DISK_MIB * 256)) \
		--access rw --access ro >>/tmp/serve.out 2>&1 &
	pid=$!
	wait_exit $pid 3000
	check "serve ends cleanly on quit" test $? = 0
else
	wait_peer
	wait_tokens
	if map rw; then ok "map: $disk appears"; else fail "map: $disk appears" "$(tail -n 3 /tmp/map.out)"; fi
	check "blk $prov: size is the export's" test "$(blockdev --getsize64 $disk)" = $((DISK_MIB << 20))
	check "blk $prov: direct I/O round trip; the bytes are in the exporter's memory" direct_round_trip
	check "blk $prov: buffered I/O at odd offsets, written back" buffered_round_trip
	check "blk $prov: the disk's flushes are fences on its import" flushes_are_fences
	check "blk $prov: fio, 4 jobs at depth 32, crc32c verified over the whole disk" fio_verify
	grep -E "IOPS=" /tmp/fio.out | sed 's/^ */fio: /'
	check "blk $prov: ext4: files written, remounted, checksums equal; mounted disk unmaps EBUSY" \
		ext4_round_trip
	check "blk $prov: swap under a memory cap: every page back intact" swap_round_trip
	check "blk $prov: unmap of an open disk is EBUSY; unmapped, map ends" unmap_busy
	map rw --ro
	check "blk $prov: map --ro gives a read-only disk" read_only_disk
	check "blk $prov: unmap it" sh -c "rrdma unmap 0 && sleep 1 && test -e /tmp/map.rc"
	map ro
	check "blk $prov: a read-only export gives a read-only disk" read_only_disk
	check "blk $prov: closing the mapping file removes the disk; its reader gets errors" owner_dies
	check_fails "blk $prov: unmap of no disk fails" rrdma unmap 7
	tap "blk $prov" rrdma-selftest blk $RRDMA_PEER
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
fi
