"""`python -m mmops`: what is installed, what it was built for and what runs it.

`python -m mmops --cmake-prefix` prints only the folder to put on CMAKE_PREFIX_PATH
for find_package(mmops) (docs/install.md). (`python -m mmops.mmcv_ops` is the mmcv
bridge's runner, a different thing.)
"""

import argparse
import platform
import sys
from typing import List

import torch

import mmops
from mmops._loader import describe_torch

_KEYS = {"CPU": "CPU", "CUDA": "CUDA", "Meta": "Meta", "Autograd": "Autograd", "CompositeImplicitAutograd": "composite"}


def _ops() -> List[str]:
    """mmops' public operators as the dispatcher knows them, each with its kernels."""
    try:
        names = torch._C._dispatch_get_all_op_names()
    except AttributeError:  # a torch without this private call: names only
        names = [str(s.name) for s in torch._C._jit_get_all_schemas()]
    public = sorted(n for n in names if n.startswith("mmops::") and not n.startswith("mmops::_"))
    has_kernel = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    rows = []
    for name in public:
        keys = [label for key, label in _KEYS.items() if has_kernel and has_kernel(name, key)]
        rows.append(f"{name[len('mmops::') :]:<24} {' '.join(keys)}")
    return rows


def _devices(arches: List[str]) -> List[str]:
    lines = ["cpu"]
    if not torch.cuda.is_available():
        lines.append("cuda: none available" if torch.version.cuda else "cuda: this torch is CPU-only")
        return lines
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        sm = f"sm_{major}{minor}"
        note = "" if not arches or sm in arches else f"  (no mmops kernels for {sm}: rebuild with TORCH_CUDA_ARCH_LIST)"
        lines.append(f"cuda:{i} {torch.cuda.get_device_name(i)} ({sm}){note}")
    return lines


def report() -> str:
    info = mmops.build_info or {}
    arches = info.get("cuda_arches") or []
    if info:
        built = describe_torch(info.get("torch_version", "?"), info.get("torch_cuda"))
        kernels = f"nvcc {info.get('nvcc_version')}, {' '.join(arches)}" if info.get("cuda_kernels") else "none"
    else:
        built, kernels = "unknown (no mmops_build_info.json beside the library)", "unknown"
    out = [
        f"mmops {mmops.__version__}",
        f"library:       {mmops.library_path}",
        f"cmake prefix:  {mmops.cmake_prefix_path or 'none (no CMake package beside the library)'}",
        f"built for:     {built}",
        f"CUDA kernels:  {kernels}",
        f"running:       {describe_torch(torch.__version__, torch.version.cuda)}, python {platform.python_version()}",
        "devices:       " + "\n               ".join(_devices(arches)),
    ]
    ops = _ops()
    out.append(f"ops:           {len(ops)} under torch.ops.mmops (and internal _ops), with their kernels:")
    out += [f"  {row}" for row in ops]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mmops", description=__doc__.splitlines()[0])
    parser.add_argument("--cmake-prefix", action="store_true", help="print only the CMAKE_PREFIX_PATH folder")
    args = parser.parse_args(argv)
    if args.cmake_prefix:
        if not mmops.cmake_prefix_path:
            print(f"mmops: no CMake package beside {mmops.library_path}", file=sys.stderr)
            return 1
        print(mmops.cmake_prefix_path)
        return 0
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
