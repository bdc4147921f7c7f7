#!/usr/bin/env bash
# torch.export + AOTInductor, end to end, against an installed mmops:
# export and compile the detector (export_aoti.py), build the C++ program
# (this folder's CMakeLists.txt) against the install, run it.
#
#   examples/aoti/run.sh [cpu|cuda]        (default: cpu)
#
# Environment (the variables of examples/run_demo.sh and .ci/bootstrap.sh):
#   MMOPS_PYTHON or MMOPS_PY   python with torch (default: python3)
#   MMOPS_BUILD_DIR            default build/
#   MMOPS_INSTALL_DIR          the installed mmops prefix (default $MMOPS_BUILD_DIR/install;
#                              `source .ci/bootstrap.sh; mmops_setup; mmops_build` makes it)
#   MMOPS_AOTI_DIR             where the package, data and C++ build go
#                              (default $MMOPS_BUILD_DIR/examples/aoti)
# Exit code: 0 agreement, 1 disagreement, 2 error, 77 this torch cannot (skip).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEVICE="${1:-cpu}"
[[ "$DEVICE" == cpu || "$DEVICE" == cuda ]] || { echo "usage: $0 [cpu|cuda]" >&2; exit 2; }
PY="${MMOPS_PYTHON:-${MMOPS_PY:-python3}}"
BUILD_DIR="${MMOPS_BUILD_DIR:-$REPO_ROOT/build}"
PREFIX="${MMOPS_INSTALL_DIR:-$BUILD_DIR/install}"
WORK="${MMOPS_AOTI_DIR:-$BUILD_DIR/examples/aoti}"
OUT="$WORK/$DEVICE"
APP="$WORK/app"

[[ -f "$PREFIX/lib/cmake/mmops/mmopsConfig.cmake" ]] \
  || { echo "error: no installed mmops in $PREFIX (run mmops_build, or set MMOPS_INSTALL_DIR)" >&2; exit 2; }
# The installed Python package and its library, not a build tree's.
if [[ -d "$PREFIX/python/mmops" ]]; then
  export PYTHONPATH="$PREFIX/python${PYTHONPATH:+:$PYTHONPATH}" MMOPS_LIBRARY="$PREFIX/lib/libmmops.so"
fi
TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
# A fresh inductor cache: a graph cached against another libmmops (other fake
# kernels) must not be reused.
if [[ -z "${TORCHINDUCTOR_CACHE_DIR:-}" ]]; then
  TORCHINDUCTOR_CACHE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mmops-aoti-inductor.XXXXXX")"
  export TORCHINDUCTOR_CACHE_DIR
  trap 'rm -rf "$TORCHINDUCTOR_CACHE_DIR"' EXIT
fi

echo "== [aoti] torch.export + aoti_compile_and_package ($DEVICE, $PY)"
start=$SECONDS
status=0
"$PY" "$REPO_ROOT/examples/aoti/export_aoti.py" --out-dir "$OUT" --device "$DEVICE" || status=$?
[[ $status -eq 0 ]] || exit "$status"
echo "== [aoti] export + compile took $((SECONDS - start)) s"

echo "== [aoti] building examples/aoti against $PREFIX"
mkdir -p "$WORK"
generator=()
if command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
  # A build dir configured earlier with another generator cannot switch.
  if [[ -f "$APP/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$APP/CMakeCache.txt"; then
    rm -rf "$APP"
  fi
fi
cmake -S "$REPO_ROOT/examples/aoti" -B "$APP" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX;$TORCH_PREFIX" >"$WORK/configure.log" 2>&1 \
  || { cat "$WORK/configure.log"; echo "error: configuring examples/aoti failed" >&2; exit 2; }
cmake --build "$APP" --parallel >"$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log"; echo "error: building examples/aoti failed" >&2; exit 2; }

echo "== [aoti] running the C++ program"
"$APP/aoti_inference" "$OUT/detector.pt2" "$OUT/detector_data.pt"
