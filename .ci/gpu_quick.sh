#!/usr/bin/env bash
# One short GPU session in one call (a machine that gives ~10 minutes a command):
# build, then only what the environment names. .ci/gpu_check.sh runs everything.
#   TARGETS   build targets (default: mmops mmops_cpp_tests)
#   FILES     test/python files for `pytest -m $MARK` (MARK default: cuda), PYT: its timeout
#   GTEST     a gtest filter for mmops_cpp_tests (e.g. '*Cuda*')
#   MEMFILES  files for compute-sanitizer memcheck (-m "cuda and not slow" -k "$MEMK",
#             MEMK default: float32), SANT: its timeout
#   EXTRA     a command to eval after those
#   BENCHES   benchmark names (bench_<name>.py --device cuda), BT: each one's timeout;
#             none starts after BENCH_UNTIL seconds
# Logs and benchmark tables go to $OUT (default /tmp/out). No package index is used.
# Example: FILES=test_psa_mask.py MEMFILES=test_psa_mask.py BENCHES=psa_mask .ci/gpu_quick.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
T0=$SECONDS
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
export MMOPS_BUILD_DIR="$PWD/build-gpu"
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"
{ source .ci/bootstrap.sh && mmops_setup && mmops_build ${TARGETS:-mmops mmops_cpp_tests}; } > "$O/build.log" 2>&1
echo "build rc=$? at $((SECONDS-T0)) s"; grep -E "error|FAILED" "$O/build.log" | head -20
export PYTHONPATH=$PWD/python MMOPS_LIBRARY="$MMOPS_BUILD_DIR/libmmops.so"
if [ -n "${FILES:-}" ]; then
  (cd test/python && timeout "${PYT:-400}" python3 -m pytest -q -rf -p no:cacheprovider -m "${MARK:-cuda}" $FILES) > "$O/pytest.log" 2>&1
  echo "pytest rc=$? at $((SECONDS-T0)) s"; grep -E "^FAILED|passed|failed|rror" "$O/pytest.log" | tail -30
fi
if [ -n "${GTEST:-}" ]; then
  timeout 200 "$MMOPS_BUILD_DIR/test/mmops_cpp_tests" --gtest_filter="$GTEST" > "$O/gtest.log" 2>&1
  echo "gtest rc=$? at $((SECONDS-T0)) s"; grep -E "FAILED|PASSED" "$O/gtest.log" | tail -15
fi
if [ -n "${MEMFILES:-}" ]; then
  (cd test/python && timeout "${SANT:-300}" compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider -m "cuda and not slow" -k "${MEMK:-float32}" $MEMFILES) > "$O/memcheck.log" 2>&1
  echo "memcheck rc=$? at $((SECONDS-T0)) s"; grep -E "ERROR SUMMARY|passed|failed" "$O/memcheck.log" | tail -5
fi
if [ -n "${EXTRA:-}" ]; then eval "$EXTRA"; fi
for b in ${BENCHES:-}; do
  if [ $((SECONDS-T0)) -gt "${BENCH_UNTIL:-480}" ]; then echo "skip bench $b (time)"; continue; fi
  timeout "${BT:-120}" python3 benchmarks/bench_$b.py --device cuda > "$O/bench_$b.txt" 2>&1
  echo "bench $b rc=$? at $((SECONDS-T0)) s"; tail -4 "$O/bench_$b.txt"
done
echo "done at $((SECONDS-T0)) s"
