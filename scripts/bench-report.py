#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the `RRDMA-BENCH {json}` lines of `make bench` into a ratio table,
a JSON report and a PNG plot.

Bandwidth of both tools is computed the same way: operations completed
times bytes per operation, over the run's duration on the guest's clock
(perftest with -D stops on alarm(2); rrdma bench times itself with
CLOCK_MONOTONIC).  Latency: each tool's own per-operation figures (rrdma:
CLOCK_MONOTONIC around each synchronous call; perftest: its cycle counter,
usable once the guest's TSC is calibrated); a perftest latency that is not
a finite number is reported as unusable rather than compared.  Exporter
work: the growth of the exporter's `rrdma-work-*` fdinfo counts (module
callbacks) over each rrdma run's timed interval, asked of its `serve
--control` endpoint before and after; one-sided operations cost it none
(keepalive adds one pong received per interval of the exporter's keepalive,
15 s in the guests, and nothing per operation).
Message rate: WRITE operations completed per second at 512 B and 4 KiB, at
depths 1, 16 and 128, computed like bandwidth.  Floor: ICMP (busybox ping,
average) and UDP ping-pong (p50) round trips of the same topology, measured
once per run.  CPU: with two guests, each guest's busy time (/proc/stat)
over the run, divided by operations; with one guest (`local`), the one
guest's, both sides together.  Every figure is reported per topology
(`pair`: two guests of 2 vCPUs; `pair-1cpu`: two guests of 1 vCPU;
`local-netns` / `local-loopback`: one guest).
"""

# The figures, the table and the plot are built by the benchreport package
# beside this script.

import argparse
import json
import sys
from pathlib import Path

from benchreport.build import build
from benchreport.logs import parse
from benchreport.plot import plot
from benchreport.table import print_table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("logs", nargs="+")
    args = ap.parse_args()
    runs, extra = parse(args.logs)
    if not runs:
        sys.exit("bench-report: no measurements found")
    report = build(runs, extra, args.kernel, args.rounds, __doc__.strip())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    try:
        plot(report, out / "plot.png")
        print(f"\nplot: {(out / 'plot.png').resolve()}")
    except ImportError as e:
        print(f"\nplot: not drawn ({e}; scripts/setup.sh installs python3-matplotlib)")
    print(f"report: {(out / 'report.json').resolve()}")


if __name__ == "__main__":
    main()
