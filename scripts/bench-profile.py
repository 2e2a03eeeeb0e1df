#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where a 4 KiB READ's time goes, rrdma's against perftest's.

Reads the `RRDMA-PROF` lines that tests/guest/benchprof.sh writes (perf's
reports of each READ-latency run of `make profile-lat`) and prints, per
provider and tool, the CPU time per READ (both vCPUs of the guest, the
idle loop and perf itself left out) by task, by object and by symbol,
rrdma's runs beside perftest's (ib_read_lat, which posts from userspace and
busy-polls its completion queue there).  One cpu-clock sample is one
millisecond of a CPU, so a symbol's samples over a tool's READs are its
cost per READ.  Under TCG every instruction is slower by a different
factor: the figures compare the two tools' paths, they are not what the
paths cost on hardware.

usage: bench-profile.py [--top N] RESULTS-LOG...
"""

import argparse
import json
import os
import re
import statistics
import sys
from collections import defaultdict

# The idle loop's own symbols: a CPU with nothing to run.
IDLE = {"pv_native_safe_halt", "native_safe_halt", "default_idle", "cpu_idle_poll",
        "acpi_safe_halt", "acpi_idle_do_entry", "poll_idle"}
MARKS = {"[k]", "[.]", "[u]", "[g]"}
# The scheduler's own code: a context switch, or a yield() that found
# nothing else to run.
SCHED = {"__sched_text_start", "__schedule", "schedule", "finish_task_switch",
         "do_sched_yield", "yield", "pick_next_task_fair", "update_curr",
         "update_cfs_rq_load_avg", "sched_balance_rq", "dequeue_task_fair",
         "enqueue_task_fair", "switch_mm_irqs_off", "__switch_to", "__switch_to_asm",
         "_raw_spin_rq_lock", "psi_task_switch", "try_to_wake_up"}
# A self sample's kind, for the summary (first match).
KINDS = [
    ("user space (the tool, its verbs provider)", lambda c, d, s: not d.startswith("[")
     or d == "[vdso]"),
    ("rrdma.ko's own code", lambda c, d, s: d == "[rrdma]"),
    ("scheduler", lambda c, d, s: s in SCHED),
    ("irq-off sections (sample at their end)",
     lambda c, d, s: s.startswith("_raw_spin_unlock_irq")),
    ("the transport's threads (rxe work items, siw_tx)",
     lambda c, d, s: c.startswith(("kworker", "siw_tx"))),
    ("other kernel code", lambda c, d, s: True),
]
CUT = "symbols under the report's cut-off"
# Entry points whose children say where a READ's path goes.
PATHS = re.compile(r"^(do_syscall_64|__x64_sys_\w+|ksys_\w+|rrdma\w*|ib_\w+|rxe_\w+|siw_\w+|"
                   r"handle_softirqs|__do_softirq|net_rx_action|__schedule|schedule|"
                   r"asm_sysvec_\w+|irq_exit_rcu|worker_thread|process_one_work|"
                   r"ibv_\w+|__libc_write|ioctl|rdma_\w+)$")


class Run:
    """A tool's runs on one provider: samples summed over its rounds."""

    def __init__(self):
        self.iters = 0
        self.total = 0
        self.rounds = set()
        self.self_rows = defaultdict(int)  # (comm, dso, sym) -> samples
        self.children = defaultdict(float)  # sym -> samples (children)
        self.round_total = {}  # round -> its samples
        self.p50s = []  # the tool's own READ p50 of each round, us
        self.packets = 0  # frames the guest's interfaces sent


def parse(paths):
    runs = defaultdict(Run)  # (provider, topology, tool) -> Run
    for path in paths:
        # A guest that failed early left no log (bench.sh lists its FAIL).
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("RRDMA-BENCH "):
                    bench_p50(runs, line)
                if not line.startswith("RRDMA-PROF "):
                    continue
                head = line.split(None, 7)
                if len(head) < 8:
                    continue
                _, tool, rnd, prov, topo, iters, kind, rest = head
                run = runs[(prov, topo, tool)]
                if rnd not in run.rounds:
                    run.rounds.add(rnd)
                    run.iters += int(iters)
                tok = rest.split()
                if rest.startswith("#"):
                    continue
                if kind == "packets":
                    run.packets += int(tok[0])
                    continue
                if kind == "self":
                    if rnd not in run.round_total:
                        # The first row has the largest share: the round's
                        # samples from it (perf's own header rounds them
                        # to thousands).
                        n = round(int(tok[1]) * 100 / float(tok[0].rstrip("%")))
                        run.round_total[rnd] = n
                        run.total += n
                    mark = max(i for i, t in enumerate(tok) if t in MARKS)
                    comm = " ".join(tok[2:mark - 1])
                    dso = tok[mark - 1]
                    if tok[mark] == "[.]" and dso.startswith("["):
                        # A user-space sample whose object perf did not
                        # know ([unknown]).
                        dso = "user " + dso
                    run.self_rows[(comm, dso, " ".join(tok[mark + 1:]))] += int(tok[1])
                elif kind == "children":
                    sym = " ".join(tok[4:])
                    if PATHS.match(sym):
                        # A percentage of the round's samples.
                        share = float(tok[0].rstrip("%")) / 100
                        run.children[sym] += share * run.round_total.get(rnd, 0)
    return runs


def bench_p50(runs, line):
    """The p50 of a READ-latency run's record (`RRDMA-BENCH`), recorded
    under perf like the samples: how much perf slowed the tool down."""
    try:
        rec = json.loads(line[len("RRDMA-BENCH "):])
    except ValueError:
        return
    if rec.get("kind") != "run" or rec.get("test") != "read_lat":
        return
    if "result" in rec:
        p50 = rec["result"][0]["latency_usec"]["p50"]
    else:
        p50 = rec["p50"]
    runs[(rec["provider"], rec["topology"], rec["tool"])].p50s.append(float(p50))


def busy_rows(run):
    """The self rows that are work: neither the idle loop nor perf."""
    return {k: n for k, n in run.self_rows.items()
            if k[2] not in IDLE and not k[0].startswith("perf")}


def busy_total(run):
    """The run's samples that are work, the rows under perf's cut-off
    included."""
    return run.total - sum(n for k, n in run.self_rows.items()
                           if k[2] in IDLE or k[0].startswith("perf"))


def per_op(samples, run):
    """Microseconds of CPU per READ from a count of 1 ms samples."""
    return 1000.0 * samples / run.iters if run.iters else 0.0


def table(title, keys, names, value, top, sort=True):
    """Rows of KEYS, a column per tool of NAMES, VALUE(tool, key) in each."""
    rows = [(k, [value(n, k) for n in names]) for k in keys]
    # The largest difference between rrdma's best run and perftest first.
    ref = names.index("perftest") if "perftest" in names else 0
    if sort:
        rows.sort(key=lambda r: (-round(max(abs(v - r[1][ref]) for v in r[1]), 1),
                                 -max(r[1]), str(r[0])))
    print(f"\n-- {title} (CPU us per READ) --")
    print(f"{'':44}" + "".join(f"{n[:16]:>17}" for n in names))
    for k, vals in rows[:top]:
        label = k if isinstance(k, str) else " ".join(k)
        print(f"{label[:44]:44}" + "".join(f"{v:17.1f}" for v in vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=25, help="rows per table")
    ap.add_argument("logs", nargs="+")
    args = ap.parse_args()
    runs = parse(args.logs)
    if not any(run.rounds for run in runs.values()):
        sys.exit("bench-profile.py: no RRDMA-PROF lines (run with rrdma.profile=1)")
    order = ["perftest", "rrdma-poll-fixed", "rrdma", "rrdma-nopoll", "rrdma-iopoll",
             "rrdma-iopoll-fixed"]
    for prov, topo in sorted({(p, t) for p, t, _ in runs}):
        mine = {tool: runs[(p, t, tool)] for p, t, tool in runs if (p, t) == (prov, topo)}
        mine = {n: mine[n] for n in sorted(mine, key=lambda n: (order + [n]).index(n))}
        print(f"\n== {prov} ({topo}): 4 KiB READ, depth 1 ==")
        for name, run in mine.items():
            busy = busy_total(run)
            p50 = statistics.median(run.p50s) if run.p50s else 0
            print(f"{name:20} {len(run.rounds)} runs, {run.iters} READs, {run.total} samples: "
                  f"{per_op(busy, run):7.1f} us of CPU per READ, median p50 {p50:.0f} us (under perf), "
                  f"{run.packets / max(run.iters, 1):.2f} frames per READ")
        by = {}
        for name, run in mine.items():
            d = defaultdict(int)
            for (comm, dso, sym), n in busy_rows(run).items():
                d[("comm", re.sub(r"[/:]\d+.*", "", comm))] += n
                d[("dso", dso)] += n
                d[("sym", sym)] += n
            by[name] = d
        summary = {name: defaultdict(int) for name in mine}
        for name, run in mine.items():
            for (comm, dso, sym), n in busy_rows(run).items():
                kind = next(k for k, f in KINDS if f(comm, dso, sym))
                summary[name][kind] += n
            summary[name][CUT] = busy_total(run) - sum(busy_rows(run).values())
        table("summary: CPU by kind", [k for k, _ in KINDS] + [CUT], list(mine),
              lambda n, k: per_op(summary[n][k], mine[n]), len(KINDS) + 1, sort=False)
        for kind, title in (("comm", "by task"), ("dso", "by object"),
                            ("sym", "by symbol (self)")):
            keys = {k[1] for d in by.values() for k in d if k[0] == kind}
            table(title, keys, list(mine), lambda n, k, kind=kind: per_op(
                by[n][(kind, k)], mine[n]), args.top)
        keys = {s for run in mine.values() for s in run.children}
        table("entry points, with what they call (children)", keys, list(mine),
              lambda n, s: per_op(mine[n].children.get(s, 0.0), mine[n]), args.top)


if __name__ == "__main__":
    main()
