"""Timing, table, options, outputs and the main() shared by the benchmark scripts in this folder.

The scripts run as `benchmarks/run.sh <name>` (or `python benchmarks/bench_<name>.py`), so
this module is imported as a sibling (`from bench_common import Timer`). A script defines its
cases, its list options and bench(case, *option values, run=, timer=, problems=)
and calls benchmark_main(); see bench_roi_pool.py. Every script has the same options
(add_run_arguments), prints a progress line per row as it finishes (stderr), then the
table (stdout), and writes the rows as JSON / CSV records (--json, --csv; plot.py draws them).
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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
  A call slower than 50 ms in its first two warm-ups (a slow composite) gets
  those as its warm-up and as many iterations as fit in about a second, at least 2.

ratio = baseline ms / mmops ms (> 1 means mmops is faster).

Run: benchmarks/run.sh <name> [options] (the set-up's python, build/libmmops.so),
or PYTHONPATH=python <python with torch> benchmarks/%(prog)s [options].

Output: a progress line per row on stderr as it finishes, then the table on
stdout; --json / --csv write one record per row (benchmarks/plot.py draws them).

The exit code is 1 when a correctness check fails or mmops raises, else 0
(timings are never asserted).
"""


def mmcv_anchor() -> Tuple[Optional[Any], str]:
    """(mmcv's own CUDA kernels as the `mmcv_anchor` module, or None; a note for the header).

    The anchor is mmcv's CUDA source built as a small extension (a baseline, never part
    of mmops): the folder that holds mmcv_anchor.py comes from $MMOPS_MMCV_ANCHOR, else
    the module must already be importable. It is CUDA only."""
    import importlib
    import os

    folder = os.environ.get("MMOPS_MMCV_ANCHOR")
    if folder and folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module("mmcv_anchor")
    except Exception as exc:  # not built here, or built for another torch
        return None, f"mmcv column skipped: mmcv_anchor not importable ({type(exc).__name__}: {exc})"
    return module, f"mmcv {module.MMCV_VERSION} ({module.MMCV_COMMIT[:8]}) CUDA kernels via mmcv_anchor"


def torchvision_op(name: str) -> Optional[Callable]:
    """torchvision.ops.<name>, or None when torchvision is not installed."""
    return getattr(torchvision.ops, name) if torchvision is not None else None


class Timer:
    """Median milliseconds of one call, after warm-up.

    CUDA: CUDA events around each call. CPU: time.perf_counter around each call.
    """

    SLOW_MS = 50.0  # a call this slow is timed within about SLOW_BUDGET_MS
    SLOW_BUDGET_MS = 1000.0

    def __init__(self, device: torch.device, iters: int, warmup: int) -> None:
        self.device, self.iters, self.warmup = device, iters, warmup

    def _timed_once(self, fn: Callable[[], object]) -> float:
        """Wall milliseconds of one call, synchronised."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return (time.perf_counter() - t0) * 1e3

    def __call__(self, fn: Callable[[], object]) -> float:
        """Median milliseconds of one call of fn."""
        iters, warmup = self.iters, self.warmup
        # a slow first call may be one-time set-up (lazy module loading): the second decides
        checks = min(warmup, 2)
        for i in range(checks):
            call_ms = self._timed_once(fn)
            warmup -= 1
            if call_ms <= self.SLOW_MS:
                break
            if i == checks - 1:
                warmup, iters = 0, max(2, min(iters, int(self.SLOW_BUDGET_MS / call_ms)))
        for _ in range(warmup):
            fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)
            ]
            for start, end in events:
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize(self.device)
            times = [start.elapsed_time(end) for start, end in events]
        else:
            times = []
            for _ in range(iters):
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


def parse_list(value: Optional[str], choices, convert: Callable[[str], Any] = str) -> Optional[list]:
    """A comma-separated option as a list (None when not given); items not in
    `choices` (None: any) or that `convert` rejects are an error."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if choices is not None and v not in choices]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {bad}, choose from {list(choices)}")
    try:
        return [convert(v) for v in items]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_run_arguments(parser: argparse.ArgumentParser, iters: Tuple[int, int], warmup: Tuple[int, int]) -> None:
    """--device, --iters, --warmup, --cases, --quick, --json and --csv; iters / warmup:
    the (cuda, cpu) defaults."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--iters", type=int, help=f"timed iterations (default {iters[0]} cuda / {iters[1]} cpu; --quick 10 / 3)"
    )
    parser.add_argument(
        "--warmup", type=int, help=f"warm-up iterations (default {warmup[0]} cuda / {warmup[1]} cpu; --quick 3 / 1)"
    )
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--quick", action="store_true", help="few iterations: a smoke run")
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON records (benchmarks/plot.py reads it)")
    parser.add_argument("--csv", metavar="PATH", help="write the rows as CSV, one line per row")


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
    backward: bool = True,
) -> None:
    """The table: the label columns, `before` (header, cell) columns, baseline /
    mmops forward and ratio, the same for forward+backward (unless not `backward`),
    `after`, the check."""
    header = list(labels) + [h for h, _ in before]
    if backward:
        header += [f"{baseline} fwd ms", "mmops fwd ms", "ratio", f"{baseline} fwd+bwd ms", "mmops fwd+bwd ms", "ratio"]
    else:
        header += [f"{baseline} ms", "mmops ms", "ratio"]
    header += [h for h, _ in after] + [check]
    cells = []
    for r in rows:
        c = list(r.labels) + [cell(r) for _, cell in before]
        c += [fmt_ms(r.base_fwd), fmt_ms(r.mm_fwd), fmt_ratio(r.base_fwd, r.mm_fwd)]
        if backward:
            c += [fmt_ms(r.base_fb), fmt_ms(r.mm_fb), fmt_ratio(r.base_fb, r.mm_fb)]
        cells.append(c + [cell(r) for _, cell in after] + [r.check])
    print_columns(header, cells, left=len(labels))  # the label columns are text, the rest numbers


# ---- Records: one per table row, for --json / --csv and plot.py ---------------------


def ratio(base: Optional[float], mm: Optional[float]) -> Optional[float]:
    """base / mm, or None when either is missing or mm is not positive (as fmt_ratio)."""
    return None if base is None or mm is None or mm <= 0 else base / mm


@dataclass(frozen=True)
class RecordSpec:
    """How a script's rows become records: the benchmark (script) and op names,
    the label names, the baseline's name, whether rows have a backward, and
    more baselines timed into FwdBwdRow.extra, as (name, fwd key, fwd+bwd key)."""

    benchmark: str
    op: str
    labels: Sequence[str]
    baseline: str
    backward: bool = True
    extra_baselines: Sequence[Tuple[str, Optional[str], Optional[str]]] = ()


def row_record(row: FwdBwdRow, spec: RecordSpec, run: "Run") -> Dict[str, Any]:
    """One row as a flat-ish record: benchmark, device, op, dtype, case (the other
    labels), baseline, times_ms, ratios (baseline ms / mmops ms, by baseline and
    pass: "<baseline> fwd"), check. Missing values are None."""
    labels = dict(zip(spec.labels, row.labels))
    b = spec.baseline
    times = {f"{b} fwd": row.base_fwd, "mmops fwd": row.mm_fwd}
    ratios = {f"{b} fwd": ratio(row.base_fwd, row.mm_fwd)}
    if spec.backward:
        times.update({f"{b} fwd+bwd": row.base_fb, "mmops fwd+bwd": row.mm_fb})
        ratios[f"{b} fwd+bwd"] = ratio(row.base_fb, row.mm_fb)
    times.update(row.extra)
    for name, fwd_key, fb_key in spec.extra_baselines:
        for key, mm, what in ((fwd_key, row.mm_fwd, "fwd"), (fb_key, row.mm_fb, "fwd+bwd")):
            if key is not None:
                ratios[f"{name} {what}"] = ratio(row.extra.get(key), mm)
    return {
        "benchmark": spec.benchmark,
        "device": device_name(run),
        "op": labels.pop("op", spec.op),
        "dtype": labels.pop("dtype", ""),
        "case": labels,
        "baseline": b,
        "times_ms": times,
        "ratios": ratios,
        "check": row.check,
    }


def device_name(run: "Run") -> str:
    return torch.cuda.get_device_name(run.device) if run.cuda else f"cpu ({torch.get_num_threads()} threads)"


def progress_line(index: int, total: int, record: Dict[str, Any], seconds: float) -> str:
    """`[ 3/12] op case.. dtype: <baseline> fwd 1.23 / mmops 0.45 ms = 2.7x, ... check (1.2 s)`."""
    what = " ".join([record["op"], *map(str, record["case"].values()), record["dtype"]]).strip()
    parts = []
    for key, mm_key in (("fwd", "mmops fwd"), ("fwd+bwd", "mmops fwd+bwd")):
        base_key = f"{record['baseline']} {key}"
        if mm_key in record["times_ms"]:
            base, mm = record["times_ms"].get(base_key), record["times_ms"][mm_key]
            parts.append(f"{key} {fmt_ms(base)} / mmops {fmt_ms(mm)} ms = {fmt_ratio(base, mm)}")
    width = len(str(total))
    return (
        f"[{index:>{width}}/{total}] {what}: {record['baseline']} " + ", ".join(parts) + f", check {record['check']}"
        f" ({seconds:.1f} s)"
    )


def write_json(path: str, meta: Dict[str, Any], records: Sequence[Dict[str, Any]]) -> None:
    """{"meta": {...}, "rows": [records]}; plot.py reads one or more of these."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"meta": meta, "rows": list(records)}, indent=1) + "\n")


def flat_record(record: Dict[str, Any]) -> Dict[str, Any]:
    """A record with its dicts spread into columns: case labels by name, "<k> ms", "<k> ratio"."""
    flat = {k: record[k] for k in ("benchmark", "device", "op")}
    flat.update(record["case"])
    flat.update({k: record[k] for k in ("dtype", "baseline")})
    flat.update({f"{k} ms": v for k, v in record["times_ms"].items()})
    flat.update({f"{k} ratio": v for k, v in record["ratios"].items()})
    flat["check"] = record["check"]
    return flat


def write_csv(path: str, records: Sequence[Dict[str, Any]]) -> None:
    """One line per record (flat_record); the columns of every record, in first-seen order."""
    rows = [flat_record(r) for r in records]
    columns: List[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: csv_cell(v) for k, v in r.items()})


def csv_cell(v: Any) -> Any:
    """None as an empty cell, floats with 6 significant digits."""
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)


def run_meta(title: str, run: "Run") -> Dict[str, Any]:
    """What the records were measured with."""
    return {
        "title": title,
        "device": device_name(run),
        "torch": torch.__version__,
        "torchvision": getattr(torchvision, "__version__", None),
        "mmops_library": str(getattr(mmops, "library_path", "?")),
        "iters": run.iters,
        "warmup": run.warmup,
        "argv": sys.argv[1:],
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


@dataclass(frozen=True)
class ListOption:
    """A comma-separated option --<name> of `choices` (None: any value, through
    `convert`), with its defaults on cuda and on cpu."""

    name: str
    choices: Optional[Sequence[str]]
    cuda: Sequence
    cpu: Sequence
    looped: bool = True  # False: bench gets the whole list (and loops itself)
    convert: Callable[[str], Any] = str

    @property
    def help(self) -> str:
        cuda, cpu = ",".join(map(str, self.cuda)), ",".join(map(str, self.cpu))
        default = cuda if cuda == cpu else f"{cuda} on cuda, {cpu} on cpu"
        of = f" of {','.join(self.choices)}" if self.choices is not None else ""
        return f"comma-separated{of} (default: {default})"


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
    backward: bool = True,
    op: Optional[str] = None,
    extra_baselines: Sequence[Tuple[str, Optional[str], Optional[str]]] = (),
) -> int:
    """A benchmark script's main(): parses the run options (add_run_arguments;
    iters / warmup: the (cuda, cpu) defaults) and the list options, prints the
    header (print_header: title, baseline, notes, case_line(case) per case),
    calls bench(case, *option values, run=, timer=, problems=) (a row or a list
    of rows) for every selected case (of cases = (cuda cases, cpu cases)) and
    every combination of option values (nested in `loop` order, names of
    `options`; default: as listed; an option with looped=False is passed whole),
    printing a progress line per row (stderr), then prints the table
    (print_fwd_bwd_table: labels, baseline, check, before, after, backward) and
    the problems, and writes --json / --csv (row_record: op, the op of rows
    without an "op" label, default the title's first word; extra_baselines).
    Returns the exit code."""
    parser = argparse.ArgumentParser(
        description=doc, epilog=COMMON_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser, iters=iters, warmup=warmup)
    for o in options:
        # parse_list raises argparse.ArgumentTypeError: argparse reports a bad item itself
        kind = functools.partial(parse_list, choices=o.choices, convert=o.convert)
        parser.add_argument(f"--{o.name}", type=kind, help=o.help)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    run = resolve_run(parser, args, iters=iters, warmup=warmup)
    selected = select_cases(parser, args.cases, cases[0] if run.cuda else cases[1])
    values = {o.name: getattr(args, o.name) or list(o.cuda if run.cuda else o.cpu) for o in options}
    order = list(loop or [o.name for o in options if o.looped])
    lines = [case_line(c) for c in selected] if case_line is not None else []
    print_header(title, run, baseline, notes, lines, with_torchvision)
    sys.stdout.flush()  # before the progress lines on stderr

    spec = RecordSpec(
        benchmark=Path(sys.argv[0]).stem.removeprefix("bench_") or title.split()[0],
        op=op or title.split()[0],
        labels=labels,
        baseline=baseline,
        backward=backward,
        extra_baselines=extra_baselines,
    )
    timer = Timer(run.device, run.iters, run.warmup)
    combos = list(itertools.product(*(values[name] for name in order)))
    total = len(selected) * len(combos)
    rows, records, problems = [], [], []
    for index, (case, combo) in enumerate(itertools.product(selected, combos), start=1):
        by_name = {**values, **dict(zip(order, combo))}
        started = time.perf_counter()
        result = bench(case, *(by_name[o.name] for o in options), run=run, timer=timer, problems=problems)
        new = result if isinstance(result, list) else [result]
        seconds = time.perf_counter() - started
        for row in new:
            records.append(row_record(row, spec, run))
            print(progress_line(index, total, records[-1], seconds), file=sys.stderr, flush=True)
        rows += new
        if run.cuda:
            torch.cuda.empty_cache()
    print()
    print_fwd_bwd_table(rows, labels, baseline, check, before, after, backward)
    if args.json:
        write_json(args.json, run_meta(title, run), records)
    if args.csv:
        write_csv(args.csv, records)
    return report_problems(problems)
