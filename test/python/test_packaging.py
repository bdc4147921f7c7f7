"""The loader's promises (python/mmops/_loader.py, docs/install.md): the library
records what it was built for, a library built for another torch is refused
before it is loaded with a message naming both, `python -m mmops` reports, and
mmops.cmake_prefix_path names a folder find_package(mmops) can use. These run
against whichever mmops is imported: the build tree, a prefix or a pip install.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mmops
from mmops import _loader

RUNNING = torch.__version__


def _env():
    """The environment of a child python that imports this same mmops package."""
    env = dict(os.environ)
    package_parent = str(Path(mmops.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent, env.get("PYTHONPATH", "")])
    if env.get("MMOPS_LIBRARY"):  # the child runs elsewhere: no relative path
        env["MMOPS_LIBRARY"] = str(Path(mmops.library_path).absolute())
    return env


def _python(*args, env=None):
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, env=env or _env(), cwd=os.sep
    )


def _other_torch(info, **changes):
    """`info` as a build for another torch would have written it."""
    return {**info, **changes}


def test_build_info_matches_running_torch():
    info = mmops.build_info
    assert info is not None, f"no mmops_build_info.json beside {mmops.library_path}"
    assert info["mmops_version"] == mmops.__version__
    assert info["torch_version"].split(".")[:2] == RUNNING.split(".")[:2]
    assert bool(info["torch_cuda"]) == bool(torch.version.cuda)
    assert isinstance(info["cuda_kernels"], bool)
    if info["cuda_kernels"]:
        assert info["cuda_arches"] and all(a.startswith(("sm_", "compute_")) for a in info["cuda_arches"])
    else:
        assert info["cuda_arches"] == []
    _loader.check_build(Path(mmops.library_path), info)  # the running torch passes


def test_other_minor_version_is_refused_naming_both():
    info = _other_torch(mmops.build_info, torch_version="2.0.1")
    with pytest.raises(ImportError) as err:
        _loader.check_build(Path("/x/libmmops.so"), info)
    text = str(err.value)
    assert "mmops was built for torch 2.0.1" in text
    assert f"but torch {RUNNING}" in text and "is running" in text
    assert "--no-build-isolation" in text and "/x/libmmops.so" in text


def test_other_patch_version_is_accepted():
    major, minor = RUNNING.split(".")[:2]
    _loader.check_build(Path("x"), _other_torch(mmops.build_info, torch_version=f"{major}.{minor}.99"))


def test_cuda_build_vs_cpu_build_is_refused():
    flipped = None if torch.version.cuda else "12.8"
    info = _other_torch(mmops.build_info, torch_cuda=flipped, cuda_kernels=bool(flipped))
    with pytest.raises(ImportError, match="CUDA build vs CPU-only build"):
        _loader.check_build(Path("x"), info)
    with pytest.raises(ImportError, match=r"CUDA 12\.8|CPU only"):
        _loader.check_build(Path("x"), info)


@pytest.mark.skipif(not torch.version.cuda, reason="needs a CUDA build of torch")
def test_cuda_major_mismatch_with_cuda_kernels_is_refused():
    other = "99.0"
    info = _other_torch(mmops.build_info, torch_cuda=other, cuda_kernels=True)
    with pytest.raises(ImportError, match="CUDA major version"):
        _loader.check_build(Path("x"), info)


def test_skip_check_env_var(monkeypatch):
    monkeypatch.setenv("MMOPS_SKIP_BUILD_CHECK", "1")
    _loader.check_build(Path("x"), _other_torch(mmops.build_info, torch_version="1.0.0"))


def test_undefined_symbol_is_reraised_naming_both(monkeypatch):
    def fail(path):
        raise OSError(f"{path}: undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs")

    monkeypatch.setattr(torch.ops, "load_library", fail)
    with pytest.raises(ImportError) as err:
        _loader._load(Path("/x/libmmops.so"), _other_torch(mmops.build_info, torch_version="2.0.1"))
    text = str(err.value)
    assert "built for torch 2.0.1" in text and f"torch {RUNNING}" in text and "undefined symbol" in text
    with pytest.raises(ImportError, match="unknown torch"):
        _loader._load(Path("/x/libmmops.so"), None)


def test_import_refuses_a_library_built_for_another_torch(tmp_path):
    # The real library beside a build info saying another torch: refused before dlopen.
    (tmp_path / "libmmops.so").symlink_to(Path(mmops.library_path).resolve())
    info = _other_torch(mmops.build_info, torch_version="2.0.1")
    (tmp_path / "mmops_build_info.json").write_text(json.dumps(info))
    env = {**_env(), "MMOPS_LIBRARY": str(tmp_path / "libmmops.so")}
    done = _python("-c", "import mmops", env=env)
    assert done.returncode != 0
    assert "ImportError: mmops was built for torch 2.0.1" in done.stderr
    assert f"but torch {RUNNING}" in done.stderr


def test_cmake_prefix_path_holds_the_cmake_package():
    prefix = mmops.cmake_prefix_path
    if prefix is None:
        pytest.skip(f"no CMake package beside {mmops.library_path} (a build tree without build/install)")
    configs = [Path(prefix) / d / "cmake" / "mmops" / "mmopsConfig.cmake" for d in ("lib", "lib64")]
    assert any(c.is_file() for c in configs)
    assert (Path(prefix) / "include" / "mmops" / "mmops.h").is_file()


def test_python_m_mmops_reports():
    done = _python("-m", "mmops")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"mmops {mmops.__version__}\n")
    assert f"library:       {mmops.library_path}" in out
    assert f"running:       torch {RUNNING}" in out
    for line in ("built for:", "CUDA kernels:", "devices:       cpu", "roi_align", "nms", "ms_deform_attn"):
        assert line in out
    assert "roi_align                CPU" in out


def test_python_m_mmops_cmake_prefix():
    done = _python("-m", "mmops", "--cmake-prefix")
    if mmops.cmake_prefix_path is None:
        assert done.returncode == 1 and "no CMake package" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout == mmops.cmake_prefix_path + "\n"
