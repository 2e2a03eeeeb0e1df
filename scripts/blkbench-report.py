#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The table of `make blkbench`: for each provider and fio job, the median
over the rounds of each target's IOPS and MB/s, rrdma's ratio to nvme-rdma
and to RNBD, and what an I/O cost the serving guest's CPU (its busy
jiffies during the job per 1000 I/Os; one jiffy is 4 ms at HZ=250)."""

import argparse
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"RRDMA-BLKBENCH (.*)")
TARGETS = ["rrdma", "nvme", "rnbd"]


def parse(path):
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                rows.append(dict(kv.split("=", 1) for kv in m.group(1).split()))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="?")
    ap.add_argument("--rounds", default="?")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    print(f"rrdma-blk against nvme-rdma and RNBD, kernel {a.kernel}, {a.rounds} rounds "
          "(medians; cpu: serving guest's busy jiffies per 1000 I/Os)")
    for path in a.logs:
        prov = re.search(r"blkbench_(\w+)", path)
        prov = prov.group(1) if prov else path
        try:
            rows = parse(path)
        except OSError as e:
            print(f"\n{prov}: no log ({e})")
            continue
        by = defaultdict(lambda: defaultdict(list))
        for r in rows:
            by[r["job"]][r["target"]].append(r)
        print(f"\n{prov}")
        print(f"{'job':<14}" + "".join(f"{t + ' IOPS':>12}{t + ' cpu':>10}" for t in TARGETS)
              + f"{'/nvme':>8}{'/rnbd':>8}")
        for job, targets in by.items():
            med = {}
            cpu = {}
            for t in TARGETS:
                rs = targets.get(t, [])
                if rs:
                    med[t] = statistics.median(float(r["iops"]) for r in rs)
                    cpu[t] = statistics.median(
                        1000 * int(r["tcpu"]) / max(1.0, float(r["iops"]) * float(r["secs"]))
                        for r in rs)
            cells = "".join(
                f"{med.get(t, float('nan')):>12.0f}{cpu.get(t, float('nan')):>10.2f}" for t in TARGETS)
            ratio = lambda o: (f"{med['rrdma'] / med[o]:>8.2f}" if med.get("rrdma") and med.get(o)
                               else f"{'-':>8}")
            print(f"{job:<14}{cells}{ratio('nvme')}{ratio('rnbd')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
