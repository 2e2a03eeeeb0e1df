# SPDX-License-Identifier: GPL-2.0
# Single-guest tests of the module: load, /dev/rrdma, GET_INFO and its bad
# inputs, regions and their mappings, siw and rxe device add/remove, rmmod, load/unload cycles,
# module parameters and the KUnit suite.
. ./lib.sh

load_rdma_drivers || fail "soft RDMA drivers load" "modprobe failed"
make_veth || fail "veth pair" "ip link failed"

check "rrdma.ko loads" insmod $RRDMA_KO
check "/dev/rrdma is a character device" test -c /dev/rrdma
check "/dev/rrdma mode is 0600 by default" sh -c '[ "$(stat -c %a /dev/rrdma)" = 600 ]'
check "rrdma info with no devices" sh -c 'rrdma info | grep -q "no RDMA devices"'
tap "abi (no devices)" rrdma-selftest abi
tap "regions" rrdma-selftest regions

# Devices added while the module is loaded: the ib_client add path.
check "rdma link add siw0 on veth0" rdma link add siw0 type siw netdev veth0
check "rdma link add rxe0 on veth1" rdma link add rxe0 type rxe netdev veth1
wait_active siw0; wait_active rxe0
tap "devices" rrdma-selftest devices siw0:rnic rxe0:ib_ca
tap "abi (with devices)" rrdma-selftest abi
check "rrdma info lists siw0 and rxe0" sh -c 'rrdma info > /tmp/info && grep -q "^siw0 .*RNIC .*ACTIVE .*yes" /tmp/info && grep -q "^rxe0 .*IB_CA .*ACTIVE .*yes" /tmp/info'
check "rrdma info --json lists both" sh -c 'rrdma info --json > /tmp/info.json && grep -q "\"name\": \"siw0\"" /tmp/info.json && grep -q "\"name\": \"rxe0\"" /tmp/info.json && grep -q "\"abi_version\": 1" /tmp/info.json'

# Device removal while the module holds the device.
check "rdma link del siw0 while rrdma holds it" rdma link del siw0
tap "after siw0 removal" rrdma-selftest absent siw0
tap "rxe0 survives siw0 removal" rrdma-selftest devices rxe0:ib_ca
check "rdma link del rxe0 while rrdma holds it" rdma link del rxe0
tap "after rxe0 removal" rrdma-selftest absent rxe0

# A GET_INFO whose copy-out is stalled on a userfaultfd page must not hold
# up device removal (rrdma drops device references before user copies).
check "re-add siw0" rdma link add siw0 type siw netdev veth0
wait_active siw0
rm -f /tmp/release
rrdma-selftest hold-get-info /tmp/release >/tmp/hold.out 2>&1 &
hold=$!
i=0
until grep -q holding /tmp/hold.out || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
check "GET_INFO stalled on a userfaultfd page" grep -q holding /tmp/hold.out
check "rdma link del siw0 is not held up by the stalled GET_INFO" timeout 10 rdma link del siw0
touch /tmp/release
wait $hold
check "the stalled GET_INFO completes once the fault is resolved" grep -q "^completed" /tmp/hold.out

# An open file pins the module.
check "re-add siw0 again" rdma link add siw0 type siw netdev veth0
exec 3<>/dev/rrdma
check_fails "rmmod refused while /dev/rrdma is open" rmmod rrdma
exec 3>&-
check "rmmod with siw0 present" rmmod rrdma
check "/dev/rrdma gone after rmmod" sh -c '! test -e /dev/rrdma'

# Devices present before load: the ib_client registration path.
check "re-add rxe0" rdma link add rxe0 type rxe netdev veth1
wait_active siw0; wait_active rxe0
check "load with siw0 and rxe0 present" insmod $RRDMA_KO
tap "devices present at load" rrdma-selftest devices siw0:rnic rxe0:ib_ca

# Removing the drivers themselves removes their devices under rrdma.
check "rmmod siw with rrdma loaded" rmmod siw
check "rmmod rdma_rxe with rrdma loaded" rmmod rdma_rxe
tap "after driver unload" rrdma-selftest absent siw0 rxe0
check "rmmod rrdma with no devices" rmmod rrdma

# Load/unload cycles with both devices present: 50, or 10 on a debug
# kernel (where 50 took 59 s; kmemleak's scans at the end see a leak of
# ten cycles as well as one of fifty).
CYCLES=50
[ -n "$(quick_on_debug)" ] && CYCLES=10
load_rdma_drivers
check "re-add siw0 and rxe0 for load cycles" sh -c 'rdma link add siw0 type siw netdev veth0 && rdma link add rxe0 type rxe netdev veth1'
wait_active siw0; wait_active rxe0
cycles_ok=0
i=0
while [ $i -lt $CYCLES ]; do
	insmod $RRDMA_KO && [ "$(rrdma info --json | grep -c '"usable": true')" = 2 ] &&
		rmmod rrdma && cycles_ok=$((cycles_ok + 1))
	i=$((i + 1))
done
check "$CYCLES load/unload cycles with siw0 and rxe0" test "$cycles_ok" = $CYCLES

# Module parameter: dev_mode.
check "dev_mode=0666 widens /dev/rrdma" sh -c "insmod $RRDMA_KO dev_mode=0666 && [ \"\$(stat -c %a /dev/rrdma)\" = 666 ] && rmmod rrdma"
check_fails "dev_mode=0777 is refused" insmod $RRDMA_KO dev_mode=0777
check "refused dev_mode leaves nothing behind" sh -c '! test -e /dev/rrdma && ! grep -q "^rrdma " /proc/modules'

rdma link del siw0
rdma link del rxe0

# KUnit: the suite runs at load and reports KTAP on the console.
check "rrdma_kunit.ko loads and runs" insmod $RRDMA_KUNIT_KO
check "KUnit suite rrdma passed" grep -q "^ok [0-9]* rrdma$" /sys/kernel/debug/kunit/rrdma/results
rmmod rrdma_kunit

# Debug kernels: the leak check at the end of every guest run can fail.
# rrdma_kunit.ko leaks 16 small objects at load on request; the same
# scans then report them (with the module still loaded, an allocation's
# backtrace names it).  `clear` hides the reported ones from the run's own
# check, and the unload frees all 16 (the module kept their pointers where
# kmemleak does not look), so that one a stale pointer hid from these
# scans is not reported by the run's final scan either.
if [ -e /sys/kernel/debug/kmemleak ]; then
	insmod $RRDMA_KUNIT_KO leak_on_purpose=1
	kmemleak_scan
	check "kmemleak reports a deliberate leak (two scans)" sh -c \
		'grep -A12 "unreferenced object" /sys/kernel/debug/kmemleak | grep -q rrdma_kunit_leak'
	echo clear >/sys/kernel/debug/kmemleak
	rmmod rrdma_kunit
fi
