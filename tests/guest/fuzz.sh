# SPDX-License-Identifier: GPL-2.0
# One-guest fuzz run: `rrdma-selftest fuzz` against two RDMA devices of
# the given provider on a veth pair (connections go to this guest's own
# addresses, so both ends of each are fuzzed), then every device removed
# and rrdma.ko unloaded: a reference leaked by any call makes rmmod fail.
# The test argument is "PROVIDER[,SECONDS[,THREADS[,SEED[,ONLY]]]]" (commas:
# the kernel command line that carries it splits at spaces); ONLY limits
# the actions, names joined by "+" (see rust/selftest/src/fuzz/).
. ./lib.sh

IFS=, read -r prov secs threads seed only <<EOA
$RRDMA_ARG
EOA
prov=${prov:-siw}
secs=${secs:-20}
threads=${threads:-4}
seed=${seed:-random}

load_modules
check "veth pair with $prov on each end" sh -c "
	/usr/bin/ip link add veth0 type veth peer name veth1 &&
	/usr/bin/ip link set veth0 up && /usr/bin/ip link set veth1 up && /usr/bin/ip link set lo up &&
	/usr/bin/ip addr add 10.9.0.1/24 dev veth0 && /usr/bin/ip addr add 10.9.0.2/24 dev veth1 &&
	rdma link add ${prov}_a type $prov netdev veth0 && rdma link add ${prov}_b type $prov netdev veth1"
wait_active ${prov}_a && wait_active ${prov}_b

export RRDMA_FUZZ_ONLY="$only"
tap "fuzz $prov" rrdma-selftest fuzz "$seed" "$secs" "$threads" 10.9.0.1 10.9.0.2

check "rdma link del ${prov}_a" rdma link del ${prov}_a
check "rdma link del ${prov}_b" rdma link del ${prov}_b
check "rmmod rrdma after the fuzz" rmmod rrdma
