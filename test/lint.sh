#!/usr/bin/env bash
# The lint step of the test command (run by ctest): C++/CUDA sources formatted
# as .clang-format says, Python sources clean and formatted as ruff.toml says.
# Uses the pinned tools that .ci/bootstrap.sh installs into $MMOPS_PYTHON.
# Exit status: 0 clean, 1 findings (the diff is printed), 77 tools missing.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py="${MMOPS_PYTHON:-python3}"
bin="$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null)"
ruff="$bin/ruff" clang_format="$bin/clang-format"
ruff_version="${MMOPS_RUFF_VERSION:-0.17.6}"
clang_format_version="${MMOPS_CLANG_FORMAT_VERSION:-14.0.6}"

if ! "$ruff" --version 2>/dev/null | grep -qx "ruff $ruff_version" ||
   ! "$clang_format" --version 2>/dev/null | grep -q "version $clang_format_version "; then
  echo "SKIPPED: lint needs ruff $ruff_version and clang-format $clang_format_version in $py" \
       "(${bin:-?}; pip install ruff==$ruff_version clang-format==$clang_format_version)"
  exit 77
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t cxx < <(git ls-files -co --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh')
else
  mapfile -t cxx < <(find include src kernels test examples -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')
fi

status=0
for f in "${cxx[@]}"; do
  [ -f "$f" ] || continue
  if ! "$clang_format" --style=file "$f" | diff -u "$f" - >/tmp/mmops-lint.diff; then
    echo "clang-format: $f is not formatted:"; head -40 /tmp/mmops-lint.diff; status=1
  fi
done
"$ruff" check --no-cache . || status=1
"$ruff" format --no-cache --check --diff . || status=1
[ $status -eq 0 ] && echo "lint: ${#cxx[@]} C++/CUDA files and the Python sources are clean"
exit $status
