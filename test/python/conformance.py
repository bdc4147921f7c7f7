"""The conformance suite: what every mmops op does, run for each ConformanceCase.

A test file declares its op's cases and gets the whole suite with one class:

    class TestRoIAlignConformance(ConformanceSuite):
        cases = CASES

For every case the suite runs
  - torch.library.opcheck on the sample and the empty samples, inputs with and
    without requires_grad, and on the helper schemas (_<op>_forward / _backward);
  - the fake kernel: an unbacked output size exactly for data-dependent sizes;
  - torch.compile(fullgraph=True, dynamic=True) of the case's module == eager,
    forward and backward, on two sizes without a recompile;
  - torch.export of the module: runs, == eager on both sizes, saves and loads;
  - TorchScript: the module scripted, saved, loaded == eager, forward and backward
    (test/cpp/make_scripted_cases.py saves the same for the C++ test, which loads
    it with torch::jit::load);
  - CUDA == CPU in every dtype and layout, forward and gradients (marked cuda);
  - empty inputs: correctly shaped empty outputs and zero gradients;
  - the common bad inputs: RuntimeError with the message checked.

A case is one configuration of one op; several cases of an op share its module
(give it to one of them). Everything specific to an op (references, known
vectors, gradcheck, edge cases, torchvision) stays in its own test file.
"""

import contextlib
import dataclasses
import glob
import importlib
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import pytest
import torch
from conftest import TOL, with_batch_index
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols
from torch.utils._pytree import tree_map_only

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
LOW_PRECISION = (torch.float16, torch.bfloat16)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
# torch.library.opcheck's default tests
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@dataclasses.dataclass
class Sample:
    """One call of the op: its positional arguments (tensors, lists of tensors, options)."""

    args: tuple
    # compare the gradients in the CUDA == CPU test (False where 16-bit argmax
    # near-ties may pick another sample on the two devices)
    grads: bool = True
    # empty samples: the expected shape of every output
    out_shapes: Optional[List[Tuple[int, ...]]] = None


@dataclasses.dataclass
class BadInput:
    """A bad call: make(*the case's sample args) -> bad args; the op raises a RuntimeError
    whose message matches the regex `match` (re.search) and names the op ("mmops::<op>: ")."""

    make: Callable[..., tuple]
    match: str
    meta: bool = False  # raises on meta tensors too (what torch.compile / export see)
    cuda: bool = False  # make() moves tensors to CUDA itself (a device mismatch)


def roi_pooling_bad_inputs(op: str) -> Dict[str, "BadInput"]:
    """The bad inputs of an op called as op(input, rois [K, 5], output_size, spatial_scale), each
    expected to raise `mmops::<op>: ...` naming the argument (roi_pool, prroi_pool)."""

    def message(text):
        return f"mmops::{op}: .*{text}"

    def call(change):  # the sample's input and rois changed, 2 x 2 bins, scale 1
        return lambda x, r, *rest: change(x, r)

    bad = {
        "input_3d": (lambda x, r: (x[0], r, [2, 2], 1.0), "input"),
        "rois_1d": (lambda x, r: (x, r[0], [2, 2], 1.0), "rois"),
        "rois_4_cols": (lambda x, r: (x, r[:, :4], [2, 2], 1.0), "rois"),
        "rois_dtype": (lambda x, r: (x, r.double(), [2, 2], 1.0), "rois"),
        "int_input": (lambda x, r: (x.int(), r.int(), [2, 2], 1.0), "input"),
        "output_h_zero": (lambda x, r: (x, r, [0, 2], 1.0), "output_size"),
        "output_w_negative": (lambda x, r: (x, r, [2, -1], 1.0), "output_size"),
        "spatial_scale_zero": (lambda x, r: (x, r, [2, 2], 0.0), "spatial_scale"),
        "spatial_scale_nan": (lambda x, r: (x, r, [2, 2], float("nan")), "spatial_scale"),
        "spatial_scale_inf": (lambda x, r: (x, r, [2, 2], float("inf")), "spatial_scale"),
    }
    out = {name: BadInput(call(change), message(arg)) for name, (change, arg) in bad.items()}
    for v in (-1.0, 2.0, 7.0, float("nan")):
        out[f"batch_index_{v}"] = BadInput(
            call(lambda x, r, v=v: (x, with_batch_index(r, 2, v), [2, 2], 1.0)), f"{op}: the batch index"
        )
    return out


def _default_tolerance(dtype, what, expected, sample):
    return TOL[dtype]


def magnitude_tolerance(dtype, what, expected, sample=None):
    """TOL[dtype] with atol relative to the largest |expected| (at least 1): for values that sum
    many terms (an input gradient that many rois or bins scatter into), whose float rounding
    follows the largest values rather than each element."""
    tol = dict(TOL[dtype])
    tol["atol"] *= max(1.0, expected.abs().max().item() if expected.numel() else 0.0)
    return tol


@dataclasses.dataclass
class ConformanceCase:
    name: str
    op: Any  # torch.ops.mmops.<op>
    # sample(device, dtype, size) -> Sample; size 1 gives other sizes (every dim that may
    # change does), for torch.compile(dynamic=True) and torch.export's dynamic dims
    sample: Callable[[str, torch.dtype, int], Sample]
    dtype: torch.dtype = torch.float32  # dtype of the CPU tests (opcheck, graphs, empty, bad inputs)
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES  # CUDA == CPU; () for none
    grad_args: Sequence[int] = ()  # positions of the differentiable arguments
    feature_args: Sequence[int] = ()  # positions of NCHW maps (or lists of maps): also channels_last
    empty: Optional[Callable[[str, torch.dtype], List[Sample]]] = None  # samples with out_shapes
    bad_inputs: Dict[str, BadInput] = dataclasses.field(default_factory=dict)
    data_dependent: bool = False  # the output size depends on the data (a Python fake kernel)
    # a scriptable nn.Module using the op, forward(*the sample's tensors and lists of tensors);
    # torch.compile, torch.export and TorchScript (Python and C++) run it
    module: Optional[Callable[[], torch.nn.Module]] = None
    # what runs the module: drop "compile" / "export" where torch itself cannot take it
    module_tests: Sequence[str] = ("compile", "export", "torchscript")
    # helpers(sample) -> [(torch.ops.mmops._<op>_forward / _backward, args)] to opcheck
    helpers: Optional[Callable[[Sample], List[Tuple[Any, tuple]]]] = None
    # CPU samples that CUDA is compared with CPU on, for a dtype; default: the sample
    cuda_samples: Optional[Callable[[torch.dtype], Iterable[Sample]]] = None
    # cuda_tol(dtype, what, expected, sample) -> dict(rtol=, atol=); what: "output <i>" or
    # "grad <argument name>"
    cuda_tol: Callable[..., dict] = _default_tolerance
    cpu_float32_reference: bool = False  # 16-bit CUDA results against CPU float32 of the same values
    channels_last_output: bool = False  # output 0 takes the memory format of the first feature map
    nonzero_grads: bool = False  # CUDA == CPU: every CPU gradient holds a non-zero (not a vacuous comparison)
    compile_tol: dict = dataclasses.field(default_factory=lambda: dict(rtol=1e-5, atol=1e-5))
    # the scripted, loaded and exported module against eager: outputs, gradients
    script_tol: dict = dataclasses.field(default_factory=lambda: dict(rtol=0.0, atol=0.0))
    script_grad_tol: dict = dataclasses.field(default_factory=lambda: dict(rtol=0.0, atol=0.0))

    def __repr__(self):
        return f"ConformanceCase({self.name})"

    @property
    def qualified_name(self) -> str:
        return self.op._qualified_op_name  # "mmops::roi_align"

    def arg_name(self, position: int) -> str:
        return self.op.default._schema.arguments[position].name


# --------------------------------------------------------------------------- inputs and outputs


def is_tensor_list(value) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(v, Tensor) for v in value)


def module_inputs(args) -> list:
    """The module's forward arguments: the tensors and lists of tensors among the op's arguments."""
    return [a for a in args if isinstance(a, Tensor) or is_tensor_list(a)]


def module_positions(args, positions) -> List[int]:
    """Where the op's arguments at `positions` stand among module_inputs(args)."""
    kept = [i for i, a in enumerate(args) if isinstance(a, Tensor) or is_tensor_list(a)]
    return [kept.index(p) for p in positions if p in kept]


def grad_positions(case: ConformanceCase, args) -> List[int]:
    """The positions of the differentiable arguments that hold a tensor (or a list of them)."""
    return [p for p in case.grad_args if isinstance(args[p], Tensor) or is_tensor_list(args[p])]


def module_call(case: ConformanceCase, sample: Sample) -> Tuple[list, List[int]]:
    """The module's inputs for a sample, and the positions among them of the differentiable ones."""
    return module_inputs(sample.args), module_positions(sample.args, grad_positions(case, sample.args))


def flat_tensors(values) -> List[Tensor]:
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(flat_tensors(v))
    return out


def make_leaves(args, positions) -> Tuple[list, List[Tensor]]:
    """args with the tensors at `positions` (each element of a list) made fresh leaves that
    require grad (detach: strides and storage offsets stay), and the list of those leaves."""
    args, leaves = list(args), []
    for p in positions:
        if isinstance(args[p], Tensor):
            args[p] = args[p].detach().requires_grad_(True)
            leaves.append(args[p])
        else:
            args[p] = [t.detach().requires_grad_(True) for t in args[p]]
            leaves.extend(args[p])
    return args, leaves


def cotangents(outputs, seed: int = 0) -> List[Optional[Tensor]]:
    """A fixed random cotangent for every output that requires grad (None for the others);
    1 for a scalar (a random factor would only scale its gradient)."""
    g = torch.Generator().manual_seed(seed)
    cots = []
    for o in outputs:
        cot = torch.randn(o.shape, generator=g, dtype=torch.float64) if o.dim() else torch.ones((), dtype=torch.float64)
        cots.append(cot.to(device=o.device, dtype=o.dtype) if o.requires_grad else None)
    return cots


def backward(outputs, leaves, cots) -> List[Tensor]:
    """Gradients of sum(output * cotangent) w.r.t. the leaves."""
    pairs = [(o, c) for o, c in zip(outputs, cots) if c is not None]
    if not leaves:
        return []
    assert pairs, "no output requires grad"
    return list(torch.autograd.grad([o for o, _ in pairs], leaves, [c for _, c in pairs]))


def forward_backward(fn, args, positions, seed: int = 0):
    """fn(*args) with the arguments at `positions` as leaves: its outputs and, for every output
    that requires grad, its gradients (of sum(output * a fixed random cotangent)) w.r.t. the
    leaves, as a list of (what, gradient; zeros where the output does not use that leaf).
    One forward per output: a compiled backward cannot retain its graph."""
    call_args, leaves = make_leaves(args, positions)
    outputs = flat_tensors([fn(*call_args)])
    grads = []
    for i, cot in enumerate(cotangents(outputs, seed) if leaves else []):
        if cot is not None:
            call_args, leaves = make_leaves(args, positions)
            out = flat_tensors([fn(*call_args)])[i]
            per_leaf = torch.autograd.grad(out, leaves, cot, allow_unused=True, materialize_grads=True)
            grads += [(f"gradient of output {i} w.r.t. input {j}", g) for j, g in enumerate(per_leaf)]
    return [o.detach() for o in outputs], grads


def assert_same_results(actual, expected, tol: dict, grad_tol: dict, where: str):
    """forward_backward's results against the expected ones."""
    (out, grads), (exp, exp_grads) = actual, expected
    assert len(out) == len(exp) and len(grads) == len(exp_grads), where
    for i, (o, e) in enumerate(zip(out, exp)):
        assert_same(o, e, tol, f"{where}, output {i}")
    for (what, g), (_, e) in zip(grads, exp_grads):
        assert_same(g, e, grad_tol, f"{where}, {what}")


def assert_gradients_reach_every_input(results, where: str):
    """forward_backward's gradients: every input that requires grad gets a non-zero one from
    some output (else the comparisons of its gradients say nothing)."""
    reached = {}
    for what, g in results[1]:
        leaf = what.rsplit(" ", 1)[1]
        reached[leaf] = reached.get(leaf, False) or g.numel() == 0 or bool(g.abs().sum() > 0)
    assert all(reached.values()), f"{where}: no gradient reaches inputs {[k for k, v in reached.items() if not v]}"


def assert_same(actual: Tensor, expected: Tensor, tol: dict, what: str):
    """Same shape and dtype; integer tensors equal, floating ones close (compared in float64)."""
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    actual, expected = actual.detach().cpu(), expected.detach().cpu()
    if not expected.is_floating_point():
        assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"
    else:
        torch.testing.assert_close(actual.double(), expected.double(), **tol, msg=lambda m: f"{what}: {m}")


def to_device(args, device):
    return tree_map_only(Tensor, lambda t: t.to(device), tuple(args))


@contextlib.contextmanager
def full_float32_precision():
    """No TF32 in cuDNN / cuBLAS (deform_conv2d's 1x1 convolution): CUDA float32 == CPU float32."""
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


# --------------------------------------------------------------------------- CUDA == CPU


def layouts(case: ConformanceCase) -> List[str]:
    return ["contiguous", "channels_last"] if case.feature_args else ["contiguous"]


def _with_layout(args, positions, layout):
    if layout == "contiguous":
        return list(args)
    args = list(args)
    to_cl = lambda t: t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t  # noqa: E731
    for p in positions:
        args[p] = to_cl(args[p]) if isinstance(args[p], Tensor) else [to_cl(t) for t in args[p]]
    return args


def _compare(actual: Tensor, reference: Tensor, dtype, ref_dtype, tol: dict, what: str):
    """A result in `dtype` against the CPU reference computed in `ref_dtype`."""
    if reference.is_floating_point() and ref_dtype != dtype:
        assert actual.dtype == dtype, f"{what}: dtype {actual.dtype} != {dtype}"
        actual = actual.to(ref_dtype)
    assert_same(actual, reference, tol, what)


def _grad_names(case: ConformanceCase, args, positions) -> List[str]:
    names = []
    for p in positions:
        name = case.arg_name(p)
        names += [name] if isinstance(args[p], Tensor) else [f"{name}[{j}]" for j in range(len(args[p]))]
    return names


def compare_devices(case: ConformanceCase, dtype: torch.dtype, layout: str, device: str = "cuda"):
    """The op on `device` (feature maps in `layout`) against the CPU, forward and gradients,
    on every sample of case.cuda_samples(dtype)."""
    ref_dtype = torch.float32 if case.cpu_float32_reference and dtype in LOW_PRECISION else dtype
    samples = case.cuda_samples(dtype) if case.cuda_samples else [case.sample("cpu", dtype, 0)]
    with full_float32_precision():
        for n, sample in enumerate(samples):
            where = f"sample {n}"
            positions = grad_positions(case, sample.args)
            dev_args = _with_layout(to_device(sample.args, device), case.feature_args, layout)
            dev_args, dev_leaves = make_leaves(dev_args, positions)
            ref_args = tree_map_only(
                Tensor, lambda t: t.to(ref_dtype) if t.is_floating_point() else t, tuple(sample.args)
            )
            ref_args, ref_leaves = make_leaves(ref_args, positions)
            dev_out = flat_tensors([case.op(*dev_args)])
            ref_out = flat_tensors([case.op(*ref_args)])
            assert len(dev_out) == len(ref_out), where
            for i, (out, ref) in enumerate(zip(dev_out, ref_out)):
                assert out.device.type == device, f"{where}: output {i} is on {out.device}"
                _compare(
                    out, ref, dtype, ref_dtype, case.cuda_tol(dtype, f"output {i}", ref, sample), f"{where}, output {i}"
                )
            if case.channels_last_output and dev_out[0].dim() == 4:  # only 4-D maps took the layout
                fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
                assert dev_out[0].is_contiguous(memory_format=fmt), f"{where}: output 0 is not {layout}"
            if not positions or not sample.grads:
                continue
            cots = cotangents(dev_out, seed=n)
            dev_grads = backward(dev_out, dev_leaves, cots)
            ref_grads = backward(
                ref_out, ref_leaves, [None if c is None else c.cpu().to(r.dtype) for c, r in zip(cots, ref_out)]
            )
            for name, grad, ref, leaf in zip(
                _grad_names(case, sample.args, positions), dev_grads, ref_grads, dev_leaves
            ):
                what = f"{where}, grad {name}"
                assert grad.device.type == device and grad.shape == leaf.shape, what
                if case.nonzero_grads:
                    assert ref.abs().sum() > 0, f"{what} is zero on the CPU: nothing compared"
                _compare(grad, ref, dtype, ref_dtype, case.cuda_tol(dtype, f"grad {name}", ref, sample), what)


# --------------------------------------------------------------------------- the suite


def _over(params_of: Callable[[ConformanceCase], list], names: Sequence[str] = ()):
    """Parametrises a suite test over (case, *names) for every case of the suite:
    params_of(case) gives the pytest.param()s of that case ([] where it does not apply)."""

    def mark(test):
        test.conformance_params = (tuple(names), params_of)
        return test

    return mark


def _once(select: Callable[[ConformanceCase], bool] = lambda case: True):
    return _over(lambda case: [pytest.param()] if select(case) else [])


class ConformanceSuite:
    """Subclass it as Test<Op>Conformance with `cases = [...]`."""

    cases: List[ConformanceCase] = []

    def pytest_generate_tests(self, metafunc):
        names, params_of = getattr(metafunc.function, "conformance_params", ((), lambda case: [pytest.param()]))
        params = []
        for case in self.cases:
            for p in params_of(case):
                pid = "-".join(str(v) for v in (case.name, p.id) if v)
                params.append(pytest.param(case, *p.values, id=pid, marks=p.marks))
        metafunc.parametrize(["case", *names], params)

    # ----------------------------------------------------------------- opcheck

    @pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "requires_grad"])
    @pytest.mark.parametrize("device", DEVICES)
    def test_opcheck(self, case, device, requires_grad):
        samples = [case.sample(device, case.dtype, 0)] + (case.empty(device, case.dtype) if case.empty else [])
        for sample in samples:
            args, utils = sample.args, OPCHECK_TESTS
            if requires_grad and case.grad_args:
                args, _ = make_leaves(args, grad_positions(case, args))
            elif requires_grad:  # a non-differentiable op: its autograd registration with such inputs
                floating = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.is_floating_point()]
                args, _ = make_leaves(args, floating)
                if any(o.is_floating_point() for o in flat_tensors([case.op(*args)])):
                    # a floating output (soft_nms' dets) refuses backward
                    utils = [u for u in utils if u != "test_aot_dispatch_dynamic"]
            torch.library.opcheck(case.op.default, tuple(args), test_utils=utils)
            if case.helpers and not requires_grad:
                for helper, helper_args in case.helpers(sample):
                    torch.library.opcheck(helper.default, tuple(helper_args))

    def test_fake_output_size(self, case):
        """Under fake tensors (torch.compile, torch.export) an output size is an unbacked symbol
        exactly when the case says that the size depends on the data."""
        sample = case.sample("cpu", case.dtype, 0)
        with FakeTensorMode(shape_env=ShapeEnv()) as mode:
            outputs = flat_tensors([case.op(*tree_map_only(Tensor, mode.from_tensor, tuple(sample.args)))])
        assert any(free_unbacked_symbols(o.shape) for o in outputs) == case.data_dependent

    # ----------------------------------------------------------------- graphs

    @pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
    @pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.slow])])
    @_once(lambda case: case.module is not None and "compile" in case.module_tests)
    def test_compile(self, case, device, backend):
        from torch._dynamo.testing import CompileCounterWithBackend

        torch._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        model = case.module().to(device=device, dtype=case.dtype)
        compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=True)
        frames = None
        for size in (0, 1):
            inputs, positions = module_call(case, case.sample(device, case.dtype, size))
            expected = forward_backward(model, inputs, positions)
            assert_gradients_reach_every_input(expected, f"size {size}")
            assert_same_results(
                forward_backward(compiled, inputs, positions),
                expected,
                case.compile_tol,
                case.compile_tol,
                f"size {size}",
            )
            frames = frames or counter.frame_count
        assert frames and counter.frame_count == frames, "dynamic=True should not recompile for new sizes"

    @_once(lambda case: case.module is not None and "export" in case.module_tests)
    def test_export(self, case, tmp_path):
        model = case.module().to(case.dtype)
        inputs, _ = module_call(case, case.sample("cpu", case.dtype, 0))
        dims = tree_map_only(Tensor, lambda t: {d: torch.export.Dim.AUTO for d in range(t.dim())}, tuple(inputs))
        program = torch.export.export(model, tuple(inputs), dynamic_shapes=dims)
        targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
        assert any(t.startswith(case.qualified_name.replace("::", ".") + ".") for t in targets), targets
        path = str(tmp_path / f"{case.name}.pt2")
        torch.export.save(program, path)
        loaded = torch.export.load(path)
        for size in (0, 1):
            inputs, _ = module_call(case, case.sample("cpu", case.dtype, size))
            expected = flat_tensors([model(*inputs)])
            for name, ep in (("exported", program), ("loaded", loaded)):
                for i, (o, e) in enumerate(zip(flat_tensors([ep.module()(*inputs)]), expected)):
                    assert_same(o, e, case.script_tol, f"{name}, size {size}, output {i}")

    @_once(lambda case: case.module is not None and "torchscript" in case.module_tests)
    def test_torchscript(self, case, tmp_path):
        model = case.module().to(case.dtype)
        scripted = torch.jit.script(model)
        path = str(tmp_path / f"{case.name}.pt")
        scripted.save(path)
        loaded = torch.jit.load(path)
        assert case.qualified_name in str(loaded.graph) or case.qualified_name in loaded.code
        inputs, positions = module_call(case, case.sample("cpu", case.dtype, 0))
        expected = forward_backward(model, inputs, positions)
        assert_gradients_reach_every_input(expected, "eager")
        for name, fn in (("scripted", scripted), ("loaded", loaded)):
            assert_same_results(
                forward_backward(fn, inputs, positions), expected, case.script_tol, case.script_grad_tol, name
            )

    # ----------------------------------------------------------------- CUDA == CPU

    @_over(
        lambda case: [
            pytest.param(dtype, layout, id=f"{str(dtype)[6:]}-{layout}", marks=pytest.mark.cuda)
            for dtype in case.dtypes
            for layout in layouts(case)
        ],
        names=("dtype", "layout"),
    )
    def test_cuda_matches_cpu(self, case, dtype, layout):
        compare_devices(case, dtype, layout, "cuda")

    # ----------------------------------------------------------------- empty and bad inputs

    @pytest.mark.parametrize("device", DEVICES)
    @_once(lambda case: case.empty is not None)
    def test_empty_inputs(self, case, device):
        for n, sample in enumerate(case.empty(device, case.dtype)):
            args, leaves = make_leaves(sample.args, grad_positions(case, sample.args))
            outputs = flat_tensors([case.op(*args)])
            assert [tuple(o.shape) for o in outputs] == [tuple(s) for s in sample.out_shapes], n
            assert all(o.device.type == device for o in outputs)
            if not leaves:
                continue
            grads = backward(outputs, leaves, cotangents(outputs))
            for leaf, grad in zip(leaves, grads):
                assert grad.shape == leaf.shape and grad.dtype == leaf.dtype, n
                if all(o.numel() == 0 for o in outputs):
                    assert torch.equal(grad, torch.zeros_like(leaf)), n

    @_over(
        lambda case: [
            pytest.param(name, bad, id=name, marks=[pytest.mark.cuda] if bad.cuda else [])
            for name, bad in case.bad_inputs.items()
        ],
        names=("name", "bad"),
    )
    def test_bad_input_raises(self, case, name, bad):
        args = bad.make(*case.sample("cpu", case.dtype, 0).args)
        with pytest.raises(RuntimeError, match=bad.match) as error:
            case.op(*args)
        assert f"{case.qualified_name}: " in str(error.value)  # the message names the op
        if bad.meta:  # the Meta kernel (torch.compile, torch.export) validates the same way
            with pytest.raises(RuntimeError, match=bad.match):
                case.op(*to_device(args, "meta"))


def all_cases() -> List[ConformanceCase]:
    """Every case of every test module's suite (for test/cpp/make_scripted_cases.py)."""
    cases = []
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "test_*.py"))):
        try:
            module = importlib.import_module(os.path.splitext(os.path.basename(path))[0])
        except pytest.skip.Exception:  # a module that needs an absent package (mmdet, onnx) has no cases
            continue
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, ConformanceSuite) and value is not ConformanceSuite:
                cases += value.cases
    return cases
