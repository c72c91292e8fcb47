#!/usr/bin/env bash
# The main job on the bundled example: migrate a single-device LibTorch
# program, build it against the runtime with find_package(Fabric), and train
# it with 2 processes on CPU. Rank 0 prints the losses.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
rm -rf "$out"

echo "== fabricize examples/sine_regression/train.cpp -> $out"
build/bin/fabricize examples/sine_regression/train.cpp -o "$out" --emit-cmake \
  --accelerator cpu --devices 2
diff -u examples/sine_regression/train.cpp "$out/train.cpp" || true

echo "== build against the Fabric runtime"
cmake -S "$out" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/build" > /dev/null
cmake --build "$out/build"

echo "== train with 2 processes"
cd "$out" && ./build/train
