"""Finds libmmops.so, checks that it was built for the running torch, and loads it
(which registers its operators with torch.ops.mmops).

Where it looks, in order: $MMOPS_LIBRARY; a pip install (site-packages/mmops/lib);
a `cmake --install` prefix (<prefix>/python/mmops beside <prefix>/lib*); a source
checkout's build tree (<repo>/python/mmops beside <repo>/build). Beside the library,
mmops_build_info.json (written by cmake/MmopsTorch.cmake) says which torch it was
built for: a library built for another torch would fail with a bare
"undefined symbol" (or crash), so it is refused before it is loaded.
"""

import json
import os
import re
from pathlib import Path
from typing import List, Optional

import torch

_LIBRARY_ENV = "MMOPS_LIBRARY"
_SKIP_CHECK_ENV = "MMOPS_SKIP_BUILD_CHECK"
_LIBRARY_NAME = "libmmops.so"
_BUILD_INFO_NAME = "mmops_build_info.json"
_CMAKE_CONFIG = Path("cmake") / "mmops" / "mmopsConfig.cmake"
_REBUILD = (
    "rebuild mmops against the running torch: `pip install --no-build-isolation --force-reinstall "
    "<mmops source>` (docs/install.md), or rebuild the build tree (`cmake --build build`)"
)

# Set by load_library(): what was loaded, for mmops.build_info / mmops.cmake_prefix_path.
build_info: Optional[dict] = None
cmake_prefix_path: Optional[str] = None


def _candidates() -> List[Path]:
    package_dir = Path(__file__).resolve().parent
    prefix = package_dir.parent.parent
    return [
        package_dir / "lib" / _LIBRARY_NAME,  # pip: site-packages/mmops/lib
        prefix / "lib" / _LIBRARY_NAME,  # cmake --install: <prefix>/python/mmops
        prefix / "lib64" / _LIBRARY_NAME,
        prefix / "build" / _LIBRARY_NAME,  # source checkout: <repo>/python/mmops
        package_dir / _LIBRARY_NAME,
    ]


def read_build_info(library: Path) -> Optional[dict]:
    """The build info beside `library` (or beside the file a symlink names); None if absent."""
    for folder in (library.parent, library.resolve().parent):
        path = folder / _BUILD_INFO_NAME
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                return json.load(f)
    return None


def _major_minor(version: str) -> str:
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else version


def describe_torch(version: str, cuda: Optional[str]) -> str:
    """E.g. 'torch 2.14.1+cu130 (CUDA 13.0)' or 'torch 2.13.0+cpu (CPU only)'."""
    return f"torch {version} ({'CUDA ' + cuda if cuda else 'CPU only'})"


def _running() -> str:
    return describe_torch(torch.__version__, torch.version.cuda)


def _built_for(info: Optional[dict]) -> str:
    if info is None:
        return "an unknown torch (no build info beside the library)"
    return describe_torch(info.get("torch_version", "?"), info.get("torch_cuda"))


def mismatch(info: dict) -> Optional[str]:
    """Why a library built as `info` says cannot run under this torch; None if it can."""
    built, built_cuda = info.get("torch_version", ""), info.get("torch_cuda")
    running_cuda = torch.version.cuda
    if _major_minor(built) != _major_minor(torch.__version__):
        return "torch version"
    if bool(built_cuda) != bool(running_cuda):
        return "CUDA build vs CPU-only build"
    if info.get("cuda_kernels") and built_cuda != "unknown" and built_cuda.split(".")[0] != running_cuda.split(".")[0]:
        return "CUDA major version"
    return None


def check_build(library: Path, info: Optional[dict]) -> None:
    """Raises ImportError when `library` was built for another torch than the running one."""
    if info is None or os.environ.get(_SKIP_CHECK_ENV, "") not in ("", "0"):
        return
    why = mismatch(info)
    if why is not None:
        raise ImportError(
            f"mmops was built for {_built_for(info)} but {_running()} is running ({why} differs); "
            f"{_REBUILD}. Library: {library}"
        )


def _find_cmake_prefix(library: Path) -> Optional[str]:
    """The folder for CMAKE_PREFIX_PATH so that find_package(mmops) finds this library's package."""
    lib_dir = library.resolve().parent
    for prefix in (lib_dir.parent, lib_dir / "install"):  # installed; a build tree's build/install
        for libdir in ("lib", "lib64"):
            if (prefix / libdir / _CMAKE_CONFIG).is_file():
                return str(prefix)
    return None


def _load(path: Path, info: Optional[dict]) -> None:
    try:
        torch.ops.load_library(str(path))
    except OSError as err:
        text = str(err)
        if "undefined symbol" in text or "cannot open shared object file" in text:
            raise ImportError(
                f"mmops: {path} does not fit the running torch: it was built for {_built_for(info)} "
                f"but {_running()} is running; {_REBUILD}. The loader said: {text}"
            ) from err
        raise


def load_library() -> Path:
    """Loads the first libmmops.so found; raises ImportError listing the places tried."""
    global build_info, cmake_prefix_path
    env = os.environ.get(_LIBRARY_ENV)
    if env and not Path(env).is_file():
        raise ImportError(f"mmops: {_LIBRARY_ENV}={env} does not name an existing file")
    tried = [Path(env)] if env else _candidates()
    for path in tried:
        if path.is_file():
            path = path.absolute()  # the same name from any working directory
            info = read_build_info(path)
            check_build(path, info)
            _load(path, info)
            build_info, cmake_prefix_path = info, _find_cmake_prefix(path)
            return path
    places = "\n  ".join(str(p) for p in tried)
    raise ImportError(
        f"mmops: {_LIBRARY_NAME} was not found. Install mmops (`pip install --no-build-isolation .`, "
        f"docs/install.md), build it (README.md), or point {_LIBRARY_ENV} at it. Looked in:\n  {places}"
    )
