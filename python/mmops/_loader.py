"""Finds libmmops.so and registers its operators with torch.ops.mmops."""

import os
from pathlib import Path
from typing import List

import torch

_LIBRARY_ENV = "MMOPS_LIBRARY"
_LIBRARY_NAME = "libmmops.so"


def _candidates() -> List[Path]:
    package_dir = Path(__file__).resolve().parent
    found = []
    env = os.environ.get(_LIBRARY_ENV)
    if env:
        found.append(Path(env))
    # Installed layout: <prefix>/python/mmops next to <prefix>/lib*/libmmops.so
    prefix = package_dir.parent.parent
    found += [prefix / "lib" / _LIBRARY_NAME, prefix / "lib64" / _LIBRARY_NAME]
    # Source checkout: <repo>/python/mmops with the build tree in <repo>/build
    found.append(prefix / "build" / _LIBRARY_NAME)
    found.append(package_dir / _LIBRARY_NAME)
    return found


def load_library() -> Path:
    """Loads the first libmmops.so found; raises ImportError listing the places tried."""
    env = os.environ.get(_LIBRARY_ENV)
    if env and not Path(env).is_file():
        raise ImportError(f"mmops: {_LIBRARY_ENV}={env} does not name an existing file")
    tried = _candidates()
    for path in tried:
        if path.is_file():
            torch.ops.load_library(str(path))
            return path
    places = "\n  ".join(str(p) for p in tried)
    raise ImportError(
        f"mmops: {_LIBRARY_NAME} was not found. Build it (see README.md) or point "
        f"{_LIBRARY_ENV} at it. Looked in:\n  {places}"
    )
