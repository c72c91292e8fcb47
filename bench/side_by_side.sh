#!/usr/bin/env bash
# The C++ runtime against Python's Lightning Fabric (bench/lightning_side_by_side.py
# says what is measured): installs torch 2.x and lightning-fabric from PyPI once
# per machine (scripts/libtorch2.sh --lightning), builds the C++ side against
# that same torch in build-torch2/, and runs the comparison with that
# torch's Python. Arguments go to lightning_side_by_side.py.
#
#   bench/side_by_side.sh [--rounds 3] [--models mlp,lm,wide] [--steps 30]
#   bench/side_by_side.sh --profile [--models mlp,lm] [--impls ...] [--steps 200]   (needs perf, as root)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(scripts/libtorch2.sh --lightning)"
python="$root/../../../../bin/python"  # <venv>/lib/pythonX.Y/site-packages/torch
mkdir -p build-torch2
cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFABRIC_BUILD_TOOL=OFF \
  -DFABRIC_BUILD_BENCH=ON -DCMAKE_PREFIX_PATH="$root" > build-torch2/configure-bench.log 2>&1 ||
  { cat build-torch2/configure-bench.log; exit 1; }
cmake --build build-torch2 -j "$(nproc)" --target fabric_bench_side_by_side
exec "$python" bench/lightning_side_by_side.py --cxx build-torch2/bin/fabric_bench_side_by_side "$@"
