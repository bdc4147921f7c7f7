#!/usr/bin/env bash
# The whole test suite, from a fresh machine: sets up what is missing, builds
# mmops with its tests, runs everything through ctest (GoogleTest, pytest, the
# find_package consumer) and lists the skipped tests with their reasons.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/bootstrap.sh
mmops_setup
mmops_build

# A line per test as it finishes (each pytest file is a test: pytest.<name>).
# MMOPS_TEST_JOBS tests at a time (default 1: on 2 shared cores -j2 was no faster,
# see README). Arguments go to ctest after these: -j2, -R pytest, -V (pytest's lines).
status=0
(cd "$MMOPS_BUILD_DIR" && ctest --output-on-failure --timeout 3000 --parallel "${MMOPS_TEST_JOBS:-1}" "$@") \
  || status=$?

log="$MMOPS_BUILD_DIR/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  skipped="$(grep -E "^SKIPPED \[|: Skipped$" -A1 "$log" | grep -v -- "^--$" || true)"
  if [ -n "$skipped" ]; then
    echo
    echo "Skipped tests and why:"
    echo "$skipped" | sed 's/^/  /'
  fi
fi
exit $status
