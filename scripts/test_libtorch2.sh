#!/usr/bin/env bash
# The runtime and the tool against LibTorch 2.x (scripts/libtorch2.sh: PyPI's
# CUDA torch wheel, installed once per machine), beside the default build on
# Debian's 1.13:
#   1. build-torch2/: the runtime alone, configured with
#      -DCMAKE_PREFIX_PATH=<the wheel's LibTorch> as users configure theirs;
#      the wheel is a CUDA build, so the NCCL path (USE_C10D_NCCL, CUDA
#      device placement, the NCCL process group, CUDA AMP) is compiled and
#      linked too (no GPU here: it runs on the GPU machine, bench/gpu);
#   2. its tests: the runtime's unit and multi-process tests (launch, ddp,
#      zero1/zero2, precision, collectives, checkpoints, loggers, fault and
#      multi-node tests) with real Gloo on CPU; runtime.loggers reads the
#      event files with TensorBoard's own reader (the environment's
#      tensorboard package);
#   3. the tool on 2.x headers: every shape, example and ../shared/corpus
#      program migrates byte for byte as against 1.13, with the same
#      findings (test/e2e/same_migration_on_libtorch2.py; a PCH of each);
#   4. end to end: fabricize verify migrates examples/sine_regression
#      against 2.x's headers, builds the original and the migration against
#      build-torch2's Fabric, runs both and compares (docs/verify.md);
#   5. DataParallel for real: test/libtorch2/data_parallel, a CMake trainer
#      that calls torch::nn::parallel::data_parallel (its header needs CUDA's,
#      so Debian's CPU 1.13 cannot compile it), configured against 2.x as its
#      user would, migrated through its compile commands and verified the
#      same way; no data_parallel call may be left in the migration;
#   6. the runtime from source in a user's project: FetchContent of this
#      checkout's commit (tool off), the migrated example built with it and
#      trained on 2 processes (docs/install.md).
#
#   scripts/test_libtorch2.sh            all six
#   scripts/test_libtorch2.sh -R ddp     step 2 with these ctest arguments only
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(scripts/libtorch2.sh --tensorboard)"
# runtime.loggers reads the runtime's event files with TensorBoard's own
# reader too, in this environment (issue 41 point 4).
export FABRIC_TENSORBOARD_PYTHON="$(scripts/libtorch2.sh --python)"
version="$(sed -n 's/^__version__ = .\([0-9.]*\).*/\1/p' "$root/version.py" | head -1)"
echo "test_libtorch2.sh: LibTorch $version at $root"
step() {  # name, command...: runs it and prints how long it took; fails as it does
  # (explicitly: called as `step ... || ...`, bash turns set -e off inside)
  local name="$1" start status=0; shift
  start=$(date +%s)
  "$@" || status=$?
  echo "test_libtorch2.sh: $name took $(( $(date +%s) - start )) s"
  return "$status"
}
# clang++-19 builds the runtime and its tests here (the wheel's CUDA headers
# in each precompiled <torch/torch.h>: 215 s in CI against GCC's 386 s).
if [ -f build-torch2/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-19' build-torch2/CMakeCache.txt; then
  rm -rf build-torch2  # configured by an older script with GCC: CMake cannot switch a build's compiler
fi
mkdir -p build-torch2
step "configure" cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFABRIC_BUILD_TOOL=OFF \
  -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_PREFIX_PATH="$root" > build-torch2/configure.log 2>&1 ||
  { cat build-torch2/configure.log; exit 1; }
if ! grep -q '^FABRIC_WITH_NCCL:BOOL=ON' build-torch2/CMakeCache.txt; then
  echo "test_libtorch2.sh: the NCCL path is off against $root (a CUDA LibTorch was expected)" >&2
  exit 1
fi
step "build (runtime with NCCL, tests)" cmake --build build-torch2 -j "$(nproc)"
step "ctest (runtime on $version)" ctest --test-dir build-torch2 --output-on-failure -j 2 -E '^docs\.' "$@"
if [ $# -gt 0 ]; then
  echo "test_libtorch2.sh: ctest arguments given: the end-to-end step was NOT run" >&2
  exit 0
fi
step "the same migrations against $version's headers" python3 test/e2e/same_migration_on_libtorch2.py \
  --fabricize build/bin/fabricize --libtorch2 "$root"
# The tool parses against the 2.x headers named after --, the programs build
# against build-torch2's Fabric package.
work="build-torch2/verify-sine"
step "verify on $version (examples/sine_regression)" build/bin/fabricize verify \
  examples/sine_regression/train.cpp --steps 96 --accelerator cpu --work "$work" \
  --fabric-dir build-torch2 --report "$work.json" \
  -- -std=c++17 -DUSE_DISTRIBUTED -DUSE_C10D_GLOO -isystem "$root/include" \
  -isystem "$root/include/torch/csrc/api/include"
# The project finds its Torch through CMAKE_PREFIX_PATH (the environment's
# too, for the builds verify configures): 2.x, not Debian's 1.13 on the
# default paths. Its build folder and verify's work folder are kept, so a
# second run rebuilds only what changed.
# It is built with clang++-19 (CXX, as its user's CMake would take it): its
# two precompiled CUDA LibTorch headers (the original's and the migration's)
# cost GCC about twice as long; sine_regression above is GCC's.
dp="build-torch2/data-parallel"
step "configure test/libtorch2/data_parallel on $version" env CXX=clang++-19 cmake -S test/libtorch2/data_parallel \
  -B "$dp/original-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root" \
  > "$dp.configure.log" 2>&1 || { cat "$dp.configure.log"; exit 1; }
# --steps above the program's 256: it runs to its end (the test pass too).
step "verify on $version (test/libtorch2/data_parallel: DataParallel)" env CMAKE_PREFIX_PATH="$root" CXX=clang++-19 \
  build/bin/fabricize verify -p "$dp/original-build" --steps 1000 --accelerator cpu --work "$dp/verify" \
  --fabric-dir build-torch2 --report "$dp/verify.json"
# On CPU data_parallel is never reached (no GPU: the programs take their
# model->forward branch), so the run cannot tell whether the rule applied:
# the migrated sources must hold no call of it.
if grep -rnE --include='*.cpp' --include='*.h' '^[^/]*data_parallel[[:space:]]*(<[^>]*>)?\(' "$dp/verify/migrated"; then
  echo "test_libtorch2.sh: torch::nn::parallel::data_parallel is still called in the migration above" >&2
  exit 1
fi

# 6. The runtime from source in a user's own project (docs/install.md):
#    FetchContent of this checkout's commit (the tool and tests off, as in
#    any project that is not fabricize's), against the wheel's LibTorch
#    found through CMAKE_PREFIX_PATH, as the official archive's would be;
#    the migrated example built with it trains on 2 processes in sync.
#    clang++-19 compiles it: with GCC this step took ~315 s of CI against
#    ~90 s (stop 50), more than a CI run over its time could give.
fc="build-torch2/fetchcontent"
rm -rf "$fc" && mkdir -p "$fc"
commit="$(git rev-parse HEAD)"
if [ -n "$(git status --porcelain -- runtime cmake CMakeLists.txt)" ]; then
  echo "test_libtorch2.sh: runtime/ or the top CMake files have uncommitted changes: FetchContent builds commit $commit without them" >&2
fi
build/bin/fabricize examples/sine_regression/train.cpp -o "$fc/program" --accelerator cpu --devices 2 --quiet
step "FetchContent: configure a user's project on $version" env CXX=clang++-19 cmake -S test/libtorch2/fetchcontent \
  -B "$fc/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root" -DFABRIC_GIT="$PWD" \
  -DFABRIC_GIT_TAG="$commit" -DUSER_PROGRAM="$PWD/$fc/program/train.cpp" > "$fc/configure.log" 2>&1 ||
  { cat "$fc/configure.log"; exit 1; }
step "FetchContent: build the runtime and the program" cmake --build "$fc/build" -j "$(nproc)" > "$fc/build.log" 2>&1 ||
  { tail -60 "$fc/build.log"; exit 1; }
trained="$(cd "$fc" && FABRIC_CHECK_SYNC=1 ./build/train 2>&1)" || { echo "$trained"; exit 1; }
if ! grep -q "sync check passed: .* on 2 ranks" <<<"$trained"; then
  echo "$trained"
  echo "test_libtorch2.sh: the program built through FetchContent did not train in sync on 2 ranks" >&2
  exit 1
fi
echo "test_libtorch2.sh: FetchContent: $(grep "sync check passed" <<<"$trained")"
