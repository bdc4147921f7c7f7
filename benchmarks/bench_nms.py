"""Benchmark mmops nms / batched_nms against torchvision (bbox_overlaps:
bench_bbox_overlaps.py).

Inputs: N random boxes with sides up to 100 px on an 800 x 800 image, uniform
scores, IoU threshold 0.5; batched_nms with 80 categories. Every case is first
checked: mmops' kept indices must equal torchvision's (for batched_nms, up to
the order of equal scores). Then both are timed in the same run:

  CUDA: CUDA events around each call after warm-up, median (nms includes the
        one host synchronisation both libraries need for the kept count).
  CPU:  time.perf_counter, median, torch.get_num_threads() threads, smaller N.

ratio = baseline ms / mmops ms (> 1: mmops is faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_nms.py [--device cpu|cuda] [--iters N]
      [--warmup N] [--cases nms,batched_nms] [--sizes 1000,5000] [--dtypes fp32,fp16] [--quick]

Exit code 1 when a correctness check fails (timings are never asserted).
"""

from __future__ import annotations

import argparse
import sys

import torch
from bench_common import Timer, add_run_arguments, fmt_ms, fmt_ratio, parse_list, resolve_run

import mmops  # noqa: F401  (registers torch.ops.mmops)

try:
    import torchvision
except ImportError:  # pragma: no cover - depends on the machine
    torchvision = None

CASES = ["nms", "batched_nms"]
CUDA_SIZES = [1000, 5000, 20000, 100000]
CPU_SIZES = [1000, 5000, 20000]
CATEGORIES = 80
THRESHOLD = 0.5
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def make_boxes(n: int, device, dtype, seed: int = 0):
    """Boxes on an 800 x 800 image with sides up to 100, uniform scores, 80 categories."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 800
    wh = torch.rand(n, 2, generator=g) * 100
    boxes = torch.cat([xy, xy + wh], 1).to(device=device, dtype=dtype)
    scores = torch.rand(n, generator=g).to(device=device, dtype=dtype)
    idxs = torch.randint(0, CATEGORIES, (n,), generator=g).to(device)
    return boxes, scores, idxs


def compare_keep(keep, tv_keep, scores) -> str:
    """ "equal", or "equal up to ties" when only boxes of equal score swap places
    (torchvision's batched_nms merges categories with an unstable sort; mmops
    puts the lower index first)."""
    if torch.equal(keep, tv_keep):
        return "equal"
    if (
        keep.numel() == tv_keep.numel()
        and torch.equal(keep.sort()[0], tv_keep.sort()[0])
        and torch.equal(scores[keep], scores[tv_keep])
    ):
        return "equal up to ties"
    return "DIFFERS"


def report(rows, problems) -> int:
    """Prints the table and the failed checks; the exit code (1: a check failed)."""
    header = ["case", "size", "dtype", "mmops ms", "baseline ms", "ratio", "baseline", "check"]
    table = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for k, r in enumerate(table):
        print("  ".join(v.rjust(w) if i in (1, 3, 4, 5) else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


def parse_run(parser: argparse.ArgumentParser, cases: list):
    """The command line of this script and bench_bbox_overlaps.py: the run
    options (bench_common), --dtypes, and the cases (all when --cases is not
    given). Returns (args, run, cases, dtypes)."""
    add_run_arguments(parser, iters=(50, 5), warmup=(10, 1))
    parser.add_argument("--dtypes", default="fp32")
    args = parser.parse_args()
    run = resolve_run(parser, args, iters=(50, 5), warmup=(10, 1))
    try:
        wanted = parse_list(args.cases, cases) or cases
        dtypes = [DTYPES[d] for d in parse_list(args.dtypes, DTYPES)]
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    return args, run, wanted, dtypes


def device_line(run) -> str:
    """The first line of the output: the device, the timer and torch."""
    return (
        f"device: {torch.cuda.get_device_name(run.device) if run.cuda else 'cpu'} "
        f"({'CUDA events' if run.cuda else f'{torch.get_num_threads()} threads'}), torch {torch.__version__}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=None, help="comma separated box counts")
    args, run, wanted, dtypes = parse_run(parser, CASES)
    device, cuda = run.device, run.cuda
    timer = Timer(device, run.iters, run.warmup)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (CUDA_SIZES if cuda else CPU_SIZES)
    print(
        f"{device_line(run)}, torchvision {torchvision.__version__ if torchvision else 'not installed'}, "
        f"median of {run.iters}"
    )
    ops = {
        "nms": (
            "nms",
            lambda b, s, i: torch.ops.mmops.nms(b, s, THRESHOLD),
            lambda b, s, i: torchvision.ops.nms(b, s, THRESHOLD),
        ),
        "batched_nms": (
            f"batched_nms ({CATEGORIES} cat.)",
            lambda b, s, i: torch.ops.mmops.batched_nms(b, s, i, THRESHOLD),
            lambda b, s, i: torchvision.ops.batched_nms(b, s, i, THRESHOLD),
        ),
    }
    rows, problems = [], []
    for dtype in dtypes:
        dname = str(dtype).replace("torch.", "")
        for n in sizes:
            boxes, scores, idxs = make_boxes(n, device, dtype, seed=n)
            for case in [c for c in CASES if c in wanted]:
                label, mmops_op, tv_op = ops[case]
                keep = mmops_op(boxes, scores, idxs)
                base_ms, check = None, "n/a"
                if torchvision is not None:
                    check = compare_keep(keep, tv_op(boxes, scores, idxs), scores)
                    if check == "DIFFERS":
                        problems.append(f"{case} n={n} {dname}: kept indices differ from torchvision")
                    base_ms = timer(lambda: tv_op(boxes, scores, idxs))
                mine = timer(lambda: mmops_op(boxes, scores, idxs))
                rows.append(
                    [label, n, dname, fmt_ms(mine), fmt_ms(base_ms), fmt_ratio(base_ms, mine), "torchvision", check]
                )
    return report(rows, problems)


if __name__ == "__main__":
    sys.exit(main())
