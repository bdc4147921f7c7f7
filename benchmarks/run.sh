#!/usr/bin/env bash
# Runs a benchmark with the python the set-up made (MMOPS_PY of .ci/bootstrap.sh)
# and the library of the build (build/libmmops.so), from any directory:
#
#   benchmarks/run.sh roi_align [--device cpu|cuda] [--quick] [--json out.json] [--csv out.csv] ...
#   benchmarks/run.sh all [options] [--out-dir DIR]   every bench_*.py; with --out-dir each writes
#                                                     DIR/<name>.json and .csv, then DIR/speedups.png
#   benchmarks/run.sh plot results.json... -o out.png
#
# Build first (./examples/run_demo.sh, ./test/run_tests.sh, or mmops_build of .ci/bootstrap.sh).
# The python: $MMOPS_PYTHON, else a python3 that has torch, else $MMOPS_VENV or .venv (the order
# of bootstrap's mmops_setup, which this does not run: nothing is installed here).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ -n "${MMOPS_PYTHON:-}" ]; then
  py="$MMOPS_PYTHON"
elif python3 -c "import torch" >/dev/null 2>&1; then
  py="$(command -v python3)"
else
  py="${MMOPS_VENV:-$root/.venv}/bin/python"
fi
if ! "$py" -c "import torch" >/dev/null 2>&1; then
  echo "error: no python with torch ($py); run ./examples/run_demo.sh or ./test/run_tests.sh first" >&2
  exit 1
fi
library="${MMOPS_LIBRARY:-${MMOPS_BUILD_DIR:-$root/build}/libmmops.so}"
if [ ! -f "$library" ]; then
  echo "error: $library not found; build mmops first (./examples/run_demo.sh)" >&2
  exit 1
fi
export MMOPS_LIBRARY="$library" PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"

name="${1:-}"
[ -n "$name" ] || { sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 2; }
shift
case "$name" in
  plot) exec "$py" "$root/benchmarks/plot.py" "$@" ;;
  all)
    args=() out_dir=""
    while [ $# -gt 0 ]; do
      if [ "$1" = --out-dir ]; then out_dir="$2"; shift 2; else args+=("$1"); shift; fi
    done
    status=0 results=()
    for script in "$root"/benchmarks/bench_*.py; do
      bench="$(basename "$script" .py)"; bench="${bench#bench_}"
      [ "$bench" = common ] && continue
      outputs=()
      if [ -n "$out_dir" ]; then
        outputs=(--json "$out_dir/$bench.json" --csv "$out_dir/$bench.csv")
        results+=("$out_dir/$bench.json")
      fi
      echo "== $bench" >&2
      "$py" "$script" "${args[@]}" "${outputs[@]}" || { status=1; echo "== $bench failed" >&2; }
    done
    existing=()
    for f in "${results[@]}"; do [ -f "$f" ] && existing+=("$f"); done
    if [ ${#existing[@]} -gt 0 ]; then
      if "$py" -c "import matplotlib" >/dev/null 2>&1; then
        "$py" "$root/benchmarks/plot.py" "${existing[@]}" -o "$out_dir/speedups.png" || status=1
      else
        echo "matplotlib is not installed in $py: no plot (pip install matplotlib)" >&2
      fi
    fi
    exit $status ;;
  *)
    script="$root/benchmarks/bench_${name%.py}.py"
    script="${script/bench_bench_/bench_}"
    [ -f "$script" ] || { echo "error: no $script" >&2; exit 2; }
    exec "$py" "$script" "$@" ;;
esac
