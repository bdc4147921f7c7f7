"""Benchmark mmops contour_expand (PSENet) and pixel_group (PAN) against the
plain-Python queue of mmcv's algorithm (test/python/text_grouping_reference.py;
mmcv's kernels are CPU-only C++ loops, its GPU users copy the maps to the host).

Inputs (mmocr's post-processing shapes): a square map of --sizes pixels a side
(640: PSENet / PAN at full input size; 160: PAN's 1/4 maps), --instances text
boxes (axis-aligned, random size, kernels shrunk inside, 2% pixel noise):
  contour_expand  7 kernels (PSENet), min_kernel_area 5; mmcv's single flood
                  ("mmcv") and PSENet's progressive rounds ("progressive");
  pixel_group     4-dim embeddings, threshold 0.8, kernels at half size.
Every case is first checked: mmops' label map (and mean scores, counts) must
equal the reference's. The reference runs once (it is slow); mmops is timed by
the usual timer. ratio = reference ms / mmops ms (> 1: mmops is faster); the
ops have no backward: forward only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main
from text_grouping_reference import contour_expand_ref, pixel_group_ref, synthetic_pan, synthetic_psenet


@dataclass(frozen=True)
class Case:
    name: str  # contour_expand_mmcv, contour_expand_progressive, pixel_group


CASES = [Case("contour_expand_mmcv"), Case("contour_expand_progressive"), Case("pixel_group")]
SIZES = ListOption("sizes", None, [160, 640], [160], convert=int)
INSTANCES = ListOption("instances", None, [10, 60], [10], convert=int)


def once_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def bench(case: Case, size: int, instances: int, run, timer, problems) -> list:
    label = (case.name, f"{size}x{size}", str(instances))
    device = run.device
    if case.name.startswith("contour_expand"):
        progressive = case.name.endswith("progressive")
        mask, kernel_label, n = synthetic_psenet(size, size, instances, 7, seed=size + instances)
        args = (mask.to(device), kernel_label.to(device), 5, n, progressive)
        op = lambda: torch.ops.mmops.contour_expand(*args)  # noqa: E731
        ref = lambda: contour_expand_ref(mask, kernel_label, 5, n, progressive)  # noqa: E731
        same = lambda out, expected: out.cpu().tolist() == expected  # noqa: E731
    else:
        inputs = synthetic_pan(size, size, instances, channels=4, seed=size + instances)
        args = tuple(t.to(device) for t in inputs[:5]) + (inputs[5], 0.8)
        op = lambda: torch.ops.mmops.pixel_group(*args)  # noqa: E731
        ref = lambda: pixel_group_ref(*inputs[:5], inputs[5], 0.8)  # noqa: E731
        same = lambda out, expected: tuple(t.cpu().tolist() for t in out) == expected  # noqa: E731
    try:
        out = op()
    except Exception as exc:  # report, and go on with the other rows
        problems.append(f"{' '.join(label)}: mmops raised {type(exc).__name__}: {exc}")
        return [FwdBwdRow(label, check="ERROR")]
    expected = []
    base_ms = once_ms(lambda: expected.append(ref()))
    check = "equal" if same(out, expected[0]) else "DIFFERS"
    if check == "DIFFERS":
        problems.append(f"{' '.join(label)}: result differs from the reference")
    return [FwdBwdRow(label, base_fwd=base_ms, mm_fwd=timer(op), check=check)]


def main() -> int:
    return benchmark_main(
        __doc__,
        "contour_expand / pixel_group benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CASES, CASES),
        options=[SIZES, INSTANCES],
        bench=bench,
        labels=("case", "size", "instances"),
        baseline="python queue",
        check="labels",
        backward=False,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
