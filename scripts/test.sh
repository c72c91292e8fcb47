#!/usr/bin/env bash
# Runs every test: lit rule and tool tests, runtime tests with real
# processes and Gloo, end-to-end migrations of examples/ and ../shared/corpus
# (ctest on build/, LibTorch 1.13), then LibTorch 2.x: the runtime built
# with NCCL and its tests, the tool's migrations against 2.x headers, one
# program verified end to end on 2.x (scripts/test_libtorch2.sh,
# build-torch2/; docs/libtorch2.md), then the reliability steps: the
# libFuzzer targets for a bounded number of inputs (scripts/fuzz.sh,
# build-fuzz/) and the unit, lit, LSP and runtime tests again under
# ASan+UBSan (scripts/sanitize.sh, build-asan/).
#
#   scripts/test.sh              everything (what CI runs)
#   scripts/test.sh -R lit       ctest on build/ with these arguments, nothing else
#   FABRIC_TEST_QUICK=1 scripts/test.sh   ctest on build/ only
# Either way the script says that the reliability steps were skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || scripts/setup.sh --no-demo
step() {  # name, command...: runs it and prints how long it took
  local name="$1" start; shift
  start=$(date +%s)
  "$@"
  echo "test.sh: $name took $(( $(date +%s) - start )) s"
}
step "build" cmake --build build -j "$(nproc)"
# Two tests at a time on two cores: -j 3 was measured slower under CI
# (ctest 1670 s against ~1450 s: the builds and verifies, most of the time,
# are CPU-bound and only fought over the cores).
if [ "${FABRIC_TEST_QUICK:-0}" = 1 ] || [ $# -gt 0 ]; then
  step "ctest" ctest --test-dir build --output-on-failure -j 2 "$@"
  echo "test.sh: a partial run (ctest arguments or FABRIC_TEST_QUICK=1): the LibTorch 2.x, fuzz and sanitizer steps were NOT run" >&2
  exit 0
fi
# The runtime scenarios the sanitizer step runs below are not run here too
# (scripts/runtime_test_runs.sh): each runs once per LibTorch build.
source scripts/runtime_test_runs.sh
sanitized="$(sanitized_runtime_tests build)"
step "ctest" ctest --test-dir build --output-on-failure -j 2 ${sanitized:+-E "$sanitized"}
echo "test.sh: $(tr -cd '|' <<<"${sanitized:+|$sanitized}" | wc -c) runtime scenarios left to the sanitizer step (1.13 under ASan+UBSan) and the LibTorch 2.x step"
step "LibTorch 2.x (scripts/test_libtorch2.sh)" scripts/test_libtorch2.sh
step "fuzz (scripts/fuzz.sh)" scripts/fuzz.sh
step "sanitizers (scripts/sanitize.sh)" scripts/sanitize.sh
