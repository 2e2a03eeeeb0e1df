# SPDX-License-Identifier: GPL-2.0
"""What the bench measures (sizes, depths, queues, latency percentiles),
the targets its ratios are held to, and the order topologies are
reported in."""

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


def cpu_keys():
    keys = [(t, s, BW_DEPTH) for t in BW_TESTS for s in SIZES]
    keys += [("read_lat", s, None) for s in SIZES]
    keys += [("rate", s, d) for s in RATE_SIZES for d in RATE_DEPTHS]
    return keys


TOPO_ORDER = {"pair": 0, "pair-1cpu": 1, "local-netns": 2, "local-loopback": 3}
