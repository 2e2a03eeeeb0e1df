# SPDX-License-Identifier: GPL-2.0
"""One record's figures (bandwidth, operations, latency, CPU per
operation), and their spread over the rounds of a measurement."""

import math
import statistics

from .schedule import BW_DEPTH


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
