#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The tables of `make blkbench`: for each provider and fio job, the
median over the rounds of each target's IOPS (MB/s for the 1 MiB jobs)
with rrdma's ratio to nvme-rdma and to RNBD, and the lowest and highest of
those ratios taken round by round (within a round each job runs on every
target in turn, so a round's ratio pairs runs seconds apart); each
target's completion
latency percentiles (p50, p99, p99.9, microseconds); and what 1000 I/Os
cost the serving and the using guest's CPU (busy jiffies during the job;
one jiffy is 4 ms at HZ=250)."""

import argparse
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"RRDMA-BLKBENCH (.*)")
TARGETS = ["rrdma", "nvme", "rnbd"]
NAN = float("nan")


def parse(path):
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                rows.append(dict(kv.split("=", 1) for kv in m.group(1).split()))
    return rows


def median(rows, f):
    """The median of f over rows, NaN if there is none (or a field is
    missing or empty)."""
    try:
        vals = [f(r) for r in rows]
    except (KeyError, ValueError):
        return NAN
    return statistics.median(vals) if vals else NAN


def per_kilo_io(r, key):
    return 1000 * int(r[key]) / max(1.0, float(r["iops"]) * float(r["secs"]))


def spread(targets, other, val):
    """The lowest and highest of rrdma's ratio to other, round by round,
    over the rounds that measured both ("-" if none did)."""
    def by_round(t):
        out = {}
        for r in targets.get(t, []):
            try:
                out[r["round"]] = val(r)
            except (KeyError, ValueError):
                pass
        return out
    mine, theirs = by_round("rrdma"), by_round(other)
    ratios = [mine[k] / theirs[k] for k in mine if theirs.get(k, 0) > 0]
    return f"{min(ratios):.2f}..{max(ratios):.2f}" if ratios else "-"


def tables(prov, rows):
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r["job"]][r["target"]].append(r)
    print(f"\n{prov}: IOPS (MB/s for 1 MiB jobs), rrdma's ratios, and their range over rounds")
    print(f"{'job':<18}" + "".join(f"{t:>10}" for t in TARGETS) + f"{'/nvme':>8}{'/rnbd':>8}"
          + f"{'/nvme rounds':>14}{'/rnbd rounds':>14}")
    for job, targets in by.items():
        mbs = job.endswith("-1m")
        val = (lambda r: float(r["kbs"]) / 1024) if mbs else (lambda r: float(r["iops"]))
        med = {t: median(targets.get(t, []), val) for t in TARGETS}

        def ratio(o):
            a, b = med["rrdma"], med[o]
            return f"{a / b:>8.2f}" if a == a and b == b and b > 0 else f"{'-':>8}"

        cells = "".join(f"{'-':>10}" if med[t] != med[t] else f"{med[t]:>10.1f}" if mbs
                        else f"{med[t]:>10.0f}" for t in TARGETS)
        print(f"{job:<18}{cells}{ratio('nvme')}{ratio('rnbd')}"
              f"{spread(targets, 'nvme', val):>14}{spread(targets, 'rnbd', val):>14}")
    def table(title, width, cell):
        """One row per job, one cell per target: cell(that target's runs)."""
        print(f"\n{prov}: {title}")
        print(f"{'job':<18}" + "".join(f"{t:>{width}}" for t in TARGETS))
        for job, targets in by.items():
            cells = "".join(f"{cell(targets.get(t, [])):>{width}}" for t in TARGETS)
            print(f"{job:<18}{cells}")

    def latency(rs):
        p = [median(rs, lambda r, k=k: float(r[k])) for k in ("p50", "p99", "p999")]
        return " / ".join("-" if v != v else f"{v:.0f}" for v in p)

    def cpu(rs):
        s = median(rs, lambda r: per_kilo_io(r, "tcpu"))
        c = median(rs, lambda r: per_kilo_io(r, "ccpu"))
        return "-" if s != s else f"{s:.1f} / {c:.1f}"

    table("completion latency p50 / p99 / p99.9, microseconds", 29, latency)
    table("CPU per 1000 I/Os, busy jiffies, serving / using guest", 16, cpu)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="?")
    ap.add_argument("--rounds", default="?")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    print(f"rrdma-blk against nvme-rdma and RNBD, kernel {a.kernel}, {a.rounds} rounds (medians)")
    for path in a.logs:
        prov = re.search(r"blkbench_(\w+)", path)
        prov = prov.group(1) if prov else path
        try:
            rows = parse(path)
        except OSError as e:
            print(f"\n{prov}: no log ({e})")
            continue
        tables(prov, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
