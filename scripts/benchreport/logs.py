# SPDX-License-Identifier: GPL-2.0
"""Reading the `RRDMA-BENCH {json}` records out of the bench's logs."""

import json
import sys
from pathlib import Path


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
