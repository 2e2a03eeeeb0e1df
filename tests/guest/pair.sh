# SPDX-License-Identifier: GPL-2.0
# Two-guest test (run on both guests): the virtual wire between them carries
# RDMA traffic on the provider given as the test argument (siw or rxe), with
# rrdma loaded on both sides; guest a serves, guest b connects.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
case $prov in siw) node=rnic ;; rxe) node=ib_ca ;; *) fail "provider" "unknown '$prov'"; exit 1 ;; esac

wire_up "$prov" "$dev"
tap "devices" rrdma-selftest devices $dev:$node

# The peer must be reachable before RDMA can be.
wait_peer
check "peer $RRDMA_PEER answers ping" ping -c 1 -W 2 "$RRDMA_PEER"

# perftest over rdma_cm between the guests (the harness's data-path check).
if [ "$RRDMA_ROLE" = a ]; then
	check "ib_write_bw -R server on $dev" timeout 120 ib_write_bw -R -d $dev -s 65536 -n 200 -F
else
	out=""
	i=0
	while [ $i -lt 40 ]; do
		if out=$(timeout 60 ib_write_bw -R -d $dev -s 65536 -n 200 -F "$RRDMA_PEER" 2>&1); then
			break
		fi
		out="failed"
		sleep 0.5
		i=$((i + 1))
	done
	# Columns: bytes, iterations, BW peak, BW average [MB/s], MsgRate.
	line=$(echo "$out" | grep "^ 65536 ")
	set -- $line
	if [ "$out" = failed ] || [ -z "$line" ]; then
		fail "ib_write_bw -R client on $dev" "no result line"
	elif [ "$2" != 200 ]; then
		fail "ib_write_bw -R client on $dev" "iterations $2, expected 200"
	else
		# All 200 RC writes completed, so the peer's NIC acknowledged them.
		# The MB/s figure is informational only: perftest's own CPU clock
		# sampling is unreliable under TCG and sometimes yields 0.
		ok "ib_write_bw -R client on $dev"
		echo "ib_write_bw $dev: $line"
	fi
fi

check "rdma link del $dev" rdma link del $dev
check "rmmod rrdma" rmmod rrdma
