#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Static checks: `lint.sh rustfmt|clippy|docs|kernel KVER [VARIANT]|all`.
#   rustfmt  - formatting of every Rust file (module and userspace)
#   clippy   - cargo clippy on the userspace workspace, warnings are errors
#   docs     - Documentation/rrdma.rst parses without a warning
#   sizes    - no source file over 500 lines (one concern a file; the
#              UAPI header and the generated include/rrdma.h aside)
# `all` also checks that include/rrdma.h is what rust/capi gives.
#   kernel   - checkpatch.pl on the C shim, the UAPI header and the
#              userspace C (selftest, librrdma's example and tests), and the module
#              built with CLIPPY=1 against kernel KVER (VARIANT base or
#              debug, default base)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

rustfmt_check() {
	(cd rust && cargo fmt --all --check)
	rustfmt --check --edition 2021 --config-path rust/rustfmt.toml rust/module/*.rs rust/module/conn/*.rs rust/module/conn/data/*.rs rust/module/conn/ctrl/*.rs rust/module/blk/*.rs rust/module/file/*.rs rust/module/entry/*.rs rust/module/compat/*.rs rust/module/ffi/*.rs
}

clippy_check() {
	(cd rust && cargo clippy --workspace --all-targets --locked --quiet -- -D warnings)
}

# The documentation parses as reStructuredText without a warning (tables
# whose cells overflow, broken references).
docs_check() {
	python3 - Documentation/rrdma.rst <<'PY'
import io, sys
import docutils.core
err = io.StringIO()
docutils.core.publish_doctree(open(sys.argv[1]).read(), source_path=sys.argv[1],
                              settings_overrides={"warning_stream": err, "report_level": 2})
if err.getvalue():
    sys.exit(err.getvalue())
PY
}

# One concern a file: no source file (Rust, C, shell, Python) over 500
# lines.  The UAPI header stays one file, as every UAPI header does.
sizes_check() {
	local over
	over=$(git ls-files -z -- '*.rs' '*.c' '*.h' '*.sh' '*.py' ':!include/uapi/rrdma.h' \
		':!include/rrdma.h' |
		xargs -0 -r wc -l -- |
		awk '$1 > 500 && $0 !~ /^ *[0-9]+ total$/ { n = $1; sub(/^ *[0-9]+ /, ""); print "  " $0 ": " n " lines" }') ||
		die "sizes: cannot count the lines of the tracked files"
	[ -z "$over" ] || die "files over 500 lines (split them by concern):
$over"
}

kernel_check() {
	local kver=${1:-6.12} variant=${2:-base} kdir src
	kdir=$("$HERE/kernel.sh" "$kver" "$variant" | tail -1)
	src=$(readlink -f "$kdir/source")
	# YIELD: a synchronous operation's busy poll yields its CPU between
	# empty polls, which cond_resched() does not do for a soft provider's
	# thread whose wake-up did not preempt (see qp_task_poll(), shim/poll.c).
	"$src/scripts/checkpatch.pl" --no-tree --strict --quiet --ignore YIELD -f \
		rust/module/shim/*.c $(ls rust/module/shim/*.h | grep -v /trace.h) include/uapi/rrdma.h
	# The tracepoints' header has the TRACE_EVENT() layout of
	# include/trace/events/, which --strict flags line by line.
	"$src/scripts/checkpatch.pl" --no-tree --strict --quiet -f \
		--ignore OPEN_ENDED_LINE,PARENTHESIS_ALIGNMENT rust/module/shim/trace.h
	# Userspace C: its fixed-width types and PRIu64-style macros are the C
	# library's.
	"$src/scripts/checkpatch.pl" --no-tree --strict --quiet -f \
		--ignore PREFER_KERNEL_TYPES,BIT_MACRO,CAMELCASE rust/selftest/csrc/*.[ch] rust/capi/c/*.c
	"$HERE/build-module.sh" "$kver" "$variant" clippy >/tmp/rrdma-clippy.log 2>&1 || { cat /tmp/rrdma-clippy.log; exit 1; }
	if grep -qE "warning|error" /tmp/rrdma-clippy.log; then
		cat /tmp/rrdma-clippy.log
		exit 1
	fi
}

case "${1:-all}" in
rustfmt) rustfmt_check ;;
clippy) clippy_check ;;
docs) docs_check ;;
sizes) sizes_check ;;
kernel) kernel_check "${2:-6.12}" "${3:-base}" ;;
all) rustfmt_check; clippy_check; docs_check; sizes_check; "$HERE/capi-header.sh" --check; kernel_check 6.12 debug ;;
*) die "usage: lint.sh rustfmt|clippy|docs|sizes|kernel KVER [VARIANT]|all" ;;
esac
