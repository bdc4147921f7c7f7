"""mmops: detection / segmentation / 3D operators for PyTorch, in C++ and CUDA.

Importing this package loads libmmops.so, which registers the operators under
torch.ops.mmops (usable from eager mode, TorchScript, torch.compile and
torch.export). Each op family has a module here, ``mmops/<family>.py``, with
its functional wrappers and nn.Modules; the names in its ``__all__`` are
exported as ``mmops.<name>``, so a new family needs no edit of this file.
"""

import importlib
import pkgutil

import torch

__version__ = "0.1.0"

from . import _loader

library_path = _loader.load_library()
# What libmmops.so was built for (its mmops_build_info.json; None without one), and
# the folder for CMAKE_PREFIX_PATH to find_package(mmops) (None without a CMake package).
build_info = _loader.build_info
cmake_prefix_path = _loader.cmake_prefix_path

from . import _fake  # noqa: E402,F401  (fake kernels of the data-dependent ops)


def set_strict_index_check(enabled: bool) -> None:
    """Turns the strict CUDA index check on or off (docs/indices.md)."""
    torch.ops.mmops._set_strict_index_check(bool(enabled))


def strict_index_check() -> bool:
    """Whether CUDA ops validate indices held in tensor data synchronously."""
    return bool(torch.ops.mmops._strict_index_check())


__all__ = ["__version__", "library_path", "set_strict_index_check", "strict_index_check"]
__all__ += ["build_info", "cmake_prefix_path"]

# Not op families, imported on demand: the mmcv.ops bridge is opt-in (`import mmops.mmcv_ops`)
# and mmops.onnx loads onnxscript.
_ON_DEMAND = ("mmcv_ops", "onnx", "tv")
_families = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_") and m.name not in _ON_DEMAND)
for _family in sorted(_families):
    _module = importlib.import_module(f".{_family}", __name__)
    for _name in _module.__all__:
        globals()[_name] = getattr(_module, _name)
    __all__ += _module.__all__
del _families, _family, _module, _name

from . import tv  # noqa: E402,F401  (torchvision's conventions: mmops.tv, not merged into mmops)
