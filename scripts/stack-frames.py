#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Fail if a function of a module reserves a large stack frame.

    scripts/stack-frames.py MODULE.ko

Kernel stacks are 16 KiB on x86-64, and a Rust value built in a function
and then moved (a struct literal, a `Result<T>` of a large T) can take its
size several times over in that function's frame; the compiler does not
warn as gcc's -Wframe-larger-than does for C.  This reads the frame each
function reserves (`sub $N, %rsp` in objdump's disassembly) and fails above
LIMIT bytes, the C default of CONFIG_FRAME_WARN on 64-bit, except for the
known functions below, each held to its own cap until it is fixed.
"""
import re
import subprocess
import sys

LIMIT = 2048
# Mangled-name fragment -> cap, with why it is over the limit.
KNOWN = {
    # Holds an import answer (a grant of up to 116 keys) and its copy.
    "11fetch_grant": 4096,
    # A received control message, decoded (an import answer) and copied.
    "rrdma_rust_ctrl_recv": 2560,
}


def frames(ko):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", ko],
                         capture_output=True, text=True, check=True).stdout
    fn = None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"\bsub\s+\$0x([0-9a-f]+),%rsp", line)
        if m and fn:
            yield fn, int(m.group(1), 16)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: stack-frames.py MODULE.ko")
    bad = 0
    for fn, size in sorted(set(frames(sys.argv[1])), key=lambda x: -x[1]):
        cap = next((c for k, c in KNOWN.items() if k in fn), LIMIT)
        if size > cap:
            print(f"{fn}: {size}-byte stack frame (limit {cap})")
            bad += 1
        elif size > LIMIT:
            print(f"# {fn}: {size} bytes (known, cap {cap})")
    sys.exit(1 if bad else 0)


main()
