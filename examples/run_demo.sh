#!/usr/bin/env bash
# End-to-end demo: build + install mmops, script the RoI head in Python, build
# the standalone C++ consumer against the installed package and run it.
# Works from any directory; uses CUDA when the machine has a GPU, else the CPU.
#
# Environment (all optional):
#   MMOPS_BUILD_DIR / MMOPS_INSTALL_DIR   see .ci/bootstrap.sh (default build/, build/install)
#   MMOPS_DEMO_DEVICE                      auto (default) | cpu | cuda
#   MMOPS_DEMO_ITERS                       timed runs of the C++ program (default 50)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

# shellcheck source=/dev/null
source .ci/bootstrap.sh
mmops_setup
mmops_build mmops   # the library only: the test programs are the test command's

: "${MMOPS_PY:?mmops_setup did not export MMOPS_PY}"
: "${MMOPS_TORCH_PREFIX:?mmops_build did not export MMOPS_TORCH_PREFIX}"
BUILD_DIR="${MMOPS_BUILD_DIR:-$REPO_ROOT/build}"
INSTALL_DIR="${MMOPS_INSTALL_DIR:-$BUILD_DIR/install}"
DEMO_DIR="$BUILD_DIR/examples"
DATA_DIR="$DEMO_DIR/roi_head"
APP_BUILD_DIR="$DEMO_DIR/cpp_inference"
DEVICE="${MMOPS_DEMO_DEVICE:-auto}"
ITERS="${MMOPS_DEMO_ITERS:-50}"

if [[ "$DEVICE" == auto ]]; then
  if "$MMOPS_PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    DEVICE=cuda
  else
    DEVICE=cpu
  fi
fi

echo "== [demo] exporting the scripted RoI head (Python, $DEVICE)"
MMOPS_LIBRARY="$BUILD_DIR/libmmops.so" PYTHONPATH="$REPO_ROOT/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$MMOPS_PY" examples/roi_head/export_model.py --out-dir "$DATA_DIR" --device "$DEVICE"

echo "== [demo] building examples/cpp_inference against $INSTALL_DIR"
generator=()
if command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
  # A build dir configured earlier with another generator cannot switch.
  if [[ -f "$APP_BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$APP_BUILD_DIR/CMakeCache.txt"; then
    rm -rf "$APP_BUILD_DIR"
  fi
fi
cmake -S examples/cpp_inference -B "$APP_BUILD_DIR" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$INSTALL_DIR;$MMOPS_TORCH_PREFIX" >"$DEMO_DIR/cpp_inference.configure.log" 2>&1 \
  || { cat "$DEMO_DIR/cpp_inference.configure.log"; echo "error: configuring examples/cpp_inference failed" >&2; exit 1; }
cmake --build "$APP_BUILD_DIR" --parallel >"$DEMO_DIR/cpp_inference.build.log" 2>&1 \
  || { cat "$DEMO_DIR/cpp_inference.build.log"; echo "error: building examples/cpp_inference failed" >&2; exit 1; }

echo "== [demo] running the C++ program"
"$APP_BUILD_DIR/cpp_inference" "$DATA_DIR/roi_head.pt" "$DATA_DIR/roi_head_data.pt" \
  --device "$DEVICE" --iters "$ITERS"
