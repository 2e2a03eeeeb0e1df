#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make floor`: the round trip of the bench's own two-guest setup (ICMP, a
# UDP ping-pong, perftest's three latency tests) beside rrdma's synchronous
# READ, on siw and rxe (tests/guest/floor.sh), over both links guest.py can
# build: `nodelay` (ours, used by every test) and `qemu-listen` (QEMU's own,
# where Nagle and the host's delayed ACK set a ~40 ms floor).  Prints one
# table (p50 in microseconds) and writes build/floor/floor.json.
# FLOOR_KERNEL=7.3 runs it on the newest kernel; FLOOR_LINKS=nodelay skips
# the comparison.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(dirname "$HERE")
cd "$REPO"

KVER=${FLOOR_KERNEL:-6.12}
LINKS=${FLOOR_LINKS:-nodelay qemu-listen}
prepare_guests "$KVER"
out=build/floor
rm -rf "$out"
mkdir -p "$out"
: >"$out/results.txt"
for link in $LINKS; do
	for prov in siw rxe; do
		log "floor on $prov: two guests, kernel $KVER, link $link"
		python3 "$HERE/guest.py" --kdir "$kdir" --modules "$mods" --bindir build/bin \
			--results "$out/results.txt" --logdir "$out" --label "floor $prov $link" \
			--test floor --arg "$prov" --guests 2 --link "$link" --timeout 1200 \
			--memory 1024 >"$out/guest-$prov-$link.log" 2>&1 || true
	done
done
if grep -q '^FAIL' "$out/results.txt"; then
	grep '^FAIL' "$out/results.txt"
	die "floor runs failed; see $out/"
fi
python3 - "$out" $LINKS <<'PY'
import json, sys
from pathlib import Path
out, links = Path(sys.argv[1]), sys.argv[2:]
recs = []
for link in links:
    for prov in ("siw", "rxe"):
        res = out / f"floor_{prov}_{link}" / "results-b.log"
        for line in res.read_text(errors="replace").splitlines():
            if line.startswith("RRDMA-FLOOR "):
                recs.append(dict(json.loads(line[len("RRDMA-FLOOR "):]), link=link))
(out / "floor.json").write_text(json.dumps(recs, indent=1) + "\n")
kinds = list(dict.fromkeys(r["kind"] for r in recs))
# UDP and ICMP top out at 60000 B: shown in the 65536 column.
col = lambda s: 65536 if s == 60000 else s
sizes = sorted({col(r["size"]) for r in recs})
for link in links:
    print(f"p50 round trip, microseconds, link {link} (ICMP: average; 64K column: 60000 B for UDP, ICMP)")
    print(f"{'':14}" + "".join(f"{p + ' ' + str(s):>12}" for p in ("siw", "rxe") for s in sizes))
    for k in kinds:
        row = f"{k:14}"
        for p in ("siw", "rxe"):
            for s in sizes:
                v = [r["p50_us"] for r in recs
                     if r["link"] == link and r["kind"] == k and r["provider"] == p and col(r["size"]) == s]
                row += f"{v[0] if v else '-':>12}"
        print(row)
print(f"json: {out}/floor.json")
PY
