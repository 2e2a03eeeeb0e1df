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

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

SIZES = [4096, 65536, 1048576]
BW_TESTS = ["write_bw", "read_bw"]
BW_DEPTH = 16
RATE_SIZES = [512, 4096]
RATE_DEPTHS = [1, 16, 128]
QUEUE_SIZES = [4096, 65536]
QUEUES = [1, 2]
LAT_KEYS = [("p50", "p50"), ("p99", "p99"), ("p99_9", "p99.9")]
TARGET_BW_RATIO = 1.0
TARGET_LAT_RATIO = 1.15
TARGET_REGION_PCT = 0.2


def setup_of(rec):
    """(topology, provider) of a record; runs from before topologies
    existed were two guests of 2 vCPUs."""
    return (rec.get("topology", "pair"), rec["provider"])


def parse(paths):
    runs, extra = [], {}
    for p in paths:
        if not Path(p).exists():
            print(f"bench-report: {p} is missing (that run failed early)", file=sys.stderr)
            continue
        for line in Path(p).read_text(errors="replace").splitlines():
            if not line.startswith("RRDMA-BENCH "):
                continue
            try:
                rec = json.loads(line[len("RRDMA-BENCH "):])
            except json.JSONDecodeError:
                print(f"bench-report: unparsable line in {p}: {line[:120]}", file=sys.stderr)
                continue
            rec.setdefault("topology", "pair")
            if rec["kind"] == "run":
                runs.append(rec)
            elif rec["kind"] == "floor":
                extra.setdefault(setup_of(rec), {}).setdefault("floor", []).append(rec)
            else:
                extra.setdefault(setup_of(rec), {})[rec["kind"]] = rec["value"]
    return runs, extra


def num(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def bw_mbps(rec):
    """MB/s (10^6 bytes) from operations, bytes and seconds."""
    return kops(rec) * rec["size"] / 1e3


def kops(rec):
    """Thousands of operations per second."""
    if rec["tool"] == "perftest":
        return rec["iterations"] / rec["seconds"] / 1e3
    r = rec["result"][0]
    return r["iterations"] / r["seconds"] / 1e3


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
    """CPU microseconds per operation on `side` (client, server, or guest
    with one guest), from the guest's busy time sampled around the run
    (setup included, the same way for both tools)."""
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


def by_round(runs, test, size, tool, depth=None, queues=1):
    return {r["round"]: r for r in runs
            if r["test"] == test and r["size"] == size and r["tool"] == tool
            and (depth is None or r.get("depth", BW_DEPTH) == depth)
            and r.get("queues", 1) == queues}


def ratio_row(a, b, f):
    """Per-round ratios f(rrdma) / f(perftest) of rounds both tools ran."""
    out = []
    for k in a:
        if k in b:
            x, y = f(a[k]), f(b[k])
            if x is not None and y:
                out.append(x / y)
    return spread(out)


def exporter_work(runs):
    """Sum over rrdma's runs of the exporter's module callbacks during the
    timed interval (`exporter_work` of `rrdma bench --json`), and the
    remote operations of those runs."""
    done, work, n = 0, {}, 0
    for r in runs:
        if r["tool"] != "rrdma":
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


def floor_rows(extra):
    """ICMP and UDP round trips by size, with the READ latencies' ratio to
    the UDP round trip of the same size."""
    rows = {}
    for f in extra.get("floor", []):
        rows.setdefault(f["size"], {})[f["test"]] = f["usec"]
    return [{"size": k, **v} for k, v in sorted(rows.items())]


def build_setup(runs, extra):
    P = {"memcpy_mbps": (extra.get("memcpy") or {}).get("memcpy_mbps"),
         "memory": extra.get("memory"), "note": extra.get("note"),
         "perftest_failed_attempts": extra.get("perftest_failed_attempts"),
         "floor": floor_rows(extra), "bandwidth": [], "latency": [], "rate": [], "cpu": []}
    for test in BW_TESTS:
        for size in SIZES:
            a = by_round(runs, test, size, "rrdma", BW_DEPTH)
            b = by_round(runs, test, size, "perftest", BW_DEPTH)
            row = {"test": test, "size": size, "depth": BW_DEPTH,
                   "rrdma_mbps": spread([bw_mbps(r) for r in a.values()]),
                   "perftest_mbps": spread([bw_mbps(r) for r in b.values()]),
                   "ratio": ratio_row(a, b, bw_mbps)}
            row["target_met"] = bool(row["ratio"] and row["ratio"]["median"] >= TARGET_BW_RATIO)
            P["bandwidth"].append(row)
    for size in RATE_SIZES:
        for depth in RATE_DEPTHS:
            a = by_round(runs, "rate", size, "rrdma", depth)
            b = by_round(runs, "rate", size, "perftest", depth)
            u = by_round(runs, "rate", size, "rrdma-uring", depth)
            ip = by_round(runs, "rate", size, "rrdma-iopoll", depth)
            if a or b:
                P["rate"].append({"test": "rate", "size": size, "depth": depth,
                                  "rrdma_kops": spread([kops(r) for r in a.values()]),
                                  "perftest_kops": spread([kops(r) for r in b.values()]),
                                  "ratio": ratio_row(a, b, kops),
                                  "uring_kops": spread([kops(r) for r in u.values()]),
                                  "uring_ratio": ratio_row(u, b, kops),
                                  "uring_over_ioctl": ratio_row(u, a, kops),
                                  "iopoll_kops": spread([kops(r) for r in ip.values()]),
                                  "iopoll_ratio": ratio_row(ip, b, kops),
                                  "iopoll_over_ioctl": ratio_row(ip, a, kops)})
    P["queues"] = []
    for size in QUEUE_SIZES:
        one = {t: by_round(runs, "write_q", size, t, BW_DEPTH) for t in ("rrdma", "perftest")}
        for q in QUEUES:
            a = by_round(runs, "write_q", size, "rrdma", BW_DEPTH, q)
            b = by_round(runs, "write_q", size, "perftest", BW_DEPTH, q)
            lanes = by_round(runs, "write_q", size, "rrdma-lanes", BW_DEPTH, q)
            one_qp = by_round(runs, "write_q", size, "rrdma-1qp", BW_DEPTH, q)
            if a or b:
                P["queues"].append({"test": "write_q", "size": size, "depth": BW_DEPTH,
                                    "queues": q,
                                    "rrdma_mbps": spread([bw_mbps(r) for r in a.values()]),
                                    "perftest_mbps": spread([bw_mbps(r) for r in b.values()]),
                                    "ratio": ratio_row(a, b, bw_mbps),
                                    "rrdma_over_q1": ratio_row(a, one["rrdma"], bw_mbps),
                                    "perftest_over_q1": ratio_row(b, one["perftest"], bw_mbps),
                                    # q threads on one connection (io_uring):
                                    # with its data lanes, and with one queue
                                    # pair (queue_pairs=1).
                                    "lanes_mbps": spread([bw_mbps(r) for r in lanes.values()]),
                                    "one_qp_mbps": spread([bw_mbps(r) for r in one_qp.values()]),
                                    "lanes_over_one_qp": ratio_row(lanes, one_qp, bw_mbps)})
    udp = {f["size"]: f.get("udp") for f in P["floor"]}
    for size in SIZES:
        a = by_round(runs, "read_lat", size, "rrdma")
        b = by_round(runs, "read_lat", size, "perftest")
        ip = by_round(runs, "read_lat", size, "rrdma-iopoll")
        if not a and not b:
            continue
        row = {"test": "read_lat", "size": size,
               "perftest_usable": any(lat(r, "p50") for r in b.values())}
        for key, _ in LAT_KEYS:
            row[f"rrdma_{key}_usec"] = spread([lat(r, key) for r in a.values()])
            row[f"perftest_{key}_usec"] = spread([lat(r, key) for r in b.values()])
            row[f"ratio_{key}"] = ratio_row(a, b, lambda r, k=key: lat(r, k))
            row[f"iopoll_{key}_usec"] = spread([lat(r, key) for r in ip.values()])
            row[f"iopoll_ratio_{key}"] = ratio_row(ip, b, lambda r, k=key: lat(r, k))
        if udp.get(size):
            for tool in ("rrdma", "perftest"):
                p50 = row[f"{tool}_p50_usec"]
                row[f"{tool}_p50_over_udp"] = p50["median"] / udp[size] if p50 else None
        row["target_met"] = bool(row["ratio_p50"] and row["ratio_p50"]["median"] <= TARGET_LAT_RATIO)
        P["latency"].append(row)
    sides = ("guest",) if any("guest" in (r.get("cpu") or {}) for r in runs) else ("client", "server")
    P["cpu_sides"] = list(sides)
    for test, size, depth in cpu_keys():
        a = by_round(runs, test, size, "rrdma", depth)
        b = by_round(runs, test, size, "perftest", depth)
        row = {"test": test, "size": size, "depth": depth or 1}
        for side in sides:
            ra = {k: cpu_usec_per_op(v, side) for k, v in a.items()}
            rb = {k: cpu_usec_per_op(v, side) for k, v in b.items()}
            row[f"rrdma_{side}_usec"] = spread(list(ra.values()))
            row[f"perftest_{side}_usec"] = spread(list(rb.values()))
            row[f"{side}_ratio"] = spread([ra[k] / rb[k] for k in ra
                                           if k in rb and ra[k] is not None and rb[k]])
        u = by_round(runs, test, size, "rrdma-uring", depth) if test == "rate" else {}
        for tool, rs in (("rrdma", a), ("uring", u)):
            # Writes per iWARP fence (none on rxe).
            per = [ops(r) / r["result"][0]["write_fences"] for r in rs.values()
                   if r["result"][0].get("write_fences")]
            row[f"{tool}_writes_per_fence"] = spread(per)
            # Operations per completion call of the initiator's module
            # (one per poll of a send CQ).
            per = [ops(r) / r["result"][0]["completion_callbacks"] for r in rs.values()
                   if r["result"][0].get("completion_callbacks")]
            row[f"{tool}_ops_per_callback"] = spread(per)
        if u:
            for side in sides:
                ru = {k: cpu_usec_per_op(v, side) for k, v in u.items()}
                ra = {k: cpu_usec_per_op(v, side) for k, v in a.items()}
                row[f"uring_{side}_usec"] = spread(list(ru.values()))
                row[f"uring_over_ioctl_{side}"] = spread(
                    [ru[k] / ra[k] for k in ru if k in ra and ru[k] is not None and ra[k]])
        if row[f"rrdma_{sides[0]}_usec"] or row[f"perftest_{sides[0]}_usec"]:
            P["cpu"].append(row)
    P["exporter_work"] = exporter_work(runs)
    mem = P["memory"] or {}
    P["memory_target_met"] = mem.get("region_overhead_pct") is not None and \
        mem["region_overhead_pct"] <= TARGET_REGION_PCT
    return P


def cpu_keys():
    keys = [(t, s, BW_DEPTH) for t in BW_TESTS for s in SIZES]
    keys += [("read_lat", s, None) for s in SIZES]
    keys += [("rate", s, d) for s in RATE_SIZES for d in RATE_DEPTHS]
    return keys


def build(runs, extra, kernel, rounds):
    report = {"kernel": kernel, "rounds": rounds, "method": __doc__.strip(),
              "targets": {"bw_ratio_min": TARGET_BW_RATIO, "read_lat_p50_ratio_max": TARGET_LAT_RATIO,
                          "region_overhead_pct_max": TARGET_REGION_PCT},
              "setups": []}
    for topo, prov in sorted({setup_of(r) for r in runs} | set(extra),
                             key=lambda k: (TOPO_ORDER.get(k[0], 9), k[0], k[1])):
        mine = [r for r in runs if setup_of(r) == (topo, prov)]
        P = build_setup(mine, extra.get((topo, prov), {}))
        report["setups"].append({"topology": topo, "provider": prov, **P})
    return report


TOPO_ORDER = {"pair": 0, "pair-1cpu": 1, "local-netns": 2, "local-loopback": 3}


def fmt(s, scale=1.0, digits=1):
    if not s:
        return "-"
    return f"{s['median'] * scale:.{digits}f}"


def fmt_range(s, digits=2):
    if not s:
        return "-"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}..{s['max']:.{digits}f}]"


def setup_name(S):
    return f"{S['provider']} {S['topology']}"


def print_setup(report, S):
    print(f"\n== {setup_name(S)} (kernel {report['kernel']}, {report['rounds']} rounds; "
          f"guest memcpy {S['memcpy_mbps'] or 0:.0f} MB/s) ==")
    if S.get("note"):
        print(f"note: {S['note']}")
    if S.get("perftest_failed_attempts"):
        print(f"perftest: {S['perftest_failed_attempts']} failed attempt(s), each retried "
              "with a fresh server")
    if S["floor"]:
        print("round trips of this topology, us: " + "; ".join(
            f"{f['size']} B ICMP {f.get('icmp_avg', '-')} UDP {f.get('udp', '-')}"
            for f in S["floor"]))
    print(f"{'test':<9} {'size':>8} {'rrdma MB/s':>11} {'perftest MB/s':>14} "
          f"{'ratio median [min..max]':>26} target>=1.0")
    for r in S["bandwidth"]:
        print(f"{r['test']:<9} {r['size']:>8} {fmt(r['rrdma_mbps']):>11} "
              f"{fmt(r['perftest_mbps']):>14} {fmt_range(r['ratio']):>26} "
              f"{'met' if r['target_met'] else 'NOT met'}")
    if S["rate"]:
        print(f"{'rate':<9} {'size':>8} {'depth':>5} {'rrdma kop/s':>12} {'perftest kop/s':>15} "
              f"{'ratio median [min..max]':>26} {'io_uring kop/s':>15} "
              f"{'/perftest':>20} {'/ioctl':>20} {'IOPOLL kop/s':>13} {'/perftest':>20} "
              f"{'/ioctl':>20}")
        for r in S["rate"]:
            print(f"{'write':<9} {r['size']:>8} {r['depth']:>5} {fmt(r['rrdma_kops'], digits=2):>12} "
                  f"{fmt(r['perftest_kops'], digits=2):>15} {fmt_range(r['ratio']):>26} "
                  f"{fmt(r.get('uring_kops'), digits=2):>15} "
                  f"{fmt_range(r.get('uring_ratio')):>20} "
                  f"{fmt_range(r.get('uring_over_ioctl')):>20} "
                  f"{fmt(r.get('iopoll_kops'), digits=2):>13} "
                  f"{fmt_range(r.get('iopoll_ratio')):>20} "
                  f"{fmt_range(r.get('iopoll_over_ioctl')):>20}")
    if S.get("queues"):
        print(f"{'queues':<9} {'size':>8} {'q':>2} {'rrdma MB/s':>11} {'perftest MB/s':>14} "
              f"{'ratio median [min..max]':>26} {'rrdma /q1':>20} {'perftest /q1':>20}")
        for r in S["queues"]:
            print(f"{'write':<9} {r['size']:>8} {r['queues']:>2} {fmt(r['rrdma_mbps']):>11} "
                  f"{fmt(r['perftest_mbps']):>14} {fmt_range(r['ratio']):>26} "
                  f"{fmt_range(r['rrdma_over_q1']):>20} {fmt_range(r['perftest_over_q1']):>20}")
        for r in S["queues"]:
            if r.get("lanes_mbps") or r.get("one_qp_mbps"):
                print(f"{'threads':<9} {r['size']:>8} {r['queues']:>2} one connection (io_uring): "
                      f"lanes {fmt(r.get('lanes_mbps'))} MB/s, 1 queue pair "
                      f"{fmt(r.get('one_qp_mbps'))} MB/s, lanes / 1 qp "
                      f"{fmt_range(r.get('lanes_over_one_qp'))}")
    for r in S["latency"]:
        pt = fmt(r["perftest_p50_usec"]) if r["perftest_usable"] else "unusable"
        udp = ""
        if r.get("rrdma_p50_over_udp"):
            udp = (f"; p50 / UDP round trip: rrdma {r['rrdma_p50_over_udp']:.2f}, "
                   f"perftest {(r.get('perftest_p50_over_udp') or 0):.2f}")
        print(f"{'read_lat':<9} {r['size']:>8} p50 {fmt(r['rrdma_p50_usec']):>7} us "
              f"perftest {pt:>9} us  ratio {fmt_range(r['ratio_p50'])}  "
              f"target<=1.15 {'met' if r['target_met'] else 'NOT met'}{udp}")
        for key, name in LAT_KEYS[1:]:
            print(f"{'':<9} {'':>8} {name:<5} {fmt(r[f'rrdma_{key}_usec']):>7} us "
                  f"perftest {fmt(r[f'perftest_{key}_usec']):>9} us  ratio {fmt_range(r[f'ratio_{key}'])}")
        if r.get("iopoll_p50_usec"):
            print(f"{'':<9} {'':>8} IOPOLL io_uring: " + "; ".join(
                f"{name} {fmt(r[f'iopoll_{key}_usec'])} us, ratio "
                f"{fmt_range(r[f'iopoll_ratio_{key}'])}" for key, name in LAT_KEYS))
    if S["cpu"]:
        sides = S["cpu_sides"]
        what = ("the one guest's busy time (both sides)" if sides == ["guest"] else
                "each guest's busy time; client = initiator, server = exporter")
        print(f"CPU us per operation ({what}), ratio rrdma/perftest median [min..max]")
        print(f"{'test':<9} {'size':>8} {'depth':>5}" + "".join(
            f" {'rrdma ' + sd[:3]:>10} {'perf ' + sd[:3]:>10} {'ratio':>20}" for sd in sides))
        for r in S["cpu"]:
            print(f"{r['test']:<9} {r['size']:>8} {r['depth']:>5}" + "".join(
                f" {fmt(r[f'rrdma_{sd}_usec']):>10} {fmt(r[f'perftest_{sd}_usec']):>10} "
                f"{fmt_range(r[f'{sd}_ratio']):>20}" for sd in sides))
    urows = [r for r in S["cpu"] if r.get(f"uring_{S['cpu_sides'][0]}_usec")]
    if urows:
        sides = S["cpu_sides"]
        print("io_uring: CPU us per WRITE and its ratio to the ioctl path's, median [min..max]; "
              "writes per iWARP fence and operations per completion call, ioctl and io_uring")
        print(f"{'test':<9} {'size':>8} {'depth':>5}" + "".join(
            f" {'uring ' + sd[:3]:>10} {'/ioctl':>20}" for sd in sides)
            + f" {'w/fence ioctl':>14} {'w/fence uring':>14}"
            + f" {'op/call ioctl':>14} {'op/call uring':>14}")
        for r in urows:
            print(f"{r['test']:<9} {r['size']:>8} {r['depth']:>5}" + "".join(
                f" {fmt(r[f'uring_{sd}_usec']):>10} {fmt_range(r[f'uring_over_ioctl_{sd}']):>20}"
                for sd in sides)
                + f" {fmt(r.get('rrdma_writes_per_fence')):>14}"
                f" {fmt(r.get('uring_writes_per_fence')):>14}"
                f" {fmt(r.get('rrdma_ops_per_callback')):>14}"
                f" {fmt(r.get('uring_ops_per_callback')):>14}")
    m = S["memory"] or {}
    if m:
        print(f"memory: region of {m['region_mib']} MiB costs {m['region_overhead_kib']} KiB "
              f"of kernel memory ({m['region_overhead_pct']:.3f}%, target <= 0.2%: "
              f"{'met' if S['memory_target_met'] else 'NOT met'}); "
              f"{m['per_connection_kib']:.1f} KiB per connection (rrdma + provider)")
    w = S.get("exporter_work")
    if w:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(w["callbacks"].items()))
        print(f"exporter: {w['callbacks_total']} module callbacks during {w['operations']} remote "
              f"operations in {w['runs']} timed runs ({kinds}): "
              f"{w['per_operation'] or 0:.6f} per operation (expected 0 but keepalive's pongs, "
              f"one per interval)")


def find(rows, **match):
    """The first row whose fields equal `match`, or None."""
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def ratio_rows():
    """(label, section, match, ratio key) of every ratio a setup reports;
    a ratio key of None is CPU per operation on the initiator's side."""
    for t in BW_TESTS:
        for s in SIZES:
            yield f"{t} {s}", "bandwidth", {"test": t, "size": s}, "ratio"
    for s in RATE_SIZES:
        for d in RATE_DEPTHS:
            yield f"rate {s} d{d}", "rate", {"size": s, "depth": d}, "ratio"
            yield f"rate {s} d{d} io_uring", "rate", {"size": s, "depth": d}, "uring_ratio"
            yield (f"rate {s} d{d} io_uring/ioctl", "rate", {"size": s, "depth": d},
                   "uring_over_ioctl")
            yield f"rate {s} d{d} IOPOLL", "rate", {"size": s, "depth": d}, "iopoll_ratio"
            yield (f"rate {s} d{d} IOPOLL/ioctl", "rate", {"size": s, "depth": d},
                   "iopoll_over_ioctl")
    for s in QUEUE_SIZES:
        for q in QUEUES:
            m = {"size": s, "queues": q}
            yield f"write_q {s} q{q}", "queues", m, "ratio"
            if q > 1:
                yield f"write_q {s} q{q}/q1 rrdma", "queues", m, "rrdma_over_q1"
                yield f"write_q {s} q{q}/q1 perftest", "queues", m, "perftest_over_q1"
                yield f"write_q {s} {q} threads, lanes/1 qp", "queues", m, "lanes_over_one_qp"
    for s in SIZES:
        for key, name in LAT_KEYS:
            yield f"read_lat {s} {name}", "latency", {"size": s}, f"ratio_{key}"
            yield f"read_lat {s} {name} IOPOLL", "latency", {"size": s}, f"iopoll_ratio_{key}"
    for t, s, d in cpu_keys():
        yield f"cpu {t} {s} d{d or 1}", "cpu", {"test": t, "size": s, "depth": d or 1}, None


def ratio_table(report):
    """Every rrdma/perftest ratio, one line per figure and setup."""
    print("\n== rrdma/perftest ratios: median [min..max] over alternated rounds ==")
    setups = report["setups"]
    print(f"{'figure':<26}" + "".join(f" {setup_name(S):>22}" for S in setups))
    for label, section, match, key in ratio_rows():
        cells = []
        for S in setups:
            row = find(S[section], **match) or {}
            cells.append(row.get(key or f"{S['cpu_sides'][0]}_ratio"))
        print(f"{label:<26}" + "".join(f" {fmt_range(c):>22}" for c in cells))
    print("(cpu: the initiator's guest with two guests, the one guest with one)")


def print_table(report):
    for S in report["setups"]:
        print_setup(report, S)
    ratio_table(report)


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setups = report["setups"]
    fig, axes = plt.subplots(len(setups), 3, figsize=(17, 4.2 * len(setups)), squeeze=False)

    def series(ax, rows, x, key, style, label):
        """rrdma's and perftest's medians (min..max bars) of `key`."""
        for tool, color in (("rrdma", "tab:blue"), ("perftest", "tab:orange")):
            k = key.format(tool=tool)
            mine = [r for r in rows if r[k]]
            if mine:
                ax.errorbar([x(r) for r in mine], [r[k]["median"] for r in mine],
                            yerr=[[r[k]["median"] - r[k]["min"] for r in mine],
                                  [r[k]["max"] - r[k]["median"] for r in mine]],
                            fmt="o" + style, color=color, capsize=3,
                            label=label.format(tool=tool))

    def frame(ax, xlabel, ylabel, title):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)

    for i, S in enumerate(setups):
        name = setup_name(S)
        ax = axes[i][0]
        for test, style in (("write_bw", "-"), ("read_bw", "--")):
            series(ax, [r for r in S["bandwidth"] if r["test"] == test], lambda r: r["size"],
                   "{tool}_mbps", style, "{tool} " + test)
        frame(ax, "bytes per operation", "MB/s (median, min..max)",
              f"{name}: bandwidth, depth {BW_DEPTH}")
        ax = axes[i][1]
        for size, style in zip(RATE_SIZES, ("-", "--")):
            series(ax, [r for r in S["rate"] if r["size"] == size], lambda r: r["depth"],
                   "{tool}_kops", style, f"{{tool}} WRITE {size} B")
        frame(ax, "operations in flight", "k operations/s", f"{name}: message rate")
        ax = axes[i][2]
        for key, style in (("p50", "-"), ("p99", ":")):
            series(ax, S["latency"], lambda r: r["size"], "{tool}_" + key + "_usec", style,
                   "{tool} READ " + key)
        udp = [f for f in S["floor"] if f.get("udp")]
        if udp:
            ax.plot([f["size"] for f in udp], [f["udp"] for f in udp], "x:", color="gray",
                    label="UDP round trip p50")
        ax.set_yscale("log")
        frame(ax, "bytes per operation", "usec (median, min..max over rounds)",
              f"{name}: synchronous READ latency")
    fig.suptitle(f"rrdma vs perftest, kernel {report['kernel']}, TCG guests, "
                 f"{report['rounds']} alternating rounds")
    # Leave the top for the title above the first row's titles.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))
    fig.savefig(path, dpi=80)


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
