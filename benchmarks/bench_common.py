"""Timing, table, options and the main() shared by the benchmark scripts in this folder.

The scripts run as `python benchmarks/bench_<name>.py`, so this module is
imported as a sibling (`from bench_common import Timer`). A script defines its
cases, its list options and bench(case, *option values, run=, timer=, problems=)
and calls benchmark_main(); see bench_roi_pool.py.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch

import mmops

try:  # the baseline of most scripts; without it only mmops is timed (and not checked)
    import torchvision
except ImportError:  # pragma: no cover - depends on the machine
    torchvision = None

# The plain-torch float64 references the tests use (test/python/*_reference.py)
sys.path.append(str(Path(__file__).resolve().parents[1] / "test" / "python"))

# The rules every script follows; --help prints them after the script's own text.
COMMON_HELP = """\
Timing:
  CUDA: CUDA events around each iteration after warm-up, median.
  CPU:  time.perf_counter around each iteration after warm-up, median,
        torch.get_num_threads() threads.

ratio = baseline ms / mmops ms (> 1 means mmops is faster).

Run from the repository root: PYTHONPATH=python python benchmarks/%(prog)s [options]

The exit code is 1 when a correctness check fails or mmops raises, else 0
(timings are never asserted).
"""


def torchvision_op(name: str) -> Optional[Callable]:
    """torchvision.ops.<name>, or None when torchvision is not installed."""
    return getattr(torchvision.ops, name) if torchvision is not None else None


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


def print_header(
    title: str,
    run: Run,
    baseline: str = "baseline",
    notes: str = "",
    case_lines: Sequence[str] = (),
    with_torchvision: bool = True,
) -> None:
    """The first lines of a benchmark's output: machine, versions, timing rule
    (then `notes` on the same line), one line per case, a blank line."""
    where = torch.cuda.get_device_name(run.device) if run.cuda else f"cpu, {torch.get_num_threads()} threads"
    tv = ""
    if with_torchvision:
        tv = f", torchvision {torchvision.__version__ if torchvision is not None else 'not installed'}"
    library = getattr(mmops, "library_path", "?")
    print(f"{title} on {where}: torch {torch.__version__}{tv}, mmops from {library}")
    print(
        f"median of {run.iters} iterations after {run.warmup} warm-ups; "
        f"ratio = {baseline} / mmops (>1: mmops faster){notes}"
    )
    for line in case_lines:
        print(line)
    print()


@dataclass
class FwdBwdRow:
    """One line of a forward / forward+backward comparison table: the text
    columns, the timings (ms), the check text; `extra`: more timings by name."""

    labels: Sequence[str]
    base_fwd: Optional[float] = None
    mm_fwd: Optional[float] = None
    base_fb: Optional[float] = None
    mm_fb: Optional[float] = None
    check: str = ""
    extra: Dict[str, Optional[float]] = field(default_factory=dict)


Column = Tuple[str, Callable[[FwdBwdRow], str]]


def print_fwd_bwd_table(
    rows: Sequence[FwdBwdRow],
    labels: Sequence[str] = ("op", "shape", "dtype", "layout"),
    baseline: str = "baseline",
    check: str = "rel err fwd/bwd",
    before: Sequence[Column] = (),
    after: Sequence[Column] = (),
) -> None:
    """The table: the label columns, `before` (header, cell) columns, baseline /
    mmops forward and ratio, the same for forward+backward, `after`, the check."""
    header = list(labels) + [h for h, _ in before]
    header += [f"{baseline} fwd ms", "mmops fwd ms", "ratio", f"{baseline} fwd+bwd ms", "mmops fwd+bwd ms", "ratio"]
    header += [h for h, _ in after] + [check]
    cells = [
        list(r.labels)
        + [cell(r) for _, cell in before]
        + [fmt_ms(r.base_fwd), fmt_ms(r.mm_fwd), fmt_ratio(r.base_fwd, r.mm_fwd)]
        + [fmt_ms(r.base_fb), fmt_ms(r.mm_fb), fmt_ratio(r.base_fb, r.mm_fb)]
        + [cell(r) for _, cell in after]
        + [r.check]
        for r in rows
    ]
    print_columns(header, cells, left=len(labels))  # the label columns are text, the rest numbers


@dataclass(frozen=True)
class ListOption:
    """A comma-separated option --<name> of `choices`, with its defaults on cuda and on cpu."""

    name: str
    choices: Sequence[str]
    cuda: Sequence[str]
    cpu: Sequence[str]
    looped: bool = True  # False: bench gets the whole list (and loops itself)

    @property
    def help(self) -> str:
        default = (
            ",".join(self.cuda)
            if list(self.cuda) == list(self.cpu)
            else (f"{','.join(self.cuda)} on cuda, {','.join(self.cpu)} on cpu")
        )
        return f"comma-separated of {','.join(self.choices)} (default: {default})"


LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
LAYOUT_OPTION = ListOption("layouts", LAYOUTS, LAYOUTS, LAYOUTS)


def benchmark_main(
    doc: str,
    title: str,
    iters: Tuple[int, int],
    warmup: Tuple[int, int],
    cases: Tuple[Sequence, Sequence],
    options: Sequence[ListOption],
    bench: Callable[..., object],
    labels: Sequence[str] = ("op", "shape", "dtype", "layout"),
    baseline: str = "baseline",
    check: str = "rel err fwd/bwd",
    before: Sequence[Column] = (),
    after: Sequence[Column] = (),
    notes: str = "",
    case_line: Optional[Callable[[object], str]] = None,
    with_torchvision: bool = True,
    loop: Optional[Sequence[str]] = None,
    add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None,
) -> int:
    """A benchmark script's main(): parses the run options (add_run_arguments;
    iters / warmup: the (cuda, cpu) defaults) and the list options, prints the
    header (print_header: title, baseline, notes, case_line(case) per case),
    calls bench(case, *option values, run=, timer=, problems=) (a row or a list
    of rows) for every selected case (of cases = (cuda cases, cpu cases)) and
    every combination of option values (nested in `loop` order, names of
    `options`; default: as listed; an option with looped=False is passed whole),
    then prints the table (print_fwd_bwd_table: labels, baseline, check, before,
    after) and the problems. Returns the exit code."""
    parser = argparse.ArgumentParser(
        description=doc, epilog=COMMON_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser, iters=iters, warmup=warmup)
    for o in options:
        # parse_list raises argparse.ArgumentTypeError: argparse reports a bad item itself
        parser.add_argument(f"--{o.name}", type=functools.partial(parse_list, choices=o.choices), help=o.help)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    run = resolve_run(parser, args, iters=iters, warmup=warmup)
    selected = select_cases(parser, args.cases, cases[0] if run.cuda else cases[1])
    values = {o.name: getattr(args, o.name) or list(o.cuda if run.cuda else o.cpu) for o in options}
    order = list(loop or [o.name for o in options if o.looped])
    lines = [case_line(c) for c in selected] if case_line is not None else []
    print_header(title, run, baseline, notes, lines, with_torchvision)

    timer = Timer(run.device, run.iters, run.warmup)
    rows, problems = [], []
    for case in selected:
        for combo in itertools.product(*(values[name] for name in order)):
            by_name = {**values, **dict(zip(order, combo))}
            result = bench(case, *(by_name[o.name] for o in options), run=run, timer=timer, problems=problems)
            rows += result if isinstance(result, list) else [result]
            if run.cuda:
                torch.cuda.empty_cache()
    print_fwd_bwd_table(rows, labels, baseline, check, before, after)
    return report_problems(problems)
