# SPDX-License-Identifier: GPL-2.0
# `make blkbench`: rrdma-blk against nvme-rdma and RNBD, on the provider
# given as the argument (siw or rxe), two guests: guest a serves (an rrdma
# region, and a RAM disk each behind nvmet-rdma and the RNBD server),
# guest b maps all three and runs the same fio jobs on each, alternating
# rrdma, nvme, rnbd in every round.  Each measurement is one line
#   RRDMA-BLKBENCH round=R target=T job=J iops=N kbs=N p50=U p99=U p999=U
#                  tcpu=J ccpu=J secs=S
# on the console (scripts/blkbench-report.py reads them): p50, p99 and
# p999 are fio's completion latency percentiles in microseconds; tcpu and
# ccpu are the jiffies the serving and the using guest spent outside idle
# (user, system, irq and softirq) during the job; the serving guest's come
# from a meter on port 7480 that prints its /proc/stat.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
ROUNDS=$(sed -n 's/.*rrdma\.rounds=\([0-9]*\).*/\1/p' /proc/cmdline)
ROUNDS=${ROUNDS:-2}
DISK_MIB=64
NQN=nqn.2026-11.org.rrdma:blkbench
# "job rw bs depth seconds": a 1 MiB job moves some 20 I/Os a second
# here, so it runs longer (at 3 s its rounds spread over 0.74x-1.23x).
JOBS="randread-4k-qd1 randread 4k 1 5
randwrite-4k-qd1 randwrite 4k 1 5
randread-4k randread 4k 32 5
randwrite-4k randwrite 4k 32 5
read-1m read 1m 8 10
write-1m write 1m 8 10"

wire_up "$prov" "$dev"

# Jiffies outside idle, all CPUs: user nice system idle iowait irq softirq.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

serve_all() {
	modprobe brd rd_nr=2 rd_size=$((DISK_MIB * 1024)) || return 1
	# nvmet-rdma on 4420, namespace 1 the first RAM disk.
	modprobe nvmet-rdma || return 1
	mount -t configfs none /sys/kernel/config 2>/dev/null
	t=/sys/kernel/config/nvmet
	mkdir $t/subsystems/$NQN || return 1
	echo 1 >$t/subsystems/$NQN/attr_allow_any_host
	mkdir $t/subsystems/$NQN/namespaces/1
	echo /dev/ram0 >$t/subsystems/$NQN/namespaces/1/device_path
	echo 1 >$t/subsystems/$NQN/namespaces/1/enable || return 1
	mkdir $t/ports/1
	echo rdma >$t/ports/1/addr_trtype
	echo ipv4 >$t/ports/1/addr_adrfam
	echo "$RRDMA_SELF" >$t/ports/1/addr_traddr
	echo 4420 >$t/ports/1/addr_trsvcid
	ln -s $t/subsystems/$NQN $t/ports/1/subsystems/$NQN || return 1
	# The RNBD server (port 1234) serves the second RAM disk.
	modprobe rnbd-server || return 1
	# The CPU meter.
	printf '#!/bin/sh\nhead -n 1 /proc/stat\n' >/tmp/stat.sh
	chmod +x /tmp/stat.sh
	# Its own stdio: the check's command substitution waits for whoever
	# holds its pipe.
	nc -ll -p 7480 -e /tmp/stat.sh </dev/null >/dev/null 2>&1 &
}

map_rrdma() {
	rrdma map --peer "$RRDMA_PEER:7471" --token "@$RRDMA_PEER:7470/rw" >/tmp/map.out 2>&1 ||
		{ cat /tmp/map.out; return 1; }
	wait_blk /dev/rrdmab0 || { cat /tmp/map.out; return 1; }
}

map_nvme() {
	modprobe nvme-rdma || return 1
	echo "transport=rdma,traddr=$RRDMA_PEER,trsvcid=4420,nqn=$NQN" >/dev/nvme-fabrics || return 1
	wait_blk /dev/nvme0n1
}

map_rnbd() {
	modprobe rnbd-client || return 1
	echo "sessname=blkbench path=ip:$RRDMA_PEER device_path=/dev/ram1" \
		>/sys/devices/virtual/rnbd-client/ctl/map_device || return 1
	wait_blk /dev/rnbd0
}

# wait_blk DEV: up to 30 s for block device DEV.
wait_blk() {
	i=0
	until [ -b "$1" ] || [ $i -ge 150 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	[ -b "$1" ]
}

peer_busy() { echo | nc "$RRDMA_PEER" 7480 | awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }'; }

# measure ROUND TARGET DEVICE JOB RW BS DEPTH SECONDS
measure() {
	# Never a file of that name: fio would create one, in RAM.
	if [ ! -b "$3" ]; then
		fail "blkbench $2 $4 round $1" "$3 is not a block device"
		return
	fi
	t0=$(peer_busy) c0=$(busy)
	line=$(fio --name="$4" --thread --filename="$3" --direct=1 --ioengine=io_uring \
		--iodepth="$7" --rw="$5" --bs="$6" --size=${DISK_MIB}M --runtime="$8" --time_based \
		--output-format=terse --terse-version=3 2>/tmp/fio.err)
	t1=$(peer_busy) c1=$(busy)
	# Terse v3: reads' bandwidth, IOPS and completion latency percentiles
	# ("P%=usec") in fields 7, 8 and 18-37, writes' in 48, 49 and 59-78.
	case $5 in
	*read) kbs=$(echo "$line" | cut -d';' -f7) iops=$(echo "$line" | cut -d';' -f8)
		pcts=$(echo "$line" | cut -d';' -f18-37) ;;
	*) kbs=$(echo "$line" | cut -d';' -f48) iops=$(echo "$line" | cut -d';' -f49)
		pcts=$(echo "$line" | cut -d';' -f59-78) ;;
	esac
	pct() { echo "$pcts" | tr ';' '\n' | sed -n "s/^$1%=//p" | head -n 1; }
	lat="p50=$(pct 50.000000) p99=$(pct 99.000000) p999=$(pct 99.900000)"
	err=$(echo "$line" | cut -d';' -f5)
	if [ -z "$line" ] || [ "$err" != 0 ] || [ -z "$t0" ] || [ -z "$t1" ]; then
		fail "blkbench $2 $4 round $1" "fio: ${err:-no output} $(tail -n 2 /tmp/fio.err)"
		return
	fi
	echo "RRDMA-BLKBENCH round=$1 target=$2 job=$4 iops=$iops kbs=$kbs $lat tcpu=$((t1 - t0)) ccpu=$((c1 - c0)) secs=$8"
	ok "blkbench $2 $4 round $1"
}

if [ "$RRDMA_ROLE" = a ]; then
	check "blkbench: nvmet-rdma, RNBD server and the meter up" serve_all
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks $((DISK_MIB * 256)) \
		--access rw >>/tmp/serve.out 2>&1 &
	pid=$!
	wait_exit $pid 9000
	check "serve ends cleanly on quit" test $? = 0
else
	wait_peer
	wait_tokens
	# nvmet's port comes up with the serving side's set-up, before serve.
	check "blkbench: rrdma map gives /dev/rrdmab0" map_rrdma
	check "blkbench: nvme-rdma connects: /dev/nvme0n1" map_nvme
	targets="rrdma:/dev/rrdmab0 nvme:/dev/nvme0n1"
	# RTRS (under RNBD) sends with RDMA WRITE with immediate data, which
	# siw (iWARP) does not implement: RNBD runs on rxe only.
	if [ "$prov" = siw ]; then
		skip "blkbench: RNBD maps /dev/rnbd0" "RTRS needs RDMA WRITE with immediate data, which siw lacks"
	else
		check "blkbench: RNBD maps /dev/rnbd0" map_rnbd
		targets="$targets rnbd:/dev/rnbd0"
	fi
	r=1
	while [ $r -le "$ROUNDS" ]; do
		echo "$JOBS" | while read -r job rw bs depth secs; do
			for t in $targets; do
				measure $r "${t%%:*}" "${t#*:}" "$job" "$rw" "$bs" "$depth" "$secs"
			done
		done
		r=$((r + 1))
	done
	echo quit | nc $RRDMA_PEER 7470 >/dev/null
	echo 1 >/sys/class/nvme/nvme0/delete_controller
	for f in /sys/block/rnbd0/rnbd/unmap_device /sys/block/rnbd0/*/unmap_device; do
		[ -e "$f" ] && echo normal >"$f" 2>/dev/null && break
	done
	rrdma unmap 0
fi
