# SPDX-License-Identifier: GPL-2.0
# Shared helpers for rrdma's scripts; sourced, not run.

# The build cache lives outside the repo so that clean clones reuse it.
CACHE=${RRDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rrdma}
mkdir -p "$CACHE"

log() { echo "[$(date +%H:%M:%S)] $(basename "$0"): $*" >&2; }
die() { log "error: $*"; exit 1; }
