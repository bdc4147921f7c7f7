"""torch.export the mmops detector (detector.py) and compile it with AOTInductor.

Writes into --out-dir:
  detector.pt2      the AOTInductor package (aoti_compile_and_package), for --device
  detector_data.pt  a scripted container module (C++ reads it with torch::jit::load)
                    whose buffers hold, for each input set i, the inputs
                    set{i}_{features,rois,boxes,scores} and the eager outputs
                    set{i}_{logits,keep,kept_feats}; attributes: num_sets,
                    input_names, output_names, device.

The number of rois (K) and of proposals (N) are dynamic (torch.export.Dim, 0
allowed); the input sets differ in both, the last one is empty (K = N = 0).
Before saving, the package is loaded back in Python
(torch._inductor.aoti_load_package) and checked against eager.

Exit codes: 0 done, 1 the package disagrees with eager, 77 this torch cannot
do it (no torch.export / AOTInductor, or no C++ compiler for AOTInductor).

Usage: PYTHONPATH=python python examples/aoti/export_aoti.py --out-dir DIR [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import warnings
from typing import List

import torch
import torch._inductor as inductor
from torch import Tensor, nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from detector import DetectorHead, make_inputs  # noqa: E402

# torch.jit.script is deprecated, but the way to hand tensors to libtorch.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.\w+.* is deprecated", category=FutureWarning)

SKIP = 77
INPUT_NAMES = ["features", "rois", "boxes", "scores"]
OUTPUT_NAMES = ["logits", "keep", "kept_feats"]
# (num_rois, num_boxes, seed) of the input sets: the first is also the export
# example; the last has no rois and no boxes.
INPUT_SETS = [(5, 12, 1), (11, 40, 2), (0, 0, 3)]


def missing_support() -> str:
    """Why this torch cannot export + AOT-compile here ('' when it can)."""
    if not hasattr(torch, "export") or not hasattr(torch.export, "Dim"):
        return f"torch {torch.__version__} has no torch.export.Dim"
    if not hasattr(inductor, "aoti_compile_and_package"):
        return f"torch {torch.__version__} has no torch._inductor.aoti_compile_and_package (needs torch >= 2.6)"
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        return f"AOTInductor compiles C++ at export time and found no compiler ({cxx}; set CXX)"
    return ""


def disable_tf32() -> None:
    """Plain fp32 matmuls and convolutions in the eager reference (the C++
    program does the same for the package's extern calls). The legacy flags:
    torch.export reads cuDNN's legacy flag, an error after the new
    fp32_precision API has set it (torch 2.14)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def export(model: nn.Module, example: tuple) -> torch.export.ExportedProgram:
    num_rois = torch.export.Dim("num_rois", min=0, max=4096)
    num_boxes = torch.export.Dim("num_boxes", min=0, max=16384)
    dynamic = ({}, {0: num_rois}, {0: num_boxes}, {0: num_boxes})
    return torch.export.export(model, example, dynamic_shapes=dynamic)


def agree(name: str, got: Tensor, ref: Tensor) -> bool:
    """Index outputs exactly, float outputs within 1e-4 of the output's scale."""
    if got.shape != ref.shape or got.dtype != ref.dtype:
        print(f"  {name}: {list(got.shape)} {got.dtype}, expected {list(ref.shape)} {ref.dtype}  FAILED")
        return False
    if not ref.is_floating_point():
        ok = torch.equal(got.cpu(), ref.cpu())
        print(f"  {name}: {list(got.shape)} exact: {'OK' if ok else 'FAILED'}")
        return ok
    diff = (got.double() - ref.double()).abs().max().item() if ref.numel() else 0.0
    tol = 1e-4 * max(ref.abs().max().item() if ref.numel() else 0.0, 1e-3)
    ok = diff <= tol
    print(f"  {name}: {list(got.shape)} max|diff| {diff:.2e} (tol {tol:.2e}): {'OK' if ok else 'FAILED'}")
    return ok


class Container(nn.Module):
    """Tensors by name, scripted so that C++ can read them with torch::jit::load."""

    def __init__(self, tensors: dict, num_sets: int, device: str) -> None:
        super().__init__()
        for name, t in tensors.items():
            self.register_buffer(name, t.detach().cpu().contiguous())
        self.num_sets: int = num_sets
        self.input_names: List[str] = INPUT_NAMES
        self.output_names: List[str] = OUTPUT_NAMES
        self.device: str = device

    def forward(self) -> int:
        return self.num_sets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", required=True, help="directory for detector.pt2 and detector_data.pt")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device to compile for")
    args = parser.parse_args()

    reason = missing_support()
    if reason:
        print(f"SKIPPED: {reason}")
        return SKIP
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but torch.cuda.is_available() is False")
    import mmops  # noqa: F401  (registers torch.ops.mmops and the Python fake kernels)

    device = torch.device(args.device)
    disable_tf32()
    os.makedirs(args.out_dir, exist_ok=True)
    model = DetectorHead().eval().to(device)
    sets = [tuple(t.to(device) for t in make_inputs(k, n, seed)) for k, n, seed in INPUT_SETS]

    t0 = time.perf_counter()
    program = export(model, sets[0])
    t1 = time.perf_counter()
    package = inductor.aoti_compile_and_package(program, package_path=os.path.join(args.out_dir, "detector.pt2"))
    t2 = time.perf_counter()
    lowered = program.run_decompositions().graph.nodes  # what the package calls
    ops = sorted({str(n.target) for n in lowered if str(n.target).startswith("mmops.")})
    print(f"torch {torch.__version__}, device {args.device}")
    print(f"export {t1 - t0:.1f} s, aoti_compile_and_package {t2 - t1:.1f} s -> {package}")
    print(f"mmops ops in the graph (called through the proxy executor): {', '.join(ops)}")

    compiled = inductor.aoti_load_package(package)
    tensors, ok = {}, True
    for i, inputs in enumerate(sets):
        with torch.no_grad():
            expected = model(*inputs)
        print(f"set {i}: num_rois {inputs[1].shape[0]}, num_boxes {inputs[2].shape[0]} (Python package vs eager)")
        for name, got, ref in zip(OUTPUT_NAMES, compiled(*inputs), expected):
            ok &= agree(name, got, ref)
        tensors.update({f"set{i}_{n}": t for n, t in zip(INPUT_NAMES, inputs)})
        tensors.update({f"set{i}_{n}": t for n, t in zip(OUTPUT_NAMES, expected)})
    data_path = os.path.join(args.out_dir, "detector_data.pt")
    torch.jit.script(Container(tensors, len(sets), args.device)).save(data_path)
    print(f"saved {data_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
