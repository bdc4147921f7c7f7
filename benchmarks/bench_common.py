"""Timing and table helpers shared by the benchmark scripts in this folder.

The scripts run as `python benchmarks/bench_<name>.py`, so this module is
imported as a sibling (`from bench_common import Timer`).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional, Sequence

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
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(self.iters)]
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
