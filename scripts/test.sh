#!/usr/bin/env bash
# Runs every test: lit rule and tool tests, runtime tests with real
# processes and Gloo, end-to-end migrations of examples/ and ../shared/corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || scripts/setup.sh --no-demo
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j 2 "$@"
