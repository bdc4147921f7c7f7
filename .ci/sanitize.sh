#!/usr/bin/env bash
# CPU build of mmops with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DMMOPS_SANITIZE=ON, CUDA off) in build-sanitize/, then the C++ tests and a
# pytest subset that calls every op: the conformance suite without the graph
# tests (torch.compile / torch.export exercise torch, not mmops) and every
# op's own tests, CUDA and slow ones left out, and without the files that run
# other code (mmdet, ONNX, benchmarks, packaging: outside_mmops below).
# libtorch is not instrumented: python gets the ASan runtime through
# LD_PRELOAD, leak detection is off, and .ci/asan.supp / .ci/ubsan.supp keep
# reports about libtorch's own frames from failing the run. Any report in
# mmops' code fails it.
# Usage: .ci/sanitize.sh [extra pytest arguments]; logs in build-sanitize/logs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/bootstrap.sh
mmops_setup
export MMOPS_BUILD_DIR="${MMOPS_SANITIZE_BUILD_DIR:-$MMOPS_ROOT/build-sanitize}"
MMOPS_CMAKE_ARGS="${MMOPS_CMAKE_ARGS:-} -DMMOPS_WITH_CUDA=OFF -DMMOPS_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo"
export MMOPS_CMAKE_ARGS
start=$SECONDS
mmops_build
_mmops_log "sanitizer build: $((SECONDS - start)) s"
logs="$MMOPS_BUILD_DIR/logs"
mkdir -p "$logs"

asan_runtime="$("${CXX:-g++}" -print-file-name=libasan.so)"
[[ "$asan_runtime" == /* ]] || { _mmops_log "no ASan runtime found ($asan_runtime)"; exit 1; }
# python does not link libstdc++: preloaded with the runtime, ASan's __cxa_throw
# interceptor finds the real one (else the first C++ exception aborts).
preload="$asan_runtime $("${CXX:-g++}" -print-file-name=libstdc++.so.6)"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=66:alloc_dealloc_mismatch=0:allocator_may_return_null=1:max_allocation_size_mb=8192:suppressions=$MMOPS_ROOT/.ci/asan.supp"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=67:suppressions=$MMOPS_ROOT/.ci/ubsan.supp"

status=0
start=$SECONDS
"$MMOPS_BUILD_DIR/test/mmops_cpp_tests" --gtest_filter='-*Cuda*' > "$logs/gtest.log" 2>&1 || status=$?
tail -3 "$logs/gtest.log"
_mmops_log "C++ tests under the sanitizers: rc=$status, $((SECONDS - start)) s (log: $logs/gtest.log)"
if grep -qE "ERROR: AddressSanitizer|runtime error:" "$logs/gtest.log"; then
  grep -E -A30 "ERROR: AddressSanitizer|runtime error:" "$logs/gtest.log" | head -60
  status=1
fi

# Files whose time goes to other code than mmops' kernels (mmdet training loops, the ONNX
# exporter and onnxruntime, benchmark scripts, pip subprocesses): the op tests already
# call every kernel these reach.
outside_mmops=()
for name in test_mmdet test_onnx test_benchmarks test_packaging; do
  outside_mmops+=(--ignore "$MMOPS_ROOT/test/python/$name.py")
done
start=$SECONDS
rc=0
LD_PRELOAD="$preload" PYTHONPATH="$MMOPS_ROOT/python" MMOPS_LIBRARY="$MMOPS_BUILD_DIR/libmmops.so" \
  "$MMOPS_PY" -m pytest "$MMOPS_ROOT/test/python" -q -rs -p no:cacheprovider \
  -m "not cuda and not slow" -k "not test_compile and not test_export" "${outside_mmops[@]}" "$@" \
  > "$logs/pytest.log" 2>&1 || rc=$?
tail -5 "$logs/pytest.log"
_mmops_log "pytest under the sanitizers: rc=$rc, $((SECONDS - start)) s (log: $logs/pytest.log)"
if grep -qE "ERROR: AddressSanitizer|runtime error:" "$logs/pytest.log"; then
  grep -E -A30 "ERROR: AddressSanitizer|runtime error:" "$logs/pytest.log" | head -60
  rc=1
fi
[ $rc -eq 0 ] || status=$rc
exit $status
