#!/usr/bin/env bash
# Runs every benchmark in one go (make bench). Each prints a table of ratios against a
# reference measured in the same run. Results: docs/performance.md records them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
echo "Ember benchmarks on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"./$BUILD/bench_matmul"
"./$BUILD/ember" tests/bench/overhead.lua
"./$BUILD/ember" tests/bench/elementwise.lua
"./$BUILD/ember" tests/bench/training.lua
