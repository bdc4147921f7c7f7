# Shared set-up for the README commands (examples/run_demo.sh, test/run_tests.sh)
# and CI. Source it from bash, then call:
#   mmops_setup   exports MMOPS_PY (a python with torch) and MMOPS_TORCH_PREFIX;
#                 installs what is missing: a venv with torch from the local wheels,
#                 GoogleTest from Debian's packages.
#   mmops_build [TARGET...]
#                 configures MMOPS_BUILD_DIR (default build/), builds the TARGETs
#                 (default: all of them, the tests included; the demo builds
#                 only `mmops`, the library) and installs mmops into
#                 MMOPS_INSTALL_DIR (build/install). Returns non-zero on failure.

MMOPS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export MMOPS_ROOT

# Versions of the lint tools (test/lint.sh); the tree is formatted with these.
MMOPS_RUFF_VERSION=0.17.6
MMOPS_CLANG_FORMAT_VERSION=14.0.6
export MMOPS_RUFF_VERSION MMOPS_CLANG_FORMAT_VERSION

_mmops_log() { echo "[mmops] $*" >&2; }

_mmops_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

# The ONNX tests (onnx, onnxruntime, onnxscript for the dynamo exporter) and the mmdet
# tests of the mmcv.ops bridge (mmdet 3.3 needs mmcv < 2.2: mmcv-lite 2.1.0). mmengine
# and mmcv-lite require opencv-python, whose GUI build needs libGL: they are installed
# without dependencies, their dependencies with the headless OpenCV in its place.
# Without a package index the tests that need them skip, saying why.
MMOPS_TEST_EXTRAS=(onnx onnxruntime onnxscript opencv-python-headless addict matplotlib pyyaml rich
  termcolor yapf packaging Pillow pycocotools scipy shapely six terminaltables tqdm)
MMOPS_OPENMMLAB=(mmengine==0.10.7 mmcv-lite==2.1.0 mmdet==3.3.0)

_mmops_install_test_extras() {
  if ! "$MMOPS_PY" -c "import onnx, onnxruntime, onnxscript, cv2, mmengine, mmcv, mmdet" >/dev/null 2>&1; then
    _mmops_log "installing the ONNX and mmdet test packages into $MMOPS_PY"
    { "$MMOPS_PY" -m pip install -q "${MMOPS_TEST_EXTRAS[@]}" \
        && "$MMOPS_PY" -m pip install -q --no-deps "${MMOPS_OPENMMLAB[@]}"; } \
      || _mmops_log "could not install the ONNX / mmdet test packages; their tests will skip"
  fi
}

_mmops_pick_python() {
  if [ -n "${MMOPS_PYTHON:-}" ]; then
    MMOPS_PY="$MMOPS_PYTHON"
  elif python3 -c "import torch" >/dev/null 2>&1; then
    # A machine that already has torch (the GPU machine does): use it as it is.
    MMOPS_PY="$(command -v python3)"
  else
    local venv="${MMOPS_VENV:-$MMOPS_ROOT/.venv}"
    if ! "$venv/bin/python" -c "import torch, torchvision, pytest, numpy" >/dev/null 2>&1; then
      _mmops_log "creating $venv with torch 2.14.1 + torchvision 0.29.1 (CUDA build, local wheels)"
      python3 -m venv "$venv"
      "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
      "$venv/bin/python" -m pip install -q torch==2.14.1 torchvision==0.29.1 numpy pytest hypothesis
    fi
    MMOPS_PY="$venv/bin/python"
  fi
  # hypothesis: the property-based tests (test/python/test_properties.py)
  if ! "$MMOPS_PY" -c "import pytest, numpy, hypothesis" >/dev/null 2>&1; then
    _mmops_log "installing pytest, numpy and hypothesis into $MMOPS_PY"
    "$MMOPS_PY" -m pip install -q pytest numpy hypothesis
  fi
  _mmops_install_test_extras
  # The lint step (test/lint.sh) needs these exact versions: formatting must not
  # depend on the machine. Without a package index it is skipped, saying why.
  local bin
  bin="$("$MMOPS_PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  if ! "$bin/ruff" --version 2>/dev/null | grep -qx "ruff $MMOPS_RUFF_VERSION" \
     || ! "$bin/clang-format" --version 2>/dev/null | grep -q "version $MMOPS_CLANG_FORMAT_VERSION "; then
    _mmops_log "installing ruff $MMOPS_RUFF_VERSION and clang-format $MMOPS_CLANG_FORMAT_VERSION into $MMOPS_PY"
    "$MMOPS_PY" -m pip install -q "ruff==$MMOPS_RUFF_VERSION" "clang-format==$MMOPS_CLANG_FORMAT_VERSION" \
      || _mmops_log "could not install the lint tools; the lint step will be skipped"
  fi
  export MMOPS_PY
  MMOPS_TORCH_PREFIX="$("$MMOPS_PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  export MMOPS_TORCH_PREFIX
}

_mmops_have_gtest() {
  [ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ]
}

_mmops_ensure_tools() {
  # nvcc is often installed without being on PATH; torch's CMake looks for it there.
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  local missing=()
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  _mmops_have_gtest || missing+=(libgtest-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    _mmops_log "installing ${missing[*]} from Debian packages"
    if ! { _mmops_as_root apt-get update -qq && _mmops_as_root apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
      _mmops_log "could not install ${missing[*]}; C++ tests need GoogleTest"
    fi
  fi
}

# libtorch shares one libstdc++ with its extensions: a toolchain that can only
# link libstdc++ statically (seen on a GPU machine whose CXX is a wrapper around
# a bare GCC) builds a libmmops.so that crashes when it formats a message.
_mmops_pick_compiler() {
  local cxx="${CXX:-$(command -v g++ || true)}"
  [ -n "$cxx" ] || return 0
  if [[ "$("$cxx" -print-file-name=libstdc++.so 2>/dev/null)" != /* ]] && [ -x /usr/bin/g++ ] \
     && [[ "$(/usr/bin/g++ -print-file-name=libstdc++.so)" == /* ]]; then
    _mmops_log "$cxx cannot link libstdc++ dynamically; using /usr/bin/g++"
    export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
  fi
}

mmops_setup() {
  _mmops_ensure_tools
  _mmops_pick_compiler
  _mmops_pick_python
  _mmops_log "python: $MMOPS_PY ($("$MMOPS_PY" -c 'import torch; print("torch", torch.__version__, "cuda" if torch.cuda.is_available() else "no GPU")'))"
}

mmops_build() {
  MMOPS_BUILD_DIR="${MMOPS_BUILD_DIR:-$MMOPS_ROOT/build}"
  MMOPS_INSTALL_DIR="${MMOPS_INSTALL_DIR:-$MMOPS_BUILD_DIR/install}"
  export MMOPS_BUILD_DIR MMOPS_INSTALL_DIR
  local generator=()
  if command -v ninja >/dev/null 2>&1 && [ ! -f "$MMOPS_BUILD_DIR/Makefile" ]; then
    generator=(-G Ninja)
  fi
  cmake -S "$MMOPS_ROOT" -B "$MMOPS_BUILD_DIR" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DMMOPS_PYTHON="$MMOPS_PY" ${MMOPS_CMAKE_ARGS:-} || return
  # One build directory for both commands: the demo builds the library target
  # only, the test command then adds the test programs to the same tree.
  local targets=() t
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$MMOPS_BUILD_DIR" --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" "${targets[@]}" || return
  cmake --install "$MMOPS_BUILD_DIR" --prefix "$MMOPS_INSTALL_DIR" >/dev/null || return
  _mmops_log "built ${*:-everything} in $MMOPS_BUILD_DIR, installed mmops into $MMOPS_INSTALL_DIR"
}
