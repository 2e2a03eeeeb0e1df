# SPDX-License-Identifier: GPL-2.0
# `make profile` (run on both guests): where the initiator's CPU goes.
# Guest a serves regions of 512 B and 4 KiB blocks over the provider given
# as the argument (siw or rxe); guest b runs `rrdma bench` WRITEs through
# SUBMIT ioctls and through io_uring commands, each under
# `perf record -a -e cpu-clock` (a timer: the only sampling event a TCG
# guest has), and writes perf's report of each run to the results port
# between RRDMA-PROFILE markers: both guests' busy time, the shares of the
# initiator's busy samples by task and by symbol, rrdma's functions with
# what they call, and the callers of the hottest locks.  The figures are shares of the guest's CPU time
# over the run (all CPUs, idle included), not absolute costs: TCG makes
# every instruction slower by a different factor.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
wire_up "$prov" "$dev"

say() { echo "$*" >&9; }

# CPU time from /proc/stat's "cpu" line, here and on the exporter (its
# `serve --control` answers `cpustat`), and the busy share between two.
cpu_here() { sed -n 's/^cpu  *//p' /proc/stat; }
cpu_peer() { echo cpustat | nc "$RRDMA_PEER" 7470; }
busy_pct() { # BEFORE AFTER: user nice system idle iowait irq softirq steal
	echo "$1 $2" | awk '{ for (i = 1; i <= 8; i++) d[i] = $(i + 10) - $i
		t = 0; for (i = 1; i <= 8; i++) t += d[i]
		printf "%.0f", t ? 100 * (t - d[4] - d[5]) / t : 0 }'
}

# Runs (size, depth, engine[, threads]) cases; rrdma.profile_cases=A,B,...
# overrides them (PROFILE_CASES of scripts/profile.sh).
CASES=$(sed -n 's/.*rrdma\.profile_cases=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
CASES=${CASES:-"512:1:ioctl 512:1:uring 512:16:ioctl 512:16:uring 4096:16:ioctl 4096:16:uring"}
SECS=3

if [ "$RRDMA_ROLE" = a ]; then
	rrdma serve --listen 0.0.0.0:7471 --control 7470 --blocks 8192 --access rw \
		>/tmp/serve.out 2>&1 &
	pid=$!
	rrdma serve --listen 0.0.0.0:7472 --control 7473 --block-size 512 --blocks 8192 \
		--access rw >/tmp/serve512.out 2>&1 &
	pid512=$!
	wait_exit $pid 3000
	wait_exit $pid512 100
	ok "profile server on $dev"
else
	wait_peer
	wait_tokens
	check "perf is in the guest (linux-perf on the host)" command -v perf
	# Kernel symbols for perf (root may read them; the default hides
	# them from perf's own checks).
	echo 0 >/proc/sys/kernel/kptr_restrict
	echo -1 >/proc/sys/kernel/perf_event_paranoid
	for c in $CASES; do
		size=${c%%:*}
		rest=${c#*:}
		depth=${rest%%:*}
		rest=${rest#*:}
		engine=${rest%%:*}
		# An optional fourth field: threads on the one connection (its
		# data lanes), each with its own io_uring ring.
		threads=1
		[ "$rest" = "$engine" ] || threads=${rest#*:}
		t="--peer $RRDMA_PEER:7471 --token @$RRDMA_PEER:7470/rw"
		[ "$size" = 512 ] && t="--peer $RRDMA_PEER:7472 --token @$RRDMA_PEER:7473/rw"
		name="WRITE $size B depth $depth $engine"
		[ "$threads" = 1 ] || name="$name, $threads threads"
		c0=$(cpu_here)
		p0=$(cpu_peer)
		perf record -a -g -e cpu-clock -F 999 -o /tmp/perf.data -- \
			rrdma bench $t --op write --size "$size" --depth "$depth" --duration $SECS \
			--engine "$engine" --threads "$threads" >/tmp/bench.out 2>/tmp/perf.err
		rc=$?
		if [ $rc != 0 ] || ! grep -q MsgRate /tmp/bench.out; then
			fail "profile: $name" "rc $rc: $(tail -n 2 /tmp/perf.err /tmp/bench.out | tr '\n' ' ')"
			continue
		fi
		say "RRDMA-PROFILE-BEGIN $prov $name"
		sed 's/^/  /' /tmp/bench.out >&9
		say "busy: initiator $(busy_pct "$c0" "$(cpu_here)")%, exporter $(busy_pct "$p0" "$(cpu_peer)")% of their CPUs over the run (/proc/stat)"
		# Shares of the initiator's busy samples: the idle task (comm
		# swapper) left out, percentages relative to what is left.
		comms=$(perf report -i /tmp/perf.data --stdio --no-children -s comm -g none 2>/dev/null |
			awk '!/^#/ && NF >= 2 && $2 !~ /^swapper/ { print $2 }' | paste -sd, -)
		rep() { perf report -i /tmp/perf.data --stdio -g none --comms "$comms" \
			--percentage relative "$@" 2>/dev/null | grep -v '^#' | grep -v '^$'; }
		say "-- initiator's busy samples by task --"
		rep --no-children -s comm --percent-limit 1 | head -n 12 >&9
		say "-- hottest symbols (self) --"
		rep --no-children -s dso,sym --percent-limit 0.8 | head -n 30 >&9
		say "-- rrdma's functions, with what they call (children) --"
		rep --children -s sym --percent-limit 1 | grep -E 'rrdma|io_uring|__x64_sys' |
			head -n 30 >&9
		# A cpu-clock sample taken while interrupts are off lands where
		# they come back on: the unlock's share is the time spent in
		# irq-off critical sections, its callers say whose.
		for sym in queued_spin_lock_slowpath _raw_spin_unlock_irqrestore \
			_raw_spin_unlock_irq; do
			say "-- who calls $sym (callers, 5 frames) --"
			perf report -i /tmp/perf.data --stdio --no-children --comms "$comms" \
				--percentage relative -s sym \
				-S "$sym" -g caller,2,callee,function,percent --max-stack 5 \
				2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 40 >&9
		done
		say "RRDMA-PROFILE-END"
		ok "profile: $name"
	done
	echo quit | nc "$RRDMA_PEER" 7470 >/dev/null
	echo quit | nc "$RRDMA_PEER" 7473 >/dev/null
fi
rdma link del "$dev"
check "rmmod rrdma" rmmod rrdma
