# SPDX-License-Identifier: GPL-2.0
"""The report as text: a table per setup, then every ratio side by side."""

from .schedule import (BW_TESTS, LAT_KEYS, QUEUE_SIZES, QUEUES, RATE_DEPTHS, RATE_SIZES, SIZES,
                       cpu_keys)


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
    sent = [r for r in S["bandwidth"] + S["rate"] if r.get("sent_mbps") or r.get("sent_kops")]
    if sent:
        print("writes that complete once sent (RRDMA_OP_F_SENT), one fence at the end of each "
              "run: figure, ratio to perftest median [min..max], writes per fence")
        for r in sent:
            what = (f"{fmt(r['sent_mbps'])} MB/s" if r.get("sent_mbps")
                    else f"{fmt(r['sent_kops'], digits=2)} kop/s d{r['depth']}")
            ip = ""
            if r.get("sent_iopoll_kops"):
                ip = (f"  IOPOLL {fmt(r['sent_iopoll_kops'], digits=2)} kop/s, "
                      f"{fmt_range(r.get('sent_iopoll_ratio'))}")
            print(f"{r['test'] + ' sent':<14} {r['size']:>8} {what:>18} "
                  f"{fmt_range(r.get('sent_ratio')):>22} "
                  f"{fmt(r.get('sent_writes_per_fence'), digits=0):>10}{ip}")
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
    fixed = [r for r in S["rate"] if r.get("iopoll_fixed_kops")]
    if fixed:
        print("IOPOLL with its spin fixed at 50 us (the default until 2026-11-29): kop/s, "
              "and the adaptive spin's rate over it, median [min..max]")
        for r in fixed:
            print(f"{'write':<9} {r['size']:>8} {r['depth']:>5} "
                  f"{fmt(r['iopoll_fixed_kops'], digits=2):>12} "
                  f"{fmt_range(r.get('iopoll_over_fixed')):>26}")
    gather = [r for r in S["rate"] if r.get("gather_over_none") or r.get("sent_gather_over_none")]
    if gather:
        print("read(2)'s gathering (read_gather=Y) over none (the default): the ioctl path's rate, "
              "placed and sent writes, median [min..max]")
        for r in gather:
            print(f"{'write':<9} {r['size']:>8} {r['depth']:>5} "
                  f"{fmt_range(r.get('gather_over_none')):>26} "
                  f"{fmt_range(r.get('sent_gather_over_none')):>26}")
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
        if r.get("nopoll_p50_usec"):
            print(f"{'':<9} {'':>8} without polling (sync_poll=N): " + "; ".join(
                f"{name} {fmt(r[f'nopoll_{key}_usec'])} us, default / it "
                f"{fmt_range(r[f'polled_over_nopoll_{key}'])}" for key, name in LAT_KEYS))
        if r.get("poll_fixed_p50_usec"):
            print(f"{'':<9} {'':>8} polling 1 ms (sync_poll_us=1000): " + "; ".join(
                f"{name} {fmt(r[f'poll_fixed_{key}_usec'])} us, default / it "
                f"{fmt_range(r[f'polled_over_fixed_{key}'])}" for key, name in LAT_KEYS))
        if r.get("rrdma_sync_polled") or r.get("poll_fixed_sync_polled"):
            print(f"{'':<9} {'':>8} completions handled by the poll, per READ: default "
                  f"{fmt_range(r.get('rrdma_sync_polled'))}, 1 ms "
                  f"{fmt_range(r.get('poll_fixed_sync_polled'))}")
        if r.get("iopoll_p50_usec"):
            print(f"{'':<9} {'':>8} IOPOLL io_uring: " + "; ".join(
                f"{name} {fmt(r[f'iopoll_{key}_usec'])} us, ratio "
                f"{fmt_range(r[f'iopoll_ratio_{key}'])}" for key, name in LAT_KEYS))
        if r.get("iopoll_fixed_p50_usec"):
            print(f"{'':<9} {'':>8} IOPOLL, spin fixed at 50 us: " + "; ".join(
                f"{name} {fmt(r[f'iopoll_fixed_{key}_usec'])} us, adaptive / it "
                f"{fmt_range(r[f'iopoll_over_fixed_{key}'])}" for key, name in LAT_KEYS))
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
            if t == "write_bw":
                yield f"{t} {s} sent", "bandwidth", {"test": t, "size": s}, "sent_ratio"
    for s in RATE_SIZES:
        for d in RATE_DEPTHS:
            yield f"rate {s} d{d}", "rate", {"size": s, "depth": d}, "ratio"
            yield f"rate {s} d{d} sent", "rate", {"size": s, "depth": d}, "sent_ratio"
            yield f"rate {s} d{d} sent IOPOLL", "rate", {"size": s, "depth": d}, "sent_iopoll_ratio"
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
