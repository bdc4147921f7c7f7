"""Multi-GPU (issue 18): every op on a second device, a DDP training step, CUDA graphs on cuda:1.

On a machine with two GPUs (NVLink multicast off for NCCL):

    NCCL_NVLS_ENABLE=0 PYTHONPATH=python MMOPS_LIBRARY=build/libmmops.so \\
        python -m pytest -m multi_gpu test/python/test_multi_gpu.py -rs

(.ci/gpu_check.sh multigpu runs it when nvidia-smi lists two GPUs or more.) Every test carries the
markers `multi_gpu` and `cuda`; conftest skips a test whose `multi_gpu(gpus=n)` asks for more
GPUs than the machine has, saying how many it has. Without two GPUs the conformance cases are not
even imported (one placeholder test per group, skipped), so collecting this file stays cheap.

  - test_op_on_other_device: every ConformanceCase (every op of every test_*.py), in each of its
    dtypes (and channels_last in the first), forward and backward, with its inputs on cuda:1
    while the current device is cuda:0, and the reverse: the results equal those of the same op
    run on the current device (bitwise under torch.use_deterministic_algorithms(True); an op
    without a deterministic implementation, which raises there, runs without it and is compared
    within its case's cuda_tol); nothing is allocated on the current device
    (torch.cuda.memory_allocated and its peak, caching allocator) and, in the first dtype, every
    kernel runs on the inputs' device (torch.profiler: the device of each CUDA event);
  - test_spread_inputs_raise: every tensor argument of the op (and of its helper schemas
    _<op>_forward / _backward) alone on cuda:1, the others on cuda:0: a RuntimeError naming the
    op and the argument or both devices, in a worker process (a crash ends that process only);
  - test_cuda_graph_on_second_device: roi_align (forward and backward), deform_conv2d,
    ms_deform_attn captured on cuda:1: replay == eager, also after the inputs change in place;
    nms (a data-dependent output size: it synchronises) either replays == eager or refuses the
    capture with a RuntimeError and leaves cuda:1 usable;
  - test_ddp_training_step: a small RoI head (conv, deform_conv2d, roi_align, conv, linear,
    sigmoid_focal_loss) in DistributedDataParallel, 2 processes (NCCL, one GPU each; with a
    single GPU: gloo, both on it), one SGD step: the loss, the gradients and the updated
    parameters equal one process's step on the concatenated batch (float64, rtol 1e-9).
"""

import contextlib
import multiprocessing
import os
import time
import warnings

import _multi_gpu_worker as worker_module
import pytest
import torch
from conformance import (
    _grad_names,
    _with_layout,
    assert_same,
    backward,
    cotangents,
    flat_tensors,
    full_float32_precision,
    grad_positions,
    layouts,
    make_leaves,
    to_device,
)
from conftest import capture_cuda_graph, deterministic_algorithms

GPUS = torch.cuda.device_count()
pytestmark = [pytest.mark.multi_gpu, pytest.mark.cuda]

# (device of the inputs, current device)
DIRECTIONS = [("cuda:1", "cuda:0"), ("cuda:0", "cuda:1")]
SPREAD_CALL_TIMEOUT_S = 120
DDP_TIMEOUT_S = 300
DDP_TOL = dict(rtol=1e-9, atol=1e-12)  # float64: only the summation order differs
BITWISE = dict(rtol=0.0, atol=0.0, equal_nan=True)


def _cases():
    from conformance import all_cases

    return all_cases()


def _placeholder(count: int):
    return [pytest.param(*([None] * count), id="not-collected")]


# --------------------------------------------------------------------------- every op on either GPU


def case_dtypes(case):
    """The dtypes of the case's CUDA == CPU test, or its own dtype where it has none."""
    return list(case.dtypes) or [case.dtype]


def case_samples(case, dtype):
    return list(case.cuda_samples(dtype)) if case.cuda_samples else [case.sample("cpu", dtype, 0)]


def _op_params():
    if GPUS < 2:
        return _placeholder(4)
    params = []
    for case in _cases():
        dtypes = case_dtypes(case)
        runs = [(dtype, "contiguous") for dtype in dtypes] + [(dtypes[0], "channels_last")] * (
            "channels_last" in layouts(case)
        )
        for dtype, layout in runs:
            for run, current in DIRECTIONS:
                pid = f"{case.name}-{str(dtype)[6:]}-{layout}-on_{run[-1]}_current_{current[-1]}"
                params.append(pytest.param(case, dtype, layout, (run, current), id=pid))
    return params


def op_results(case, samples, layout: str, device: str) -> list:
    """The op on `device` for each sample (its feature maps in `layout`): [(sample index, what,
    tensor)] for every output, then every gradient (of sum(output * fixed random cotangent))."""
    results = []
    for n, sample in enumerate(samples):
        positions = grad_positions(case, sample.args)
        args = _with_layout(to_device(sample.args, device), case.feature_args, layout)
        args, leaves = make_leaves(args, positions)
        outputs = flat_tensors([case.op(*args)])
        results += [(n, f"output {i}", o.detach()) for i, o in enumerate(outputs)]
        if leaves and any(o.requires_grad for o in outputs):
            grads = backward(outputs, leaves, cotangents(outputs, seed=n))
            names = _grad_names(case, sample.args, positions)
            results += [(n, f"grad {name}", g) for name, g in zip(names, grads)]
    return results


def deterministic_if_possible(fn):
    """fn() under torch.use_deterministic_algorithms(True): (result, True); where that raises
    (an op that alerts: no deterministic implementation), fn() without it: (result, False)."""
    try:
        with deterministic_algorithms():
            return fn(), True
    except RuntimeError as error:
        if "deterministic" not in str(error):
            raise
    return fn(), False


@contextlib.contextmanager
def deterministic_cublas():
    """cuBLAS' deterministic workspace (deform_conv2d's and masked_conv2d's GEMMs), as
    torch.use_deterministic_algorithms(True) requires."""
    before = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = before or ":4096:8"
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUBLAS_WORKSPACE_CONFIG"]


class DeviceWatch:
    """What happens on the devices while the block runs on `device`: allocations on `other` (the
    current device; allocated bytes before and after, and the peak) and, with profile=True, the
    devices of the CUDA kernels and copies (torch.profiler)."""

    def __init__(self, device: str, other: str, profile: bool):
        self.device, self.other, self.profile = torch.device(device), torch.device(other), profile
        self.events = []  # (device index, name) of every CUDA event

    def __enter__(self):
        for d in (self.device, self.other):
            torch.cuda.synchronize(d)
        self.before = torch.cuda.memory_allocated(self.other)
        torch.cuda.reset_peak_memory_stats(self.other)
        self.profiler = None
        if self.profile:
            self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            self.profiler.__enter__()
        return self

    def __exit__(self, *exc):
        for d in (self.device, self.other):
            torch.cuda.synchronize(d)
        if self.profiler is not None:
            self.profiler.__exit__(*exc)
            if exc[0] is None:
                self.events = [
                    (e.device_index, e.name)
                    for e in self.profiler.events()
                    if e.device_type == torch.autograd.DeviceType.CUDA
                ]
        self.after = torch.cuda.memory_allocated(self.other)
        self.peak = torch.cuda.max_memory_allocated(self.other)
        return False

    def check(self, what: str):
        other = f"{self.other} (the current device)"
        assert self.after == self.before, f"{what}: {self.after - self.before} bytes stay allocated on {other}"
        assert self.peak == self.before, f"{what}: {self.peak - self.before} bytes allocated at the peak on {other}"
        if self.profile:
            if not self.events:
                warnings.warn(f"{what}: the profiler recorded no CUDA event: kernel devices not checked")
            wrong = sorted({name for index, name in self.events if index != self.device.index})
            assert not wrong, f"{what}: CUDA work on another device than {self.device}: {wrong[:10]}"


def bitwise_equal(actual: list, expected: list) -> bool:
    """op_results of two runs: the same tensors bit for bit (NaN == NaN)."""
    for (_, _, a), (_, _, e) in zip(actual, expected):
        try:
            assert_same(a, e, BITWISE, "")
        except AssertionError:
            return False
    return len(actual) == len(expected)


def compare_on_devices(case, dtype, layout: str, run: str, current: str, profile: bool = True):
    """The op with its inputs on `run` while `current` is the current device, against the op
    with its inputs on `current`: equal outputs and gradients, nothing allocated on `current`,
    and (profile) every kernel on `run`. Equal: bitwise under torch.use_deterministic_algorithms
    (True); within case.cuda_tol for an op that raises there (no deterministic implementation)
    and, with a warning, for one whose two runs on `current` differ although it did not raise.
    Returns whether the comparison was bitwise."""
    samples = case_samples(case, dtype)
    where = f"{case.name} {str(dtype)[6:]} {layout} on {run}, current device {current}"
    on_current = torch.cuda.device(current) if torch.device(current).type == "cuda" else contextlib.nullcontext()
    with full_float32_precision(), deterministic_cublas(), on_current:
        expected, deterministic = deterministic_if_possible(lambda: op_results(case, samples, layout, current))
        mode = deterministic_algorithms() if deterministic else contextlib.nullcontext()
        watch = DeviceWatch(run, current, profile) if torch.device(run).type == "cuda" else None
        with mode, watch or contextlib.nullcontext():
            actual = op_results(case, samples, layout, run)
        if deterministic and not bitwise_equal(actual, expected):
            with deterministic_algorithms():  # is the op reproducible on one device?
                again = op_results(case, samples, layout, current)
            if not bitwise_equal(again, expected):
                warnings.warn(
                    f"{where}: two runs on {current} differ under torch.use_deterministic_algorithms(True), "
                    "which did not raise: compared within the case's tolerance"
                )
                deterministic = False
    if watch is not None:
        watch.check(where)
    assert [(n, w) for n, w, _ in actual] == [(n, w) for n, w, _ in expected], where
    for (n, what, a), (_, _, e) in zip(actual, expected):
        assert a.device == torch.device(run), f"{where}, sample {n}, {what}: on {a.device}"
        tol = BITWISE if deterministic else case.cuda_tol(dtype, what, e, samples[n])
        assert_same(a, e, tol, f"{where}, sample {n}, {what}{'' if deterministic else ' (nondeterministic)'}")
    return deterministic


@pytest.mark.parametrize("case, dtype, layout, devices", _op_params())
def test_op_on_other_device(case, dtype, layout, devices):
    run, current = devices
    compare_on_devices(
        case, dtype, layout, run, current, profile=(dtype, layout) == (case_dtypes(case)[0], "contiguous")
    )


# --------------------------------------------------------------------------- inputs on two GPUs


class SpreadWorker:
    """A spawned process that calls ops with one input moved to another device
    (_multi_gpu_worker.serve_spread); restarted after a crash, a hang or a CUDA error."""

    def __init__(self, home: str, away: str):
        self.home, self.away, self.process = home, away, None

    def start(self):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=worker_module.serve_spread, args=(child, self.home, self.away), daemon=True)
        self.process.start()
        assert self.conn.poll(300) and self.conn.recv() == "ready", "the spread worker did not start"

    def _restart(self, kill: bool):
        if kill:
            self.process.kill()
        self.process.join()
        self.process = None

    def call(self, request):
        """("raised", type, message) / ("returned", output devices) / ("cuda_error", message, reply)
        / ("crash", exit code) / ("hang", seconds)."""
        if self.process is None or not self.process.is_alive():
            self.start()
        self.conn.send(request)
        if not self.conn.poll(SPREAD_CALL_TIMEOUT_S):
            self._restart(kill=True)
            return ("hang", SPREAD_CALL_TIMEOUT_S)
        try:
            reply = self.conn.recv()
        except EOFError:
            self.process.join(30)
            code = self.process.exitcode
            self._restart(kill=code is None)
            return ("crash", code)
        if reply[0] == "cuda_error":  # sticky: a fresh process for the next call
            self._restart(kill=True)
        return reply

    def stop(self):
        if self.process is not None and self.process.is_alive():
            self.conn.send(None)
            self.process.join(10)


@pytest.fixture(scope="module")
def spread_worker():
    w = SpreadWorker("cuda:0", "cuda:1")
    yield w
    w.stop()


# (case, schema, argument) that the op does not read, so its device is not checked: a spread
# input there is no error (the results do not depend on it)
UNREAD_ARGUMENTS = {
    # pool_mode "avg": the backward takes the forward's argmax but reads it only for "max"
    ("roi_align_avg_aligned", "mmops::_roi_align_backward", "argmax"),
    ("multi_level_roi_align_avg_aligned", "mmops::_multi_level_roi_align_backward", "argmax"),
}


def judge_spread(reply, arg: str, home: str, away: str):
    """None when the reply is a clear error, else what is wrong with it. Clear: a RuntimeError
    naming the op ("mmops::") and either both devices or the argument and the word "device"."""
    kind = reply[0]
    if kind == "raised":
        _, error_type, message = reply
        both_devices = home in message and away in message
        argument = arg.split("[")[0] in message and "device" in message.lower()
        if error_type == "RuntimeError" and "mmops::" in message and (both_devices or argument):
            return None
        return f"unclear error: {error_type}: {message}"
    if kind == "returned":
        return f"no error: it returned outputs on {reply[1]} (a launch on the wrong device)"
    if kind == "cuda_error":
        return f"a CUDA error after the call: {reply[1]} (the call itself: {reply[2]})"
    return f"the worker process ended: {kind} {reply[1]}"


def spread_problems(worker, case, home: str, away: str) -> list:
    """Every tensor argument of every call of the case (the op, its helper schemas) alone on
    `away`: the problems found, one line each."""
    problems, spread = [], 0
    for index, (op, args) in enumerate(worker_module.spread_calls(case, home)):
        slots = worker_module.tensor_slots(args)
        if len(slots) < 2:  # nothing to spread
            continue
        schema = op.default._schema
        for slot in slots:
            p, j = slot
            arg = schema.arguments[p].name + ("" if j is None else f"[{j}]")
            reply = worker.call((case.name, index, slot))
            spread += 1
            problem = judge_spread(reply, arg, home, away)
            unread = (case.name, schema.name, arg) in UNREAD_ARGUMENTS
            if unread and reply[0] == "returned" and all(d == home for d in reply[1]):
                continue
            if problem is not None:
                problems.append(f"{schema.name}, argument {arg} on {away} (the others on {home}): {problem}")
    return problems, spread


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in _cases()] if GPUS >= 2 else _placeholder(1))
def test_spread_inputs_raise(spread_worker, case):
    problems, _ = spread_problems(spread_worker, case, "cuda:0", "cuda:1")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- CUDA graphs on cuda:1

GRAPH_CASES = ["roi_align_avg_aligned", "deform_conv2d", "ms_deform_attn", "nms"]  # nms last (see below)


def _graph_params():
    if GPUS < 2:
        return _placeholder(1)
    cases = {c.name: c for c in _cases()}
    return [pytest.param(cases[name], id=name) for name in GRAPH_CASES]


def graph_step(case, args, positions, cots):
    """The op forward and (where it has differentiable inputs) backward: outputs, then gradients."""
    call_args, leaves = make_leaves(args, positions)
    outputs = flat_tensors([case.op(*call_args)])
    return [o.detach() for o in outputs] + backward(outputs, leaves, cots)


def assert_same_steps(case, sample, names, actual, expected, deterministic, where):
    assert len(actual) == len(expected) == len(names), where
    for name, a, e in zip(names, actual, expected):
        tol = BITWISE if deterministic else case.cuda_tol(case.dtype, name, e, sample)
        assert_same(a, e, tol, f"{where}, {name}")


def assert_replay_matches_eager(case, sample, names, graph, static, step, deterministic, where):
    graph.replay()
    torch.cuda.synchronize()
    assert_same_steps(case, sample, names, static, step(), deterministic, where)


@pytest.mark.parametrize("case", _graph_params())
def test_cuda_graph_on_second_device(case):
    device = "cuda:1"
    sample = case.sample("cpu", case.dtype, 0)
    with full_float32_precision(), deterministic_cublas(), torch.cuda.device(device):
        args = list(to_device(sample.args, device))
        positions = grad_positions(case, args)
        call_args, _ = make_leaves(args, positions)
        outputs = flat_tensors([case.op(*call_args)])
        cots = cotangents(outputs) if positions else []
        names = [f"output {i}" for i in range(len(outputs))]
        names += [f"grad {n}" for n in _grad_names(case, args, positions)]
        step = lambda: graph_step(case, args, positions, cots)  # noqa: E731
        before, deterministic = deterministic_if_possible(step)
        mode = deterministic_algorithms() if deterministic else contextlib.nullcontext()
        with mode:
            try:
                graph, static = capture_cuda_graph(step)
            except RuntimeError as error:
                if not case.data_dependent:
                    raise
                # an op whose output size depends on the data reads it back (a sync): no
                # capture; the refusal must leave the device usable
                assert "captur" in str(error).lower(), str(error)
                torch.cuda.synchronize()
                assert_same_steps(case, sample, names, step(), before, deterministic, "eager after the refusal")
                return
            assert all(t.device == torch.device(device) for t in static)
            assert_replay_matches_eager(case, sample, names, graph, static, step, deterministic, "same inputs")
            with torch.no_grad():  # new values in place: the replay reads them
                for p in positions:
                    for t in args[p] if isinstance(args[p], list) else [args[p]]:
                        t.mul_(0.75).add_(0.05)
            assert_replay_matches_eager(case, sample, names, graph, static, step, deterministic, "changed inputs")


# --------------------------------------------------------------------------- DDP


def run_ddp(backend: str, devices: list, tmp_path, timeout_s: float = DDP_TIMEOUT_S):
    """Spawns len(devices) DDP ranks (_multi_gpu_worker.ddp_rank) and returns what each saved."""
    world = len(devices)
    context = torch.multiprocessing.start_processes(
        worker_module.ddp_rank,
        args=(world, backend, devices, str(tmp_path / "store"), str(tmp_path)),
        nprocs=world,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + timeout_s
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for p in context.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail(f"the DDP ranks did not finish in {timeout_s} s")
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]


def check_ddp_against_reference(ranks: list, reference, tol: dict = DDP_TOL):
    loss, grads, params = reference
    assert_same(sum(r["loss"] for r in ranks) / len(ranks), loss, tol, "the mean of the ranks' losses")
    for name, g in grads.items():
        assert g.abs().sum() > 0, f"{name}: zero gradient in the reference: nothing compared"
    for r, saved in enumerate(ranks):
        assert saved["grads"].keys() == grads.keys()
        for name in grads:
            assert_same(saved["grads"][name], grads[name], tol, f"rank {r}, gradient of {name}")
            assert_same(saved["params"][name], params[name], tol, f"rank {r}, {name} after the step")
            # the ranks agree exactly: the same averaged gradient, the same step
            assert torch.equal(saved["params"][name], ranks[0]["params"][name]), f"rank {r}, {name} != rank 0's"


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend, devices",
    [
        pytest.param("nccl", ["cuda:0", "cuda:1"], id="nccl-two_gpus"),
        pytest.param("gloo", ["cuda:0", "cuda:0"], id="gloo-one_gpu", marks=pytest.mark.multi_gpu(gpus=1)),
    ],
)
def test_ddp_training_step(backend, devices, tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast (the ranks inherit it)
    ranks = run_ddp(backend, devices, tmp_path)
    with full_float32_precision():
        reference = worker_module.reference_step(len(devices), "cuda:0")
    check_ddp_against_reference(ranks, reference)
