# SPDX-License-Identifier: GPL-2.0
# How cost grows with what one file holds (issue 47), in one guest, on the
# provider of the argument "PROV,MAX,CONNS" (siw or rxe): rrdma-selftest
# scale connects the file to this guest's own address and grows its
# regions to MAX, its exports to the file's cap, its imports to MAX/10 and
# its connection pairs to CONNS, measuring at each size (see
# rust/selftest/src/scale.rs); every call must succeed, and once the file
# is closed its release must have run to its end. First, the per-file and
# per-user caps on connections, regions and exports
# (rust/selftest/src/caps.rs).
. ./lib.sh

# "PROV[,MAX[,CONNS[,EXPORTS]]]" (defaults 1000, 20 and the module's
# export caps).
old_ifs=$IFS
IFS=,
set -- $RRDMA_ARG
IFS=$old_ifs
prov=$1 max=${2:-1000} conns=${3:-20} exports=${4:-}
load_modules
make_veth || fail "veth pair" "ip link failed"
check "veth0 has 10.77.0.1" ip addr add 10.77.0.1/24 dev veth0
check "rdma link add ${prov}0 on veth0" rdma link add ${prov}0 type $prov netdev veth0
wait_active ${prov}0
tap "caps $prov" rrdma-selftest caps 10.77.0.1
if [ -n "$exports" ]; then
	check "export caps $exports" sh -c "echo $exports > /sys/module/rrdma/parameters/max_file_exports &&
		echo $exports > /sys/module/rrdma/parameters/max_user_exports"
fi
tap "scale $prov" rrdma-selftest scale 10.77.0.1 "$max" "$conns"
check "rdma link del ${prov}0" rdma link del ${prov}0
check "rmmod rrdma" rmmod rrdma
