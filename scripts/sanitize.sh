#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the tool and the
# runtime with clang++-19 (in build-asan/, beside the normal GCC build), then the unit, lit,
# LSP, reliability and runtime multi-process tests under it.
#
#   scripts/sanitize.sh                 configure, build, test
#   scripts/sanitize.sh -R reliability  extra arguments go to ctest
#
# Environment: FABRIC_SANITIZE_BUILD (build directory, default build-asan),
# FABRIC_SANITIZE_JOBS (build jobs, default: the cores).
#
# Not run: the e2e and verify tests (each builds migrated programs against the runtime:
# the sanitizer flags do not reach those builds, and they cost most of the
# time) and the clang-tidy plugin tests (an ASan-instrumented plugin cannot
# be loaded into the uninstrumented clang-tidy), and lsp.memory (ASan keeps
# freed memory in its quarantine: the resident size measures ASan, not the
# server). LibTorch and LLVM themselves
# are not instrumented: ASan checks our code and what it hands them.
# detect_container_overflow is off because std::vector annotations are only
# consistent when every library touching a vector is instrumented (LibTorch
# is not); leak checking is off because LibTorch and LLVM keep process-lifetime
# allocations on purpose. Any other report stops the test that triggered it.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${FABRIC_SANITIZE_BUILD:-build-asan}"
jobs="${FABRIC_SANITIZE_JOBS:-$(nproc)}"
# -O0 -g1 (line tables): the build time CI can afford. The rules' TUs are
# mostly AST-matcher template instantiations, which -O1 spent a third of
# their compile time optimising (fabric-device-move.cpp: 30 s at -O1 with
# the PCH, 20 s at -O0 without); LibTorch and LLVM, where the tests spend
# their time, are optimised builds either way. (RelWithDebInfo took over
# 30 min on 2 cores.)
sanitize="-O0 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# clang++-19 (installed for the fuzzers): at -O0 with the sanitizers it
# compiles the rules' matcher code 2.7x faster than GCC (fabric-device-move.cpp:
# 17.8 s against 47.5 s).
if ! command -v clang++-19 >/dev/null; then
  echo "sanitize.sh: clang++-19 is missing (scripts/setup.sh installs clang-19 and libclang-rt-19-dev)" >&2
  exit 2
fi
if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-19' "$build/CMakeCache.txt"; then
  rm -rf "$build"  # configured by an older script with GCC: CMake cannot switch a build's compiler
fi
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DFABRIC_BUILD_TESTS=ON \
      -DCMAKE_CXX_COMPILER=clang++-19 \
      -DFABRIC_BUILD_TIDY_PLUGIN=OFF \
      -DCMAKE_CXX_FLAGS="$sanitize" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build "$build" -j "$jobs"
built=$(date +%s)
echo "sanitize.sh: build took $((built - start)) s"
# A build that lost the flags would pass everything and check nothing: each
# program must hold clang's AddressSanitizer runtime (linked in statically)
# and the library must be instrumented. (nm's output is read whole first:
# `nm | grep -q` under pipefail fails whenever grep exits on the first match
# before nm has written the rest.)
for binary in bin/fabricize bin/fabric_runtime_unit_tests bin/fabric_multiprocess_program lib/libfabric.so; do
  symbols="$(nm "$build/$binary" 2>/dev/null || true)"
  if ! grep -qE ' (__asan_init|__asan_report_load8)$' <<<"$symbols"; then
    echo "sanitize.sh: $build/$binary is not built with AddressSanitizer; the sanitizer flags did not apply" >&2
    exit 1
  fi
done

export ASAN_OPTIONS="detect_leaks=0:detect_container_overflow=0:halt_on_error=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The fuzz test's 60 seed-1 variants run in the main ctest; here 40 others
# (seed 2) under the sanitizers: 145 s -> 43 s of CI, and variants the main
# run does not see.
export FABRIC_FUZZ_CASES="${FABRIC_FUZZ_CASES:-40}" FABRIC_FUZZ_SEED="${FABRIC_FUZZ_SEED:-2}"
# Every runtime scenario runs here once, not its repeats
# (scripts/runtime_test_runs.sh says which run checks what).
source scripts/runtime_test_runs.sh
ctest --test-dir "$build" --output-on-failure -j 2 -E "^(e2e|tidy|verify)\.|^lsp\.memory\$|$runtime_repeats" "$@"
echo "sanitize.sh: tests took $(( $(date +%s) - built )) s"
