# SPDX-License-Identifier: GPL-2.0
# Shared helpers for rrdma's scripts; sourced, not run.

# The build cache lives outside the repo so that clean clones reuse it.
CACHE=${RRDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rrdma}
mkdir -p "$CACHE"

log() { echo "[$(date +%H:%M:%S)] $(basename "$0"): $*" >&2; }
die() { log "error: $*"; exit 1; }

# perftest 4.5's client sometimes dies in librdmacm after a failed first
# connection attempt (the guest tests that run perftest retry with a fresh
# server); the kernel logs the fault.  That is perftest's, not a kernel
# report: guest.py --allow-log "$PERFTEST_CRASH" counts it, not fails it.
PERFTEST_CRASH='traps: ib_[a-z_]+\[[0-9]+\] general protection fault .* in librdmacm'

# chroot_run ROOT CMD...: runs CMD inside the tree ROOT with /proc mounted
# (objtool and rustc need it) and / as working directory. The mount lives in
# a private mount namespace that ends with CMD, so none is left behind in the
# cache (an rm -rf of the cache would otherwise walk into the host's /proc).
chroot_run() {
	local root=$1
	shift
	(cd / && unshare --mount --propagation private -- \
		sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' \
		"$root" "$@")
}

# prepare_guests KVER [VARIANT]: what a run of guests on kernel KVER
# (VARIANT base, the default, or debug) needs: the set-up, the static
# userspace binaries, the module and the kernel (each reused when built);
# sets $mods and $kdir for scripts/guest.py.
prepare_guests() {
	local here
	here=$(dirname "${BASH_SOURCE[0]}")
	"$here/setup.sh"
	"$here/build-userspace.sh"
	mods=$("$here/build-module.sh" "$1" "${2:-base}" | tail -1)
	kdir=$("$here/kernel.sh" "$1" "${2:-base}" | tail -1)
}
