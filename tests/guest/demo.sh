# SPDX-License-Identifier: GPL-2.0
# `make demo` (run on both guests): load rrdma, add the provider's device on
# the wire between the guests, and show what rrdma sees.
. ./lib.sh

prov=$RRDMA_ARG
ip link set lo up
ip link set eth0 up && ip addr add "$RRDMA_SELF/24" dev eth0
load_rdma_drivers
check "rrdma.ko loads" insmod $RRDMA_KO
check "rdma link add ${prov}0 on eth0" rdma link add "${prov}0" type "$prov" netdev eth0
wait_active "${prov}0"
{
	echo "RRDMA-DEMO-BEGIN"
	echo "guest $RRDMA_ROLE ($RRDMA_SELF, peer $RRDMA_PEER): rrdma info"
	rrdma info
	echo "RRDMA-DEMO-END"
} >&9
check "rrdma info on ${prov}0" sh -c "rrdma info | grep -q '^${prov}0 .*ACTIVE .*yes'"
rdma link del "${prov}0"
check "rmmod rrdma" rmmod rrdma
