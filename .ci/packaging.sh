#!/usr/bin/env bash
# Packaging check (CI: no GPU, CPU-only build). In a fresh venv with another torch
# than the main run's (torch 2.13.0, the CPU wheel; the main run uses 2.14.1):
#   1. plain `pip install .` stops at configure, telling to add --no-build-isolation;
#   2. `pip install --no-build-isolation <checkout>` builds and installs mmops;
#   3. from another directory, against the INSTALLED package (no PYTHONPATH): import
#      and one op, `python -m mmops`, a pytest subset (the build-info / loader tests,
#      roi_pool's tests, roi_align's conformance suite) on a copy of test/python;
#   4. `pip wheel`: the wheel holds the package, libmmops.so, its build info, the
#      headers and the CMake package, and libmmops.so has no absolute RUNPATH.
# Usage: .ci/packaging.sh; work folder MMOPS_PACKAGING_DIR (default build-packaging/),
# torch version MMOPS_PACKAGING_TORCH (default 2.13.0). Uses ccache when present.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
torch_version="${MMOPS_PACKAGING_TORCH:-2.13.0}"
work="${MMOPS_PACKAGING_DIR:-$root/build-packaging}"
venv="$work/venv"
py="$venv/bin/python"
log() { echo "[packaging] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
start=$SECONDS
mkdir -p "$work"

if ! "$py" -c "import torch, numpy, pytest, hypothesis, scikit_build_core
assert torch.__version__.split('+')[0] == '$torch_version'" >/dev/null 2>&1; then
  log "creating $venv with torch $torch_version (CPU wheel)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install -q "torch==$torch_version" numpy pytest hypothesis "scikit-build-core>=0.10" \
    > "$work/venv.log" 2>&1 || {
      tail -5 "$work/venv.log"
      log "SKIPPED: could not install torch==$torch_version and scikit-build-core (no package index?)"
      exit 0
    }
fi
"$py" -m pip uninstall -q -y mmops >/dev/null 2>&1 || true

# The build: CPU-only, every core; a compiler cache when there is one.
export MMOPS_WITH_CUDA=OFF CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
export CMAKE_ARGS="${MMOPS_CMAKE_ARGS:-}"
if [ -z "$CMAKE_ARGS" ] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
fi

# 1. An isolated build has no torch: it must say what to do instead.
log "1. pip install . (build isolation): must stop and name --no-build-isolation"
if "$py" -m pip install --no-deps --config-settings=build-dir="$work/isolated" "$root" \
     > "$work/isolated.log" 2>&1; then
  fail "pip install with build isolation succeeded; expected the --no-build-isolation message"
elif grep -q "pip install --no-build-isolation" "$work/isolated.log"; then
  log "   it stops, naming --no-build-isolation"
elif grep -qiE "no matching distribution|could not find a version" "$work/isolated.log"; then
  log "   skipped: pip could not fetch scikit-build-core for the isolated build (no package index)"
else
  tail -30 "$work/isolated.log"
  fail "no --no-build-isolation advice in the isolated build's output"
fi

# 2. The real install.
log "2. pip install --no-build-isolation $root (log: $work/install.log)"
"$py" -m pip install --no-build-isolation -v "$root" > "$work/install.log" 2>&1 \
  || { tail -60 "$work/install.log"; fail "pip install --no-build-isolation"; }
log "   installed in $((SECONDS - start)) s"

# 3. The installed package, from elsewhere.
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mmops-packaging.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/test/python" "$tmp/tests"
cd "$tmp"
unset PYTHONPATH MMOPS_LIBRARY
log "3. import mmops from $tmp"
"$py" - "$root" <<'EOF'
import sys
from pathlib import Path

import torch

import mmops

root = Path(sys.argv[1]).resolve()
site = Path(torch.__file__).resolve().parent.parent
for what in (Path(mmops.__file__), Path(mmops.library_path)):
    assert what.resolve().is_relative_to(site), f"{what} is not in {site}"
    for source in (root / "python", root / "build"):  # the venv itself may sit inside the checkout
        assert not what.resolve().is_relative_to(source), f"{what} comes from the checkout's {source}"
features = torch.arange(1.0, 5.0).reshape(1, 1, 2, 2)
out = mmops.roi_align(features, torch.tensor([[0.0, 0.0, 0.0, 1.0, 1.0]]), 2, aligned=True)
assert torch.allclose(out.flatten(), torch.tensor([1.0, 1.25, 1.5, 1.75])), out
assert mmops.build_info["torch_version"] == torch.__version__, mmops.build_info
assert (Path(mmops.cmake_prefix_path) / "lib/cmake/mmops/mmopsConfig.cmake").is_file()
print(f"mmops {mmops.__version__} from {mmops.library_path}: roi_align OK")
EOF
"$py" -m mmops
prefix="$("$py" -m mmops --cmake-prefix)"
[ -f "$prefix/lib/cmake/mmops/mmopsConfig.cmake" ] || fail "python -m mmops --cmake-prefix: $prefix"
log "   pytest on the installed package"
"$py" -m pytest -q -p no:cacheprovider --rootdir "$tmp/tests" \
  tests/test_packaging.py tests/test_roi_pool.py "tests/test_roi_align.py::TestRoIAlignConformance" \
  || fail "pytest against the installed package"

# 4. The wheel (the same build folder: no recompilation).
log "4. pip wheel"
cd "$root"
rm -rf "$work/wheel"
"$py" -m pip wheel --no-build-isolation --no-deps -w "$work/wheel" "$root" > "$work/wheel.log" 2>&1 \
  || { tail -40 "$work/wheel.log"; fail "pip wheel --no-build-isolation"; }
wheel="$(ls "$work"/wheel/mmops-*.whl)"
rm -rf "$work/unpacked" && mkdir -p "$work/unpacked"
"$py" - "$wheel" "$work/unpacked" <<'EOF'
import sys
import zipfile

wheel, dest = sys.argv[1:]
names = set(zipfile.ZipFile(wheel).namelist())
need = [
    "mmops/__init__.py", "mmops/__main__.py", "mmops/_loader.py", "mmops/lib/libmmops.so",
    "mmops/lib/mmops_build_info.json", "mmops/include/mmops/mmops.h", "mmops/include/mmops/roi_align.h",
    "mmops/lib/cmake/mmops/mmopsConfig.cmake", "mmops/lib/cmake/mmops/mmopsTargets.cmake",
]
missing = [n for n in need if n not in names]
assert not missing, f"{wheel} lacks {missing}"
assert not [n for n in names if "__pycache__" in n or n.startswith("mmops/python/")], sorted(names)
zipfile.ZipFile(wheel).extract("mmops/lib/libmmops.so", dest)
print(f"{wheel}: {len(names)} files, the package, library, build info, headers and CMake package")
EOF
runpath="$(readelf -d "$work/unpacked/mmops/lib/libmmops.so" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')"
log "   libmmops.so RUNPATH: $runpath"
IFS=: read -r -a entries <<< "$runpath"
for entry in "${entries[@]}"; do
  [[ "$entry" == '$ORIGIN'* ]] || fail "libmmops.so in the wheel has a RUNPATH entry not relative to \$ORIGIN: '$entry'"
done
log "passed in $((SECONDS - start)) s"
