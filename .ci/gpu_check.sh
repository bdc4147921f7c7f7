#!/usr/bin/env bash
# For a machine with a CUDA GPU (CI has none): the checks every CUDA change needs.
#   tests     the README's test command (the CUDA tests run instead of skipping)
#   cuda      build, then only the C++ tests and the pytest tests marked `cuda` (quick)
#   sanitize  compute-sanitizer memcheck, racecheck, synccheck and initcheck on the CUDA
#             tests (memcheck: all of them; the other tools: a subset, see the step)
#   demo      the README's demo command
#   bench     every benchmarks/bench_*.py on the GPU
#   multigpu  (optional, not a default step) test_multi_gpu.py: every op on cuda:1 and with its
#             inputs spread over two GPUs, CUDA graphs on cuda:1, a DDP step over NCCL; only
#             when nvidia-smi lists two GPUs or more (builds the library if it is missing)
# Logs go to $OUT if set, else build-gpu/logs. Usage: .ci/gpu_check.sh [step]...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export MMOPS_BUILD_DIR="${MMOPS_BUILD_DIR:-$PWD/build-gpu}"
LOGS="${OUT:-$MMOPS_BUILD_DIR/logs}"
mkdir -p "$LOGS"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests sanitize demo bench)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$LOGS/gpu.txt"

for step in "${steps[@]}"; do
  echo "=================== $step"
  case "$step" in
    tests)
      ./test/run_tests.sh > "$LOGS/tests.log" 2>&1; echo "tests rc=$?"
      grep -E "tests passed|tests failed|Failed|passed|failed" "$LOGS/tests.log" | tail -25 ;;
    cuda)  # build, then only the C++ tests and the CUDA pytest file (quick)
      { source .ci/bootstrap.sh && mmops_setup && mmops_build; } > "$LOGS/build.log" 2>&1
      echo "build rc=$?"; grep -E "error|FAILED" "$LOGS/build.log" | head -20
      (cd "$MMOPS_BUILD_DIR" && ctest -E pytest --output-on-failure) > "$LOGS/ctest.log" 2>&1
      echo "ctest rc=$?"; grep -E "tests passed|Failed|\*\*\*" "$LOGS/ctest.log" | head -20
      PYTHONPATH=python MMOPS_LIBRARY="$MMOPS_BUILD_DIR/libmmops.so" python3 -m pytest -q -rs \
        test/python -m "cuda and not multi_gpu" -p no:cacheprovider > "$LOGS/pytest_cuda.log" 2>&1
      echo "pytest cuda rc=$?"; grep -E "passed|failed|Error|assert" "$LOGS/pytest_cuda.log" | tail -25 ;;
    sanitize)  # compute-sanitizer, every tool, over the CUDA tests (build first: the cuda step)
      [ -x "$MMOPS_BUILD_DIR/test/mmops_cpp_tests" ] || { source .ci/bootstrap.sh && mmops_setup && mmops_build; } \
        > "$LOGS/build.log" 2>&1
      export PYTHONPATH=python MMOPS_LIBRARY="$MMOPS_BUILD_DIR/libmmops.so"
      # memcheck: every CUDA gtest and every pytest test marked cuda (slow ones left out).
      # racecheck, synccheck, initcheck are 10-100x slower: the CUDA gtests, and of pytest
      # the conformance CUDA == CPU tests in float32 plus the property tests' CUDA == CPU.
      subset=(-k "float32 or drawn_inputs")  # a keyword filter on top of -m
      for tool in memcheck racecheck synccheck initcheck; do
        san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20)
        [ "$tool" = memcheck ] && san+=(--leak-check no)
        # the 8-thread concurrency tests take minutes under racecheck: memcheck covers them
        filter='*Cuda*'; [ "$tool" = racecheck ] && filter='*Cuda*:-Concurrency.*'
        "${san[@]}" "$MMOPS_BUILD_DIR/test/mmops_cpp_tests" --gtest_filter="$filter" \
          > "$LOGS/sanitize_${tool}_gtest.log" 2>&1
        echo "$tool gtest rc=$?"; tail -3 "$LOGS/sanitize_${tool}_gtest.log"
        keywords=("${subset[@]}"); [ "$tool" = memcheck ] && keywords=()
        "${san[@]}" python3 -m pytest -q test/python -m "cuda and not slow and not multi_gpu" "${keywords[@]}" \
          -p no:cacheprovider \
          > "$LOGS/sanitize_${tool}_pytest.log" 2>&1
        echo "$tool pytest rc=$?"; tail -3 "$LOGS/sanitize_${tool}_pytest.log"
      done ;;
    multigpu)  # two GPUs or more: the multi-GPU suite (NVLink multicast off for NCCL)
      gpus="$(nvidia-smi --list-gpus 2>/dev/null | grep -c '^GPU ')"
      if [ "$gpus" -lt 2 ]; then echo "multigpu: skipped, nvidia-smi lists $gpus GPU(s)"; continue; fi
      [ -f "$MMOPS_BUILD_DIR/libmmops.so" ] || { source .ci/bootstrap.sh && mmops_setup && mmops_build mmops; } \
        > "$LOGS/build.log" 2>&1
      NCCL_NVLS_ENABLE=0 PYTHONPATH=python MMOPS_LIBRARY="$MMOPS_BUILD_DIR/libmmops.so" python3 -m pytest -q -rs \
        -m multi_gpu test/python/test_multi_gpu.py -p no:cacheprovider > "$LOGS/pytest_multi_gpu.log" 2>&1
      echo "pytest multi_gpu rc=$?"; grep -E "passed|failed|Error|assert" "$LOGS/pytest_multi_gpu.log" | tail -40 ;;
    demo)
      ./examples/run_demo.sh > "$LOGS/demo.log" 2>&1; echo "demo rc=$?"; tail -15 "$LOGS/demo.log" ;;
    bench)
      for script in benchmarks/bench_*.py; do
        name="$(basename "$script" .py)"
        PYTHONPATH=python MMOPS_LIBRARY="$MMOPS_BUILD_DIR/libmmops.so" python3 "$script" --device cuda \
          > "$LOGS/$name.log" 2>&1; echo "$name rc=$?"; tail -40 "$LOGS/$name.log"
      done ;;
  esac
done
