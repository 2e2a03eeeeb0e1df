#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything rrdma's build and tests need, idempotently: does nothing
# when all is already there.  Called first by `make demo`, `make check` and
# .ci/run.  Must run as root (or with sudo available) on Debian 12.
set -euo pipefail

log() { echo "setup: $*" >&2; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

# Debian packages: kernel build deps, LLVM toolchain, guest tooling,
# RDMA userspace (rdma tool, perftest, verbs providers) and debootstrap for
# the trixie tree that builds the newest kernel; matplotlib for `make bench`;
# perf for `make profile`; rdma-core's static libraries (verbs, rdma_cm, the
# rxe provider, libnl) for the selftest's hostile RoCE peer.
DEB_PKGS=(
	make flex bison bc libelf-dev libssl-dev cpio kmod xz-utils python3
	clang lld llvm libclang-dev
	qemu-system-x86 busybox-static
	iproute2 rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest fio
	linux-source-6.12
	debootstrap rsync patch
	python3-matplotlib linux-perf
	libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev liburing-dev
)

# docutils for the documentation's check (scripts/lint.sh docs), into the
# python3 the scripts run.
if ! python3 -c 'import docutils' 2>/dev/null; then
	log "installing docutils from PyPI"
	python3 -m pip install --quiet docutils || die "cannot install docutils"
fi

missing=()
for p in "${DEB_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing Debian packages: ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
fi

# Rust: the kernel needs the standard library sources to build `core`.
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "adding rustup component rust-src"
	rustup component add rust-src
fi

# Debian's bindgen (0.60) is older than 6.12's minimum (0.65.1).
if ! command -v bindgen >/dev/null 2>&1 ||
	! bindgen --version 2>/dev/null | awk '{split($2,v,"."); exit !(v[1]>0 || v[2]>=65)}'; then
	log "installing bindgen-cli from crates.io (about 2 minutes)"
	cargo install bindgen-cli --locked --quiet
fi

log "all dependencies present"
