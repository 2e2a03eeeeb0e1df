# SPDX-License-Identifier: GPL-2.0
"""The report: every figure of every setup (topology and provider), with
the rrdma/perftest ratios and whether they meet their targets."""

from .figures import bw_mbps, by_round, cpu_usec_per_op, kops, lat, ops, ratio_row, spread
from .logs import setup_of
from .schedule import (BW_DEPTH, BW_TESTS, LAT_KEYS, QUEUE_SIZES, QUEUES, RATE_DEPTHS,
                       RATE_SIZES, SIZES, TARGET_BW_RATIO, TARGET_LAT_RATIO,
                       TARGET_REGION_PCT, TOPO_ORDER, cpu_keys)


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


def writes_per_fence(runs):
    """Writes per fence the caller asked for, of each `--sent` run."""
    return [ops(r) / r["result"][0]["fences"] for r in runs.values()
            if r["result"][0].get("fences")]


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
            sent = by_round(runs, test, size, "rrdma-sent", BW_DEPTH)
            row = {"test": test, "size": size, "depth": BW_DEPTH,
                   "rrdma_mbps": spread([bw_mbps(r) for r in a.values()]),
                   "perftest_mbps": spread([bw_mbps(r) for r in b.values()]),
                   "ratio": ratio_row(a, b, bw_mbps),
                   # Writes that complete once sent, one fence per run.
                   "sent_mbps": spread([bw_mbps(r) for r in sent.values()]),
                   "sent_ratio": ratio_row(sent, b, bw_mbps),
                   "sent_writes_per_fence": spread(writes_per_fence(sent))}
            row["target_met"] = bool(row["ratio"] and row["ratio"]["median"] >= TARGET_BW_RATIO)
            P["bandwidth"].append(row)
    for size in RATE_SIZES:
        for depth in RATE_DEPTHS:
            a = by_round(runs, "rate", size, "rrdma", depth)
            b = by_round(runs, "rate", size, "perftest", depth)
            u = by_round(runs, "rate", size, "rrdma-uring", depth)
            ip = by_round(runs, "rate", size, "rrdma-iopoll", depth)
            ip_fixed = by_round(runs, "rate", size, "rrdma-iopoll-fixed", depth)
            sent = by_round(runs, "rate", size, "rrdma-sent", depth)
            sent_ip = by_round(runs, "rate", size, "rrdma-sent-iopoll", depth)
            gather = by_round(runs, "rate", size, "rrdma-gather", depth)
            sent_gather = by_round(runs, "rate", size, "rrdma-sent-gather", depth)
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
                                  "iopoll_over_ioctl": ratio_row(ip, a, kops),
                                  # The adaptive spin over a fixed 50 us.
                                  "iopoll_fixed_kops": spread([kops(r) for r in ip_fixed.values()]),
                                  "iopoll_over_fixed": ratio_row(ip, ip_fixed, kops),
                                  "sent_kops": spread([kops(r) for r in sent.values()]),
                                  "sent_ratio": ratio_row(sent, b, kops),
                                  "sent_over_placed": ratio_row(sent, a, kops),
                                  "sent_writes_per_fence": spread(writes_per_fence(sent)),
                                  "sent_iopoll_kops": spread([kops(r) for r in sent_ip.values()]),
                                  "sent_iopoll_ratio": ratio_row(sent_ip, b, kops),
                                  # read(2)'s gathering (read_gather=Y) over none.
                                  "gather_over_none": ratio_row(gather, a, kops),
                                  "sent_gather_over_none": ratio_row(sent_gather, sent, kops)})
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
        ip_fixed = by_round(runs, "read_lat", size, "rrdma-iopoll-fixed")
        nopoll = by_round(runs, "read_lat", size, "rrdma-nopoll")
        fixed = by_round(runs, "read_lat", size, "rrdma-poll-fixed")
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
            row[f"iopoll_fixed_{key}_usec"] = spread([lat(r, key) for r in ip_fixed.values()])
            row[f"iopoll_over_fixed_{key}"] = ratio_row(ip, ip_fixed, lambda r, k=key: lat(r, k))
            # Without polling (sync_poll=N), and the default over it.
            row[f"nopoll_{key}_usec"] = spread([lat(r, key) for r in nopoll.values()])
            row[f"polled_over_nopoll_{key}"] = ratio_row(a, nopoll, lambda r, k=key: lat(r, k))
            # With a fixed 1 ms window (sync_poll_us=1000), and the default over it.
            row[f"poll_fixed_{key}_usec"] = spread([lat(r, key) for r in fixed.values()])
            row[f"polled_over_fixed_{key}"] = ratio_row(a, fixed, lambda r, k=key: lat(r, k))
        # Operations whose completion the synchronous poll handled, per run.
        for tool, rs in (("rrdma", a), ("poll_fixed", fixed)):
            row[f"{tool}_sync_polled"] = spread(
                [r["result"][0]["sync_polled"] / max(r["result"][0]["iterations"], 1)
                 for r in rs.values() if "sync_polled" in r["result"][0]])
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


def build(runs, extra, kernel, rounds, method):
    report = {"kernel": kernel, "rounds": rounds, "method": method,
              "targets": {"bw_ratio_min": TARGET_BW_RATIO, "read_lat_p50_ratio_max": TARGET_LAT_RATIO,
                          "region_overhead_pct_max": TARGET_REGION_PCT},
              "setups": []}
    for topo, prov in sorted({setup_of(r) for r in runs} | set(extra),
                             key=lambda k: (TOPO_ORDER.get(k[0], 9), k[0], k[1])):
        mine = [r for r in runs if setup_of(r) == (topo, prov)]
        P = build_setup(mine, extra.get((topo, prov), {}))
        report["setups"].append({"topology": topo, "provider": prov, **P})
    return report
