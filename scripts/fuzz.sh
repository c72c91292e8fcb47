#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz/) with clang-19 + ASan + UBSan in
# build-fuzz/ and runs each for a bounded number of inputs, starting from the
# committed seed corpus (test/fuzz/corpus/<target>/; every input that ever
# crashed a target is kept there, so it is replayed on every run).
#
#   scripts/fuzz.sh              the CI budget: 50000 LSP inputs, 200000 config inputs
#   FABRIC_FUZZ_RUNS=5000000 scripts/fuzz.sh   that many inputs per target, on demand
#   scripts/fuzz.sh fuzz_lsp -max_total_time=600   one target, libFuzzer flags
#
# A crash, a leak, a sanitizer report, a broken invariant, a timeout (10 s per
# input) or more than 2 GiB of memory fails the script; the input is written
# to build-fuzz/artifacts/. The number of inputs each target ran is printed
# (docs/reliability.md records them).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${FABRIC_FUZZ_BUILD:-build-fuzz}"
declare -A ci_runs=([fuzz_lsp]=50000 [fuzz_config]=200000)  # a few minutes on 2 cores
targets=(fuzz_lsp fuzz_config)
if [ $# -gt 0 ]; then targets=("$1"); shift; fi

if ! command -v clang++-19 >/dev/null; then
  echo "fuzz.sh: clang++-19 is missing (scripts/setup.sh installs clang-19 and libclang-rt-19-dev)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-19 \
        -DFABRIC_BUILD_RUNTIME=OFF -DFABRIC_BUILD_TOOL=OFF -DFABRIC_BUILD_TESTS=OFF -DFABRIC_BUILD_FUZZERS=ON >/dev/null
fi
cmake --build "$build" --target "${targets[@]}"

mkdir -p "$build/artifacts"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for target in "${targets[@]}"; do
  name="${target#fuzz_}"
  runs="${FABRIC_FUZZ_RUNS:-${ci_runs[$target]}}"
  seeds="test/fuzz/corpus/$name"
  work="$build/corpus/$name"  # what the fuzzer finds; the seeds stay untouched
  mkdir -p "$work"
  log="$build/$target.log"
  start=$(date +%s)
  if ! "$build/bin/$target" "$work" "$seeds" -dict="test/fuzz/$name.dict" -runs="$runs" -seed=1 \
        -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix="$build/artifacts/$target-" "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz.sh: $target FAILED; the input is in $build/artifacts/ (full log: $log)" >&2
    exit 1
  fi
  executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  echo "fuzz.sh: $target: $executed inputs, coverage $coverage edges, no failure ($(( $(date +%s) - start )) s)"
done
