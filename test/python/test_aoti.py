"""Every op through torch.export + AOTInductor (aoti_compile_and_package).

One package holds a call of every op (the first conformance case of each, on its
sample): AOTInductor cannot generate code for a custom op, so each one becomes
a call through its proxy executor, which passes the schema's arguments (optional
tensors, int and float lists, strings, tensor lists) to the dispatcher at run
time; the data-dependent sizes (nms, soft_nms) come from the Python fake
kernels at compile time. The package, loaded back, must equal eager on the
sample's two sizes (every dimension dynamic). examples/aoti runs such a package
from C++.

The name says test_export so that .ci/sanitize.sh (-k "not test_export") leaves
it out; it is marked slow (one C++ compile, about 40 s on two cores).
"""

import os
import shutil
from typing import Dict, List

import pytest
import torch
import torch._inductor as inductor
from conformance import DEVICES, all_cases, assert_same, flat_tensors, is_tensor_list
from torch import Tensor
from torch.utils._pytree import tree_map_only


def _missing_support() -> str:
    if not hasattr(inductor, "aoti_compile_and_package") or not hasattr(torch.export, "Dim"):
        return f"torch {torch.__version__} has no torch.export + aoti_compile_and_package (torch >= 2.6)"
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        return "AOTInductor needs a C++ compiler at compile time (none found; set CXX)"
    return ""


class OpCall(torch.nn.Module):
    """case.op(*args) with the non-tensor arguments of the sample fixed;
    forward takes the tensors and tensor lists, in order."""

    def __init__(self, op, args: tuple) -> None:
        super().__init__()
        self.op = op
        self.is_input = [isinstance(a, Tensor) or is_tensor_list(a) for a in args]
        self.fixed = [None if inp else a for a, inp in zip(args, self.is_input)]

    def forward(self, *inputs):
        it = iter(inputs)
        return self.op(*[next(it) if inp else a for a, inp in zip(self.fixed, self.is_input)])


class EveryOp(torch.nn.Module):
    def __init__(self, calls: Dict[str, OpCall], arity: Dict[str, int]) -> None:
        super().__init__()
        self.names = list(calls)
        self.calls = torch.nn.ModuleList(calls.values())
        self.arity = [arity[n] for n in self.names]

    def forward(self, *inputs):
        outputs, start = [], 0
        for call, n in zip(self.calls, self.arity):
            outputs.append(call(*inputs[start : start + n]))
            start += n
        return tuple(outputs)


def _first_case_per_op() -> List:
    cases: Dict[str, object] = {}
    for case in all_cases():
        cases.setdefault(case.qualified_name, case)
    return [cases[name] for name in sorted(cases)]


def _inputs(cases, device: str, size: int):
    per_op = []
    for case in cases:
        args = case.sample(device, case.dtype, size).args
        per_op.append((args, [a for a in args if isinstance(a, Tensor) or is_tensor_list(a)]))
    return per_op


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_export_aoti_every_op(device, tmp_path):
    reason = _missing_support()
    if reason:
        pytest.skip(reason)
    cases = _first_case_per_op()
    sizes = [_inputs(cases, device, size) for size in (0, 1)]
    calls = {case.name: OpCall(case.op, args) for case, (args, _) in zip(cases, sizes[0])}
    model = EveryOp(calls, {case.name: len(inp) for case, (_, inp) in zip(cases, sizes[0])}).eval()
    for case, (args0, _), (args1, _) in zip(cases, *sizes):
        fixed = [a for a in args0 if not (isinstance(a, Tensor) or is_tensor_list(a))]
        assert fixed == [a for a in args1 if not (isinstance(a, Tensor) or is_tensor_list(a))], case.name

    example = tuple(t for _, inp in sizes[0] for t in inp)
    dims = tree_map_only(Tensor, lambda t: {d: torch.export.Dim.AUTO for d in range(t.dim())}, example)
    program = torch.export.export(model, example, dynamic_shapes=(dims,))  # (*inputs,)
    lowered = {str(n.target) for n in program.run_decompositions().graph.nodes if n.op == "call_function"}
    for case in cases:  # the public op, not its autograd helpers (_<op>_forward)
        assert f"{case.qualified_name.replace('::', '.')}.default" in lowered, (case.name, sorted(lowered))
    compiled = inductor.aoti_load_package(
        inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "every_op.pt2"))
    )

    for size, per_op in enumerate(sizes):
        inputs = tuple(t for _, inp in per_op for t in inp)
        with torch.no_grad():
            expected = model(*inputs)
        got = compiled(*inputs)
        assert len(got) == len(expected)
        for case, g, e in zip(cases, got, expected):
            e_flat, g_flat = flat_tensors([e]), flat_tensors([g])
            assert len(g_flat) == len(e_flat), case.name
            for i, (o, r) in enumerate(zip(g_flat, e_flat)):
                tol = case.compile_tol if r.is_floating_point() else dict(rtol=0, atol=0)
                assert_same(o, r, tol, f"{case.name}, size {size}, output {i}")
