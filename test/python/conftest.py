"""Shared fixtures for the mmops Python tests.

Run from the repo root with e.g.
    PYTHONPATH=python MMOPS_LIBRARY=build/libmmops.so python -m pytest test/python
The repo's python/ folder is also put on sys.path here, so a plain
``python -m pytest test/python`` finds the package (which then looks for
build/libmmops.so itself).
"""

import contextlib
import os
import subprocess
import sys
import tempfile

import pytest
import torch

# keep hypothesis' cache out of the source tree
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "mmops-hypothesis"))
# A fresh inductor cache per test session: a cached graph compiled against an
# older build of libmmops (e.g. different fake-tensor strides) must not be reused.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mmops-inductor-"))

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
# Fallback after PYTHONPATH, so an explicit PYTHONPATH wins.
if os.path.join(REPO, "python") not in sys.path:
    sys.path.append(os.path.join(REPO, "python"))

import mmops  # noqa: E402  (registers torch.ops.mmops.*)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long test (deselect with -m 'not slow', e.g. under compute-sanitizer)")
    config.addinivalue_line(
        "markers", "cuda: needs a CUDA device (skipped without one; .ci/gpu_check.sh selects these with -m cuda)"
    )
    config.addinivalue_line(
        "markers",
        "multi_gpu(gpus=2): the multi-GPU suite (test_multi_gpu.py), skipped on a machine with fewer than `gpus` "
        "CUDA devices (.ci/gpu_check.sh multigpu runs it with -m multi_gpu)",
    )


def pytest_collection_modifyitems(config, items):
    available = torch.cuda.is_available()
    gpus = torch.cuda.device_count() if available else 0
    no_cuda = pytest.mark.skip(reason="no CUDA device on this machine")
    for item in items:
        multi_gpu = item.get_closest_marker("multi_gpu")
        if multi_gpu is not None:
            needed = multi_gpu.kwargs.get("gpus", 2)
            if gpus < needed:
                reason = f"multi_gpu: needs {needed} CUDA device{'s' * (needed > 1)}, this machine has {gpus}"
                item.add_marker(pytest.mark.skip(reason=reason))
        elif not available and item.get_closest_marker("cuda") is not None:
            item.add_marker(no_cuda)


# Every test that needs a GPU carries this marker (an alias of pytest.mark.cuda).
requires_cuda = pytest.mark.cuda

try:
    import torchvision  # noqa: F401

    HAS_TORCHVISION = True
except Exception:  # pragma: no cover - depends on the environment
    HAS_TORCHVISION = False

requires_torchvision = pytest.mark.skipif(not HAS_TORCHVISION, reason="torchvision is not importable")


@contextlib.contextmanager
def _switched(get, set_to, value):
    """Sets a global switch inside the block, restoring it after."""
    before = get()
    set_to(value)
    try:
        yield
    finally:
        set_to(before)


def strict_index_check(enabled):
    """Temporarily sets mmops' strict CUDA batch-index check."""
    return _switched(mmops.strict_index_check, mmops.set_strict_index_check, enabled)


def deterministic_algorithms():
    """Turns torch.use_deterministic_algorithms on inside the block, restoring it after."""
    return _switched(torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms, True)


# CPU atol/rtol used when comparing to the float64 reference.
TOL = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
    torch.bfloat16: dict(atol=5e-2, rtol=5e-2),
}


# The (input, rois) pairs of mmcv's tests/test_ops/test_roi_align.py and test_roi_pool.py
# (both files use the same ones); each test pairs them with its op's expected values.
MMCV_ROI_INPUTS = [
    ([[[[1.0, 2.0], [3.0, 4.0]]]], [[0.0, 0.0, 0.0, 1.0, 1.0]]),
    ([[[[1.0, 2.0], [3.0, 4.0]], [[4.0, 3.0], [2.0, 1.0]]]], [[0.0, 0.0, 0.0, 1.0, 1.0]]),
    (
        [[[[1.0, 2.0, 5.0, 6.0], [3.0, 4.0, 7.0, 8.0], [9.0, 10.0, 13.0, 14.0], [11.0, 12.0, 15.0, 16.0]]]],
        [[0.0, 0.0, 0.0, 3.0, 3.0]],
    ),
]


def assert_same_fwd_bwd(out, exp, xa, xb, grad_out, fwd_tol, bwd_tol):
    """out (computed from xa) equals exp (from xb) within fwd_tol, and after
    backward(grad_out) through both, xa.grad equals xb.grad within bwd_tol."""
    torch.testing.assert_close(out, exp, **fwd_tol)
    out.backward(grad_out)
    exp.backward(grad_out)
    torch.testing.assert_close(xa.grad, xb.grad, **bwd_tol)


def invalid_batch_index_inputs(seed):
    """CUDA features [2, 3, 8, 8], rois [8, 5] (after torch.manual_seed(seed)) whose
    rows `bad` have batch indices -1, 2 (= N), 100 and NaN, and an output gradient
    [8, 3, 2, 2]: returns (x, rois, bad, go)."""
    torch.manual_seed(seed)
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(8, 2, 8, 8, device="cuda")
    bad = [0, 3, 5, 6]
    for row, b in zip(bad, (-1.0, 2.0, 100.0, float("nan"))):
        rois[row, 0] = b
    go = torch.randn(8, 3, 2, 2, device="cuda")
    return x, rois, bad, go


def capture_cuda_graph(step, warmups=2):
    """Runs step() `warmups` times on a side stream, then captures one call in a
    CUDA graph: returns (graph, what the captured call returned)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmups):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    return graph, static


def random_rois(
    num_rois,
    batch,
    height,
    width,
    *,
    dtype=torch.float32,
    device="cpu",
    spatial_scale=1.0,
    extra=True,
    ordered=False,
    generator=None,
):
    """[K,5] rois in input-image coordinates (i.e. feature coords / spatial_scale).

    Boxes extend up to 30% outside the feature map. With ``extra`` the first rows
    are replaced by special boxes: tiny, degenerate (x1 == x2 / y1 == y2),
    reversed (x2 < x1), entirely outside, and covering the whole map.
    With ``ordered`` every box has x1 <= x2 and y1 <= y2.
    """
    size = torch.tensor([width, height, width, height], dtype=torch.float64)
    xy = torch.rand(num_rois, 4, dtype=torch.float64, generator=generator) * 1.6 - 0.3
    xy = xy * size
    if ordered:
        xy = torch.cat([torch.minimum(xy[:, :2], xy[:, 2:]), torch.maximum(xy[:, :2], xy[:, 2:])], 1)
    if extra:
        special = [
            [1.3, 2.1, 1.45, 2.2],  # tiny
            [2.3, 1.2, 2.3, 3.7],  # degenerate in x
            [0.7, 3.1, width - 1.3, 3.1],  # degenerate in y
            [width - 1.7, 0.6, 0.4, height - 0.8],  # x2 < x1
            [-9.3, -7.6, -3.2, -2.9],  # completely outside (top-left)
            [width + 2.2, 0.5, width + 6.1, 3.3],  # completely outside (right)
            [-0.9, -1.1, width + 0.7, height + 1.2],  # covers everything
        ]
        if ordered:
            special = [b for b in special if b[0] <= b[2] and b[1] <= b[3]]
        n = min(len(special), num_rois)
        xy[:n] = torch.tensor(special[:n], dtype=torch.float64)
    xy = xy / spatial_scale
    b = torch.randint(0, batch, (num_rois, 1), generator=generator).to(torch.float64)
    return torch.cat([b, xy], 1).to(dtype=dtype, device=device)


def with_batch_index(rois, row, value):
    """A copy of [K, 5] rois whose row `row` names the batch image `value`."""
    rois = rois.clone()
    rois[row, 0] = value
    return rois


def run_with_default_cpu_capability(module, function):
    """Runs module.function() in a child process where ATen's CPU capability is DEFAULT: the
    baseline builds of CPU loops that also exist for AVX2 / AVX-512 (kernels/common/cpu_simd.h)."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default", PYTHONPATH=os.pathsep.join(sys.path))
    env["MMOPS_LIBRARY"] = os.path.abspath(mmops.library_path)
    code = (
        "import torch\n"
        "assert torch.backends.cpu.get_cpu_capability() == 'DEFAULT'\n"
        f"import {module}\n"
        f"{module}.{function}()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
