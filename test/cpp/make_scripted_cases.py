"""Saves every conformance case (test/python/test_*.py) for test_torchscript.cpp:

    <case>.model.pt   the case's module, scripted, with its inputs, eager outputs and
                      gradients (cases whose module runs in TorchScript); model_empty<i>.pt:
                      the same on the case's empty samples that the module takes
    <case>.op<i>.pt   a call of the op (the case's sample, then its empty samples) with
                      its arguments and outputs, for the C++ API

Each file is a scripted holder module; the C++ test reads its attributes:
    model                       the scripted module (model files)
    inputs, input_layout        forward's arguments, flattened: input_layout[k] is -1 for
                                a tensor, n for a list of the next n tensors
    grad_inputs                 positions (in inputs) of the tensors that require grad
    outputs                     forward's results, flattened (nested tuples too)
    cotangents, differentiable  a cotangent per output (an empty tensor where none)
    grads                       for every differentiable output, then every grad input:
                                the gradient of sum(output * cotangent) (zeros if unused)
    tolerances                  rtol, atol, grad_rtol, grad_atol: the case's tolerances against
                                the eager run; cuda_rtol, cuda_atol: a run on CUDA against these
    op_name, args, outputs      op files: the op's qualified name, its arguments, results

Usage: make_scripted_cases.py OUTPUT_FOLDER
"""

import os
import sys
from typing import List, Tuple

import torch
from torch import Tensor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import conformance  # noqa: E402  (test/python: imports mmops through conftest)


class ModelRecording(torch.nn.Module):
    inputs: List[Tensor]
    input_layout: List[int]
    grad_inputs: List[int]
    outputs: List[Tensor]
    cotangents: List[Tensor]
    differentiable: List[bool]
    grads: List[Tensor]
    tolerances: List[float]  # rtol, atol, grad_rtol, grad_atol, cuda_rtol, cuda_atol

    def __init__(self, model, inputs, grad_inputs, outputs, cotangents, grads, tolerances):
        super().__init__()
        self.model = model
        self.inputs = conformance.flat_tensors(inputs)
        self.input_layout = [len(x) if isinstance(x, (list, tuple)) else -1 for x in inputs]
        self.grad_inputs = grad_inputs
        self.outputs = outputs
        self.cotangents = [torch.empty(0) if c is None else c.detach() for c in cotangents]
        self.differentiable = [c is not None for c in cotangents]
        self.grads = grads
        self.tolerances = tolerances

    def forward(self) -> int:  # unused: the C++ test calls model.forward
        return 0


class OpRecording(torch.nn.Module):
    op_name: str
    outputs: List[Tensor]

    def __init__(self, op_name, args, outputs):
        super().__init__()
        self.op_name = op_name
        self.args = tuple(args)  # a tuple of the op's argument types (inferred)
        self.outputs = outputs

    def forward(self) -> int:
        return 0


def _cuda_tolerance(dtype) -> Tuple[float, float]:
    """A run of the scripted model on CUDA against the CPU: a smoke test of loading and running
    there (test/python's CUDA == CPU tests hold the tolerances per op and dtype)."""
    return (1e-9, 1e-9) if dtype == torch.float64 else (1e-4, 1e-4)


def record_model(case, sample, model, path):
    inputs, positions = conformance.module_call(case, sample)
    call_args, leaves = conformance.make_leaves(inputs, positions)
    grad_inputs = [k for k, t in enumerate(conformance.flat_tensors(call_args)) if any(t is x for x in leaves)]
    cots = conformance.cotangents(conformance.flat_tensors([model(*call_args)]))  # those of forward_backward
    outputs, grads = conformance.forward_backward(model, inputs, positions)
    tolerances = [
        case.script_tol["rtol"],
        case.script_tol["atol"],
        case.script_grad_tol["rtol"],
        case.script_grad_tol["atol"],
        *_cuda_tolerance(case.dtype),
    ]
    holder = ModelRecording(
        torch.jit.script(model), inputs, grad_inputs, outputs, cots, [g for _, g in grads], tolerances
    )
    torch.jit.script(holder).save(path)


def record_ops(case, folder):
    samples = [case.sample("cpu", case.dtype, 0)] + (case.empty("cpu", case.dtype) if case.empty else [])
    for i, sample in enumerate(samples):
        outputs = [o.detach() for o in conformance.flat_tensors([case.op(*sample.args)])]
        holder = OpRecording(case.qualified_name, sample.args, outputs)
        torch.jit.script(holder).save(os.path.join(folder, f"{case.name}.op{i}.pt"))


def main(folder):
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        if old.endswith(".pt"):
            os.remove(os.path.join(folder, old))
    count = 0
    for case in conformance.all_cases():
        if case.module is not None and "torchscript" in case.module_tests:
            model = case.module().to(case.dtype)
            record_model(case, case.sample("cpu", case.dtype, 0), model, os.path.join(folder, f"{case.name}.model.pt"))
            count += 1
            # the empty samples too, those the model takes (not, e.g., another number of feature maps)
            kinds = [isinstance(x, Tensor) for x in conformance.module_inputs(case.sample("cpu", case.dtype, 0).args)]
            for i, sample in enumerate(case.empty("cpu", case.dtype) if case.empty else []):
                inputs = conformance.module_inputs(sample.args)
                if [isinstance(x, Tensor) for x in inputs] != kinds:
                    continue
                try:
                    model(*inputs)
                except RuntimeError:
                    continue
                record_model(case, sample, model, os.path.join(folder, f"{case.name}.model_empty{i}.pt"))
                count += 1
        record_ops(case, folder)
    print(f"saved {count} models and the op calls of {len(conformance.all_cases())} cases in {folder}")


if __name__ == "__main__":
    main(sys.argv[1])
