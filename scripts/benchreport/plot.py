# SPDX-License-Identifier: GPL-2.0
"""The report as a PNG: bandwidth, message rate and READ latency per
setup (needs matplotlib)."""

from .schedule import BW_DEPTH, RATE_SIZES
from .table import setup_name


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
