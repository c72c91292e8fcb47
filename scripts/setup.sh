#!/usr/bin/env bash
# Sets up a Debian 12 machine for fabricize, builds everything, and runs the
# main job: migrate examples/sine_regression with fabricize, build the result
# against the Fabric runtime, train it with 2 processes on CPU.
#
#   scripts/setup.sh            install what is missing, build, run the demo
#   scripts/setup.sh --no-demo  install and build only
#
# Everything comes from Debian's packages; nothing else is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ python3
  llvm-19-dev libclang-19-dev clang-19 llvm-19-tools  # the tool, lit, FileCheck
  clang-tidy-19                                       # loads the clang-tidy plugin (build/lib/libfabric_tidy.so)
  clang-format-19                                     # ctest tool.format: the layout .clang-format sets
  libclang-rt-19-dev                                  # libFuzzer and the sanitizer runtimes for clang-19 (test/fuzz)
  libomp-19-dev                                       # Clang's omp.h: GCC's does not parse with Clang (-fopenmp projects)
  libboost-dev                                        # test/shapes/vendored_deps builds with Boost's headers, as research code does
  libtorch-dev libgloo-dev                            # LibTorch 1.13 with c10d; c10d's Gloo headers
  libopenblas0-pthread                                # several times faster CPU training than reference BLAS
  nlohmann-json3-dev libfmt-dev libgtest-dev
  protobuf-compiler                                   # runtime.loggers cross-checks event files with protoc --decode_raw
  python3-torch                                       # bench/compare_ddp.py: PyTorch's own DDP for comparison
  graphviz                                            # docs.architecture regenerates docs/architecture/*.svg to check them
  iproute2                                            # test/multinode: test hosts are network namespaces (ip netns, ss)
  neovim                                              # lsp.nvim: a real editor (nvim --headless, built-in LSP client) applies the fixes
  python3-venv                                        # scripts/libtorch2.sh: LibTorch 2.x from PyPI in a virtual environment
  dpkg-dev                                            # CPack's Debian package: dpkg-shlibdeps (ctest package.deb, docs/install.md)
  chromium                                            # ctest verify.report_in_browser: the HTML reports in a real browser
)

started=$(date +%s)
missing=()
for package in "${PACKAGES[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

echo "setup: packages took $(( $(date +%s) - started )) s"

jobs=$(nproc)
started=$(date +%s)
# clang++-19 (installed above with the Clang libraries the tool uses) builds
# the tool and the runtime: 187 s against GCC's 410 s on 2 cores, most of it
# the rules' AST-matcher code. GCC still builds the runtime against
# LibTorch 2.x (scripts/test_libtorch2.sh) and the programs users build.
compiler=/usr/bin/clang++-19
if [ -f build/CMakeCache.txt ] && ! grep -q "^CMAKE_CXX_COMPILER:FILEPATH=$compiler\$" build/CMakeCache.txt; then
  rm -rf build/CMakeCache.txt build/CMakeFiles  # configured with another compiler: CMake cannot switch
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$compiler" \
      -DFABRIC_BUILD_RUNTIME=ON -DFABRIC_BUILD_TOOL=ON -DFABRIC_BUILD_TESTS=ON
cmake --build build -j "$jobs"
echo "setup: build took $(( $(date +%s) - started )) s"

if [ "${1:-}" != "--no-demo" ]; then
  started=$(date +%s)
  scripts/demo.sh
  echo "setup: the main job (scripts/demo.sh) took $(( $(date +%s) - started )) s"
fi
