# SPDX-License-Identifier: GPL-2.0
# Sourced by blk.sh (not a test of its own): swap on the disk, under a
# memory cgroup's cap and under the guest's own memory pressure.  Uses
# blk.sh's $disk, DISK_MIB, CAP_MIB, TOUCH_MIB and LEFT_MIB.

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

mem_available_mib() {
	awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo
}

# Swap under the guest's own memory pressure, not a cgroup's: all but
# LEFT_MIB of the available memory is locked by one process, then another
# touches 1.5x what is then available, so reclaim runs for the whole
# guest while the disk's I/O path (and the provider's sockets) allocate.
# Every page comes back, the pages went to the disk, and nothing was
# OOM-killed.  With "reset": once pages go to swap, the disk's connection
# is reset (sysfs rrdma/reset) and reconnects (builds a queue pair,
# allocates) while reclaim writes to this very disk; it reconnected, and
# nothing hung.  (Not the device: with it gone, the tools that would bring
# it back can be in swap themselves, the rootfs being tmpfs.)
swap_used_mib() {
	awk '/^SwapTotal:/ { t = $2 } /^SwapFree:/ { f = $2 } END { print int((t - f) / 1024) }' /proc/meminfo
}

swap_under_pressure() {
	reset=$1
	swapon $disk || return 1
	dmesg -c >/dev/null
	avail=$(mem_available_mib)
	rm -f /tmp/pin.out
	rrdma-selftest pin-memory $((avail - LEFT_MIB)) >/tmp/pin.out 2>&1 &
	pin=$!
	i=0
	until grep -qs pinned /tmp/pin.out; do
		[ $i -ge 300 ] || ! kill -0 $pin 2>/dev/null && break
		sleep 0.2
		i=$((i + 1))
	done
	if ! grep -qs pinned /tmp/pin.out; then
		kill $pin 2>/dev/null
		wait $pin 2>/dev/null
		cat /tmp/pin.out
		swapoff $disk
		return 1
	fi
	left=$(mem_available_mib)
	touch=$((left * 3 / 2))
	# What cannot stay in memory must fit the disk, and some must not.
	if [ $left -lt $((LEFT_MIB / 2)) ] || [ $((touch - left)) -gt $((DISK_MIB * 3 / 4)) ]; then
		kill $pin
		wait $pin 2>/dev/null
		swapoff $disk
		echo "$left MiB left after locking, not about $LEFT_MIB"
		return 1
	fi
	if [ -n "$reset" ]; then
		r0=$(cat /sys/block/rrdmab0/rrdma/reconnects)
		rrdma-selftest touch-pages $touch >/tmp/touch.out 2>&1 &
		tp=$!
		i=0
		until [ "$(swap_used_mib)" -ge 4 ] || [ $i -ge 600 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		early=$(swap_used_mib)
		echo "# $early MiB in swap: the disk's connection is reset"
		echo 1 >/sys/block/rrdmab0/rrdma/reset
		wait_exit $tp 1500
		rc=$?
		out=$(cat /tmp/touch.out)
		r1=$(cat /sys/block/rrdmab0/rrdma/reconnects)
		[ "$r1" -gt "$r0" ] || { echo "no reconnect ($r0, then $r1)"; rc=1; }
		[ "$early" -ge 4 ] || { echo "the reset came with $early MiB in swap, not 4"; rc=1; }
	else
		out=$(rrdma-selftest touch-pages $touch 2>&1)
		rc=$?
	fi
	kill -0 $pin 2>/dev/null
	alive=$?
	kill $pin
	wait $pin 2>/dev/null
	swapoff $disk || { echo "swapoff failed"; return 1; }
	echo "# swap under pressure: $avail MiB available, $((avail - LEFT_MIB)) MiB locked," \
		"$left MiB left, $touch MiB touched: $out"
	[ $rc = 0 ] || return 1
	[ $alive = 0 ] || { echo "the locked process died"; return 1; }
	! dmesg | grep -q -i "invoked oom-killer" || { echo "OOM killer ran"; return 1; }
	used=$(echo "$out" | sed -n 's/.*(\([0-9]*\) MiB of swap in use then).*/\1/p')
	[ "${used:-0}" -ge $(((touch - left) / 2)) ] ||
		{ echo "${used:-?} MiB swapped, under half of $((touch - left)) MiB"; return 1; }
}
