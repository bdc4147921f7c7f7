"""Timing and table helpers shared by the benchmark scripts in this folder.

The scripts run as `python benchmarks/bench_<name>.py`, so this module is
imported as a sibling (`from bench_common import Timer`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import torch


class Timer:
    """Median milliseconds of one call, after warm-up.

    CUDA: CUDA events around each call. CPU: time.perf_counter around each call.
    """

    def __init__(self, device: torch.device, iters: int, warmup: int) -> None:
        self.device, self.iters, self.warmup = device, iters, warmup

    def __call__(self, fn: Callable[[], object]) -> float:
        """Median milliseconds of one call of fn."""
        for _ in range(self.warmup):
            fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(self.iters)
            ]
            for start, end in events:
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize(self.device)
            times = [start.elapsed_time(end) for start, end in events]
        else:
            times = []
            for _ in range(self.iters):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def fmt_ms(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def fmt_ratio(base: Optional[float], mm: Optional[float]) -> str:
    """base / mm as "1.23x"; "n/a" when either is missing or mm is not positive."""
    return "n/a" if base is None or mm is None or mm <= 0 else f"{base / mm:.2f}x"


def print_columns(header: Sequence[str], cells: Sequence[Sequence[str]], left: int) -> None:
    """Prints a " | "-separated table: the first `left` columns left-aligned
    (text), the others right-aligned (numbers)."""
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(header)]

    def line(values):
        return " | ".join(v.ljust(w) if i < left else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for c in cells:
        print(line(c))


def report_problems(problems: Sequence[str]) -> int:
    """Prints the failed checks, if any; the exit code: 1 when there are any, else 0."""
    if problems:
        print("\nPROBLEMS:")
        for p in problems:
            print(f"  {p}")
        return 1
    return 0


def parse_list(value: Optional[str], choices) -> Optional[list]:
    """A comma-separated option as a list (None when not given); unknown items are an error."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in choices]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {bad}, choose from {list(choices)}")
    return items


def add_run_arguments(parser: argparse.ArgumentParser, iters: Tuple[int, int], warmup: Tuple[int, int]) -> None:
    """--device, --iters, --warmup, --cases and --quick; iters / warmup: the (cuda, cpu) defaults."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--iters", type=int, help=f"timed iterations (default {iters[0]} cuda / {iters[1]} cpu; --quick 10 / 3)"
    )
    parser.add_argument(
        "--warmup", type=int, help=f"warm-up iterations (default {warmup[0]} cuda / {warmup[1]} cpu; --quick 3 / 1)"
    )
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--quick", action="store_true", help="few iterations: a smoke run")


@dataclass
class Run:
    device: torch.device
    cuda: bool
    iters: int
    warmup: int


def resolve_run(
    parser: argparse.ArgumentParser, args: argparse.Namespace, iters: Tuple[int, int], warmup: Tuple[int, int]
) -> Run:
    """The device and iteration counts of add_run_arguments' options (same defaults)."""
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but CUDA is not available")
    cuda = device.type == "cuda"
    side = 0 if cuda else 1
    n = args.iters or (((10, 3) if args.quick else iters)[side])
    w = args.warmup if args.warmup is not None else (((3, 1) if args.quick else warmup)[side])
    return Run(device, cuda, n, w)


def select_cases(parser: argparse.ArgumentParser, names: Optional[str], cases: Sequence) -> list:
    """The cases (objects with a .name) named in --cases, in their order; all when not given."""
    try:
        wanted = parse_list(names, [c.name for c in cases])
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    return [c for c in cases if wanted is None or c.name in wanted]


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (in float64)."""
    diff = (out.double() - ref.double()).abs().max().item() if out.numel() else 0.0
    return diff / max(ref.double().abs().max().item() if ref.numel() else 0.0, 1e-12)


def print_header(title: str, run: Run, library_path: object, torchvision_version: Optional[str]) -> None:
    """The first two lines of a benchmark's output: machine, versions, timing rule."""
    where = torch.cuda.get_device_name(run.device) if run.cuda else f"cpu, {torch.get_num_threads()} threads"
    tv = torchvision_version or "not installed"
    print(f"{title} on {where}: torch {torch.__version__}, torchvision {tv}, mmops from {library_path}")
    print(
        f"median of {run.iters} iterations after {run.warmup} warm-ups; ratio = baseline / mmops (>1: mmops faster)\n"
    )


@dataclass
class FwdBwdRow:
    """One line of a forward / forward+backward comparison table."""

    op: str
    shape: str
    dtype: str
    layout: str
    base_fwd: Optional[float] = None
    mm_fwd: Optional[float] = None
    base_fb: Optional[float] = None
    mm_fb: Optional[float] = None
    check: str = ""


def print_fwd_bwd_table(rows: Sequence[FwdBwdRow]) -> None:
    header = ["op", "shape", "dtype", "layout", "baseline fwd ms", "mmops fwd ms", "ratio"]
    header += ["baseline fwd+bwd ms", "mmops fwd+bwd ms", "ratio", "rel err fwd/bwd"]
    cells = [
        [r.op, r.shape, r.dtype, r.layout, fmt_ms(r.base_fwd), fmt_ms(r.mm_fwd), fmt_ratio(r.base_fwd, r.mm_fwd)]
        + [fmt_ms(r.base_fb), fmt_ms(r.mm_fb), fmt_ratio(r.base_fb, r.mm_fb), r.check]
        for r in rows
    ]
    print_columns(header, cells, left=4)
