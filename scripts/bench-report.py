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
--control` endpoint before and after; one-sided operations cost it none.
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

SIZES = [4096, 65536, 1048576]
BW_TESTS = ["write_bw", "read_bw"]
TARGET_BW_RATIO = 1.0
TARGET_LAT_RATIO = 1.15
TARGET_REGION_PCT = 0.2


def parse(paths):
    runs, extra = [], {}
    for p in paths:
        for line in Path(p).read_text(errors="replace").splitlines():
            if not line.startswith("RRDMA-BENCH "):
                continue
            try:
                rec = json.loads(line[len("RRDMA-BENCH "):])
            except json.JSONDecodeError:
                print(f"bench-report: unparsable line in {p}: {line[:120]}", file=sys.stderr)
                continue
            if rec["kind"] == "run":
                runs.append(rec)
            else:
                extra.setdefault(rec["provider"], {})[rec["kind"]] = rec["value"]
    return runs, extra


def num(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def bw_mbps(rec):
    """MB/s (10^6 bytes) from operations, bytes and seconds."""
    if rec["tool"] == "perftest":
        return rec["iterations"] * rec["size"] / rec["seconds"] / 1e6
    r = rec["result"][0]
    return r["iterations"] * r["bytes"] / r["seconds"] / 1e6


def lat(rec, key):
    if rec["tool"] == "perftest":
        return num(rec.get(key))
    l = rec["result"][0].get("latency_usec") or {}
    return num(l.get(key))


def ops(rec):
    return rec["iterations"] if rec["tool"] == "perftest" else rec["result"][0]["iterations"]


USER_HZ_USEC = 10000  # /proc/stat counts in USER_HZ (100) ticks


def busy_ticks(before, after):
    """Busy ticks between two /proc/stat "cpu" lines: user nice system idle
    iowait irq softirq steal (guest time is already inside user and nice);
    busy is all but idle and iowait."""
    try:
        a = [int(x) for x in before.split()[:8]]
        b = [int(x) for x in after.split()[:8]]
    except (AttributeError, ValueError):
        return None
    if len(a) < 8 or len(b) < 8:
        return None
    d = [y - x for x, y in zip(a, b)]
    return sum(d) - d[3] - d[4]


def cpu_usec_per_op(rec, side):
    """CPU microseconds per operation on `side` (client or server), from
    the guest's busy time sampled around the run (setup included, the same
    way for both tools)."""
    c = (rec.get("cpu") or {}).get(side)
    n = ops(rec)
    if not c or not n:
        return None
    t = busy_ticks(c[0], c[1])
    return None if t is None else t * USER_HZ_USEC / n


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def by_round(runs, prov, test, size, tool):
    return {r["round"]: r for r in runs
            if r["provider"] == prov and r["test"] == test and r["size"] == size
            and r["tool"] == tool}


def exporter_work(runs, prov):
    """Sum over rrdma's runs of the exporter's module callbacks during the
    timed interval (`exporter_work` of `rrdma bench --json`), and the
    remote operations of those runs."""
    done, work, n = 0, {}, 0
    for r in runs:
        if r["provider"] != prov or r["tool"] != "rrdma":
            continue
        w = r["result"][0].get("exporter_work")
        if w is None:
            continue
        n += 1
        done += ops(r)
        for k, v in w.items():
            work[k] = work.get(k, 0) + v
    if not n:
        return None
    total = sum(work.values())
    return {"runs": n, "operations": done, "callbacks": work, "callbacks_total": total,
            "per_operation": total / done if done else None}


def build(runs, extra, kernel, rounds):
    report = {"kernel": kernel, "rounds": rounds, "method": __doc__.strip(),
              "targets": {"bw_ratio_min": TARGET_BW_RATIO, "read_lat_p50_ratio_max": TARGET_LAT_RATIO,
                          "region_overhead_pct_max": TARGET_REGION_PCT},
              "providers": {}}
    for prov in sorted({r["provider"] for r in runs} | set(extra)):
        P = {"memcpy_mbps": (extra.get(prov, {}).get("memcpy") or {}).get("memcpy_mbps"),
             "memory": extra.get(prov, {}).get("memory"), "bandwidth": [], "latency": []}
        for test in BW_TESTS:
            for size in SIZES:
                a = by_round(runs, prov, test, size, "rrdma")
                b = by_round(runs, prov, test, size, "perftest")
                ratios = [bw_mbps(a[k]) / bw_mbps(b[k]) for k in a if k in b and bw_mbps(b[k]) > 0]
                row = {"test": test, "size": size,
                       "rrdma_mbps": spread([bw_mbps(r) for r in a.values()]),
                       "perftest_mbps": spread([bw_mbps(r) for r in b.values()]),
                       "ratio": spread(ratios)}
                row["target_met"] = bool(row["ratio"] and row["ratio"]["median"] >= TARGET_BW_RATIO)
                P["bandwidth"].append(row)
        for size in SIZES:
            a = by_round(runs, prov, "read_lat", size, "rrdma")
            b = by_round(runs, prov, "read_lat", size, "perftest")
            if not a and not b:
                continue
            ratios = [lat(a[k], "p50") / lat(b[k], "p50") for k in a
                      if k in b and lat(a[k], "p50") and lat(b[k], "p50")]
            row = {"test": "read_lat", "size": size,
                   "rrdma_p50_usec": spread([lat(r, "p50") for r in a.values()]),
                   "rrdma_p99_usec": spread([lat(r, "p99") for r in a.values()]),
                   "rrdma_p99_9_usec": spread([lat(r, "p99_9") for r in a.values()]),
                   "perftest_p50_usec": spread([lat(r, "p50") for r in b.values()]),
                   "perftest_p99_usec": spread([lat(r, "p99") for r in b.values()]),
                   "perftest_p99_9_usec": spread([lat(r, "p99_9") for r in b.values()]),
                   "perftest_usable": any(lat(r, "p50") for r in b.values()),
                   "ratio_p50": spread(ratios)}
            row["target_met"] = bool(row["ratio_p50"] and row["ratio_p50"]["median"] <= TARGET_LAT_RATIO)
            P["latency"].append(row)
        P["cpu"] = []
        for test in BW_TESTS + ["read_lat"]:
            for size in SIZES:
                a = by_round(runs, prov, test, size, "rrdma")
                b = by_round(runs, prov, test, size, "perftest")
                row = {"test": test, "size": size}
                for side in ("client", "server"):
                    ra = {k: cpu_usec_per_op(v, side) for k, v in a.items()}
                    rb = {k: cpu_usec_per_op(v, side) for k, v in b.items()}
                    row[f"rrdma_{side}_usec"] = spread(list(ra.values()))
                    row[f"perftest_{side}_usec"] = spread(list(rb.values()))
                    row[f"{side}_ratio"] = spread([ra[k] / rb[k] for k in ra
                                                   if k in rb and ra[k] is not None and rb[k]])
                if row["rrdma_client_usec"] or row["perftest_client_usec"]:
                    P["cpu"].append(row)
        P["exporter_work"] = exporter_work(runs, prov)
        mem = P["memory"] or {}
        P["memory_target_met"] = mem.get("region_overhead_pct") is not None and \
            mem["region_overhead_pct"] <= TARGET_REGION_PCT
        report["providers"][prov] = P
    return report


def fmt(s, scale=1.0, digits=1):
    if not s:
        return "-"
    return f"{s['median'] * scale:.{digits}f}"


def fmt_range(s, digits=2):
    if not s:
        return "-"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}..{s['max']:.{digits}f}]"


def print_table(report):
    for prov, P in report["providers"].items():
        print(f"\n== {prov} (kernel {report['kernel']}, {report['rounds']} rounds; "
              f"guest memcpy {P['memcpy_mbps'] or 0:.0f} MB/s) ==")
        print(f"{'test':<9} {'size':>8} {'rrdma MB/s':>11} {'perftest MB/s':>14} "
              f"{'ratio median [min..max]':>26} target>=1.0")
        for r in P["bandwidth"]:
            print(f"{r['test']:<9} {r['size']:>8} {fmt(r['rrdma_mbps']):>11} "
                  f"{fmt(r['perftest_mbps']):>14} {fmt_range(r['ratio']):>26} "
                  f"{'met' if r['target_met'] else 'NOT met'}")
        for r in P["latency"]:
            pt = fmt(r["perftest_p50_usec"]) if r["perftest_usable"] else "unusable"
            print(f"{'read_lat':<9} {r['size']:>8} p50 {fmt(r['rrdma_p50_usec']):>7} us "
                  f"perftest p50 {pt:>9} us  ratio {fmt_range(r['ratio_p50'])}  "
                  f"target<=1.15 {'met' if r['target_met'] else 'NOT met'}")
            print(f"{'':<9} {'':>8} p99 {fmt(r['rrdma_p99_usec']):>7} us "
                  f"perftest p99 {fmt(r['perftest_p99_usec']):>9} us; p99.9 "
                  f"{fmt(r['rrdma_p99_9_usec'])} us perftest {fmt(r['perftest_p99_9_usec'])} us")
        if P.get("cpu"):
            print("CPU us per operation (guest busy time over the run / operations; "
                  "client = initiator, server = exporter), ratio rrdma/perftest median [min..max]")
            print(f"{'test':<9} {'size':>8} {'rrdma cli':>10} {'perf cli':>10} {'ratio':>20} "
                  f"{'rrdma srv':>10} {'perf srv':>10} {'ratio':>20}")
            for r in P["cpu"]:
                print(f"{r['test']:<9} {r['size']:>8} {fmt(r['rrdma_client_usec']):>10} "
                      f"{fmt(r['perftest_client_usec']):>10} {fmt_range(r['client_ratio']):>20} "
                      f"{fmt(r['rrdma_server_usec']):>10} {fmt(r['perftest_server_usec']):>10} "
                      f"{fmt_range(r['server_ratio']):>20}")
        m = P["memory"] or {}
        if m:
            print(f"memory: region of {m['region_mib']} MiB costs {m['region_overhead_kib']} KiB "
                  f"of kernel memory ({m['region_overhead_pct']:.3f}%, target <= 0.2%: "
                  f"{'met' if P['memory_target_met'] else 'NOT met'}); "
                  f"{m['per_connection_kib']:.1f} KiB per connection (rrdma + provider)")
        w = P.get("exporter_work")
        if w:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(w["callbacks"].items()))
            print(f"exporter: {w['callbacks_total']} module callbacks during {w['operations']} remote "
                  f"operations in {w['runs']} timed runs ({kinds}): "
                  f"{w['per_operation'] or 0:.6f} per operation (expected 0)")


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    provs = list(report["providers"])
    fig, axes = plt.subplots(len(provs), 2, figsize=(12, 4.5 * len(provs)), squeeze=False)
    for i, prov in enumerate(provs):
        P = report["providers"][prov]
        ax = axes[i][0]
        for test, style in (("write_bw", "-"), ("read_bw", "--")):
            for tool, key, color in (("rrdma", "rrdma_mbps", "tab:blue"),
                                     ("perftest", "perftest_mbps", "tab:orange")):
                rows = [r for r in P["bandwidth"] if r["test"] == test and r[key]]
                if rows:
                    ax.errorbar([r["size"] for r in rows], [r[key]["median"] for r in rows],
                                yerr=[[r[key]["median"] - r[key]["min"] for r in rows],
                                      [r[key]["max"] - r[key]["median"] for r in rows]],
                                fmt="o" + style, color=color, capsize=3, label=f"{tool} {test}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per operation")
        ax.set_ylabel("MB/s (median, min..max)")
        ax.set_title(f"{prov}: bandwidth (memcpy ceiling {P['memcpy_mbps'] or 0:.0f} MB/s)")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        ax = axes[i][1]
        for tool, key, color in (("rrdma", "rrdma_p50_usec", "tab:blue"),
                                 ("perftest", "perftest_p50_usec", "tab:orange")):
            rows = [r for r in P["latency"] if r[key]]
            if rows:
                ax.errorbar([r["size"] for r in rows], [r[key]["median"] for r in rows],
                            yerr=[[r[key]["median"] - r[key]["min"] for r in rows],
                                  [r[key]["max"] - r[key]["median"] for r in rows]],
                            fmt="o-", color=color, capsize=3, label=f"{tool} READ p50")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes per operation")
        ax.set_ylabel("usec (p50: median, min..max over rounds)")
        ax.set_title(f"{prov}: synchronous READ latency")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"rrdma vs perftest, kernel {report['kernel']}, TCG guests, "
                 f"{report['rounds']} alternating rounds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


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
    report = build(runs, extra, args.kernel, args.rounds)
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
