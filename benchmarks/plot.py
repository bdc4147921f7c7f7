"""Draws benchmark results (the --json files of bench_*.py) as a PNG.

One panel per op: for every row (case, dtype, ...) horizontal bars of mmops'
speed-up against each baseline and pass (baseline ms / mmops ms: forward,
forward+backward, other baselines), on a log scale, drawn from the line at 1x:
a bar to the right means mmops is faster, to the left slower. Rows without any
ratio (no baseline timed) are left out.

Usage: benchmarks/run.sh plot results/*.json -o speedups.png
       (or <python with matplotlib> benchmarks/plot.py results.json... -o out.png)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, List, Sequence

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402  (after the backend)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

BAR_HEIGHT = 0.8  # of a row's slot, shared by its bars


def load_rows(paths: Sequence[str]) -> List[dict]:
    """The records of every file, in order."""
    rows = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise SystemExit(f"{path}: not a benchmark --json file (no 'rows' list)")
        rows += data["rows"]
    return rows


def row_label(row: dict, with_device: bool) -> str:
    parts = [str(v) for v in row.get("case", {}).values()] + [row.get("dtype", "")]
    if with_device:
        parts.append(row.get("device", ""))
    return " ".join(p for p in parts if p)


def by_op(rows: Sequence[dict]) -> Dict[str, List[dict]]:
    """The rows that have at least one ratio, grouped by op (first-seen order)."""
    groups: Dict[str, List[dict]] = {}
    for row in rows:
        if any(v is not None for v in row.get("ratios", {}).values()):
            groups.setdefault(row["op"], []).append(row)
    return groups


def ratio_keys(rows: Sequence[dict]) -> List[str]:
    keys: List[str] = []
    for row in rows:
        keys += [k for k, v in row["ratios"].items() if v is not None and k not in keys]
    return keys


def minor_label(v: float, _pos=None) -> str:
    """ "2x", "0.3x", "50x": minor ticks whose leading digit is 2, 3 or 5, else none."""
    digit = round(v / 10 ** math.floor(math.log10(v)), 6)
    return f"{v:g}x" if digit in (2, 3, 5) else ""


def draw_op(ax, op: str, rows: Sequence[dict], with_device: bool) -> None:
    """One panel: a slot per row (top to bottom in input order), a bar per ratio key."""
    keys = ratio_keys(rows)
    height = BAR_HEIGHT / len(keys)
    colors = plt.get_cmap("tab10").colors
    for k, key in enumerate(keys):
        ys, widths = [], []
        for i, row in enumerate(rows):
            value = row["ratios"].get(key)
            if value is not None and value > 0:
                ys.append(i - BAR_HEIGHT / 2 + (k + 0.5) * height)
                widths.append(value)
        # from 1x to the value: right of the line faster, left of it slower
        bars = ax.barh(
            ys, [w - 1 for w in widths], height=height, left=1, color=colors[k % len(colors)], label=f"vs {key}"
        )
        ax.bar_label(bars, labels=[f"{w:.2f}x" for w in widths], padding=2, fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    values = [v for row in rows for v in row["ratios"].values() if v is not None and v > 0]
    lo, hi = min(values + [1.0]), max(values + [1.0])
    ax.set_xlim(lo / 2, hi * 3)  # room for the bar labels
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    if hi / lo < 20:  # about a decade: label the minor ticks 2, 3 and 5 too
        ax.xaxis.set_minor_formatter(FuncFormatter(minor_label))
        ax.tick_params(axis="x", which="minor", labelsize=7)
    else:
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(range(len(rows)), [row_label(r, with_device) for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
    ax.grid(axis="x", which="both", alpha=0.3)
    devices = sorted({r.get("device", "") for r in rows})
    ax.set_title(op + ("" if with_device else f" · {devices[0]}"), loc="left", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # right of the panel


def plot(rows: Sequence[dict], out: str, title: str) -> List[str]:
    """Writes the figure; returns the ops drawn."""
    groups = by_op(rows)
    if not groups:
        raise SystemExit("no row has a ratio (were the baselines timed?): nothing to plot")
    with_device = len({r.get("device") for r in rows}) > 1
    heights = [max(1.5, 0.3 * len(g) * max(1, math.sqrt(len(ratio_keys(g))))) for g in groups.values()]
    fig, axes = plt.subplots(
        len(groups), 1, figsize=(12, sum(heights) + 1.0), gridspec_kw={"height_ratios": heights}, squeeze=False
    )
    for ax, (op, group) in zip(axes[:, 0], groups.items()):
        draw_op(ax, op, group, with_device)
    axes[-1, 0].set_xlabel("speed-up of mmops = baseline ms / mmops ms (log scale; > 1: mmops faster)")
    fig.suptitle(title)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return list(groups)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="--json files of the bench_*.py scripts")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--title", default="mmops speed-up against its baselines")
    args = parser.parse_args(argv)
    ops = plot(load_rows(args.results), args.output, args.title)
    print(f"wrote {args.output}: {', '.join(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
