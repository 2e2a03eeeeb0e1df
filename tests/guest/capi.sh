# SPDX-License-Identifier: GPL-2.0
# librrdma, the C library, in two guests on the provider given as the test
# argument (siw or rxe): guest a runs the C example's server, guest b its
# client (write, read back, verify on both sides, between the guests), then
# the library's own tests (rrdma-ctest) over its own address.
. ./lib.sh

prov=$RRDMA_ARG
dev=${prov}0
wire_up "$prov" "$dev"
wait_peer

if [ "$RRDMA_ROLE" = a ]; then
	check "C example: server verifies what the client wrote" \
		timeout 300 rrdma-cexample serve 7480 7481 256
else
	check "C example: client writes, reads back, server confirms" \
		timeout 300 rrdma-cexample client "$RRDMA_PEER" 7480 7481
	tap "librrdma" timeout 300 rrdma-ctest "$RRDMA_SELF" 7482
	# Every object the tests made is gone with their files.
	check "no rrdma file left open" sh -c '! grep -q rrdma /proc/*/fdinfo/* 2>/dev/null'
fi

check "rdma link del $dev" rdma link del $dev
check "rmmod rrdma" rmmod rrdma
