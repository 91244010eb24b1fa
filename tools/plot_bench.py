#!/usr/bin/env python3
"""Plots `onorm bench` JSON: effective bandwidth against row width (log x), one line per
op x dtype, the device-to-device copy as a horizontal ceiling.

usage: plot_bench.py BENCH.json OUT.png
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("plot_bench.py: matplotlib is missing (Debian: apt-get install python3-matplotlib)\n")
        return 1
    with open(argv[1]) as f:
        data = json.load(f)
    if data.get("schema") != "onorm-bench/1":
        sys.stderr.write("plot_bench.py: %s is not onorm-bench/1 JSON\n" % argv[1])
        return 1
    lines = {}
    for r in data["results"]:
        lines.setdefault((r["op"], r["dtype"]), []).append((r["cols"], r["gbps"]))
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    styles = {"f32": "-", "bf16": "--", "f16": ":", "f64": "-."}
    for (op, dtype), pts in sorted(lines.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], styles.get(dtype, "-"), marker="o", markersize=3,
                label="%s %s" % (op, dtype))
    copy = data.get("copy", {}).get("gbps")
    if copy:
        ax.axhline(copy, color="black", linewidth=1.2, label="device copy %.0f GB/s" % copy)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("row width (columns)")
    ax.set_ylabel("effective bandwidth (GB/s, x read + y written)")
    title = "onorm bench: %s (%s), %.0f MB per case" % (data.get("backend", "?"), data.get("device", "?"),
                                                         data.get("bytes_per_case", 0) / 1e6)
    if data.get("interrupted"):
        title += " [interrupted]"
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
