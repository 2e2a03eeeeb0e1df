#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count the distinct checks of a results file.

    scripts/distinct-checks.py build/results.txt          prints the count
    scripts/distinct-checks.py --list build/results.txt   each check, with
                                                          its results
    scripts/distinct-checks.py --self-test

`make check` runs most checks once per kernel, provider and limit (a guest
test's label is "KERNEL [debug] TEST [PROVIDER] [small]"): a result line
`PASS|FAIL|SKIP NAME` names the check and the run it belongs to.  A check's
identity is its line without that run: no status, no reason after " # ",
no trailing figure in parentheses ("(12 s)", "(max_op_blocks 16)"), kernel
versions as {kernel}, no "(base)"/"(debug)" and no "debug", "base", "small"
or "stress" in the label, and the provider the label names as {prov}
(also in its device names siw0, siw_a, and in a tap prefix "remote
siw,small").  Guest roles ([a], [b]) stay: the two guests run different
parts.  A number that depends on the run but is not in trailing
parentheses stays (attack's "an operation of 16 blocks").
"""
import re
import sys
from collections import Counter
from pathlib import Path

PROVIDERS = ("siw", "rxe")
LABEL_VARIANTS = ("debug", "base", "small", "stress")
KERNEL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
TRAILING_FIGURE = re.compile(r" \([^()]*\d[^()]*\)$")


def identity(line):
    """The check a result line is a result of, without its run."""
    name = line.strip().split(" ", 1)[1] if " " in line.strip() else ""
    name = name.split(" # ", 1)[0].rstrip()
    name = TRAILING_FIGURE.sub("", name)
    name = re.sub(r" \((base|debug)\)", "", name)
    head, sep, rest = name.partition(": ")
    words = head.split()
    provider = next((w for w in words if w in PROVIDERS), None)
    head = " ".join("{prov}" if w in PROVIDERS else w
                    for w in words if w not in LABEL_VARIANTS)
    if provider:
        rest = re.sub(rf"\b{provider}(?=(0|_a|_b)?\b)", "{prov}", rest)
        rest = re.sub(r"\{prov\},(" + "|".join(LABEL_VARIANTS) + r")\b", "{prov}", rest)
    return KERNEL.sub("{kernel}", head + sep + rest)


def checks(lines):
    """Results per distinct check of result LINES (others are ignored)."""
    return Counter(identity(line) for line in lines
                   if re.match(r"(PASS|FAIL|SKIP) ", line))


def self_test():
    cases = {
        "PASS setup (3 s)": "setup",
        "PASS host: tests::get_info_matches_c_macro": "host: tests::get_info_matches_c_macro",
        "FAIL host: cargo test # see build/logs/cargo-test.log": "host: cargo test",
        "PASS build: userspace (static) (41 s)": "build: userspace (static)",
        "PASS build: kernel 7.3 (base) (1 s)": "build: kernel {kernel}",
        "FAIL build: modules for 6.12 (debug) # see x.log": "build: modules for {kernel}",
        "PASS 7.3 basic: rdma link del siw0 while rrdma holds it":
            "{kernel} basic: rdma link del siw0 while rrdma holds it",
        "PASS 6.12 debug basic: guest ran to completion (640 s)":
            "{kernel} basic: guest ran to completion",
        "PASS 7.3 pair rxe [a]: ib_write_bw -R server on rxe0":
            "{kernel} pair {prov} [a]: ib_write_bw -R server on {prov}0",
        "PASS 6.12 debug remote siw small [b]: remote siw,small: verify 256 blocks":
            "{kernel} remote {prov} [b]: remote {prov}: verify 256 blocks",
        "FAIL 7.3 remote rxe [b]: remote rxe: one fence per SUBMIT (2) # 1 fences (iWARP: false)":
            "{kernel} remote {prov} [b]: remote {prov}: one fence per SUBMIT",
        "PASS 7.3 attack siw [b]: attack siw: an operation of 8 blocks (max_op_blocks 8)":
            "{kernel} attack {prov} [b]: attack {prov}: an operation of 8 blocks",
        "PASS 6.12 debug fuzz rxe: rdma link del rxe_a": "{kernel} fuzz {prov}: rdma link del {prov}_a",
        "PASS 7.3 remote siw [b]: remote siw: a batch of 64 writes on a small queue":
            "{kernel} remote {prov} [b]: remote {prov}: a batch of 64 writes on a small queue",
        "PASS 7.3 basic: liburing example: x is refused with EINVAL before 6.13":
            "{kernel} basic: liburing example: x is refused with EINVAL before {kernel}",
    }
    bad = [(line, identity(line), want) for line, want in cases.items() if identity(line) != want]
    for line, got, want in bad:
        print(f"identity({line!r}):\n  got  {got!r}\n  want {want!r}")
    # A results file as check.sh and guest.py write it: 65 results of 40
    # checks (counted by hand).
    sample = Path(__file__).parent / "testdata" / "results-sample.txt"
    found = checks(sample.read_text().splitlines())
    total = sum(found.values())
    if (total, len(found)) != (65, 40):
        print(f"{sample}: {total} results of {len(found)} checks, expected 65 of 40")
        bad.append(sample)
    print("distinct-checks self-test: " + ("FAILED" if bad else "ok"))
    return 1 if bad else 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    listing = args[:1] == ["--list"]
    if listing:
        args = args[1:]
    if len(args) != 1:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    found = checks(Path(args[0]).read_text(errors="replace").splitlines())
    if listing:
        for name, n in sorted(found.items()):
            print(f"{n:4} {name}")
    else:
        print(len(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
