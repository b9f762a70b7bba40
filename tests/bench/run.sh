#!/usr/bin/env bash
# Runs every benchmark in one go (make bench). Each prints a table of ratios against a
# reference measured in the same run. Results: docs/performance.md records them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
echo "Ember benchmarks on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"./$BUILD/bench_matmul"
"./$BUILD/bench_quant"
"./$BUILD/ember" tests/bench/matmul_bf16.lua
"./$BUILD/ember" tests/bench/matmul_batched.lua
"./$BUILD/ember" tests/bench/attention.lua
"./$BUILD/bench_tiny_op"
"./$BUILD/ember" tests/bench/overhead.lua
"./$BUILD/ember" tests/bench/elementwise.lua
"./$BUILD/ember" tests/bench/training.lua
"./$BUILD/ember" tests/bench/gpt_ops.lua
"./$BUILD/ember" tests/bench/gpt_step.lua
# The GPU section, when Ember sees a Vulkan GPU (not a CPU-type driver such as lavapipe): the
# elementwise bandwidth and matmul against PyTorch CUDA (when python3 has it), and the training
# step per device. tests/gpu/run.sh runs the same on a GPU machine without packages.
if "./$BUILD/ember" -e 'for _, d in ipairs(ember.devices()) do if d.type == "discrete" or d.type == "integrated" then os.exit(0) end end os.exit(1)'; then
  "./$BUILD/ember" tests/gpu/bench.lua vulkan
  if [ -f tests/gpu/matmul.lua ]; then "./$BUILD/ember" tests/gpu/matmul.lua vulkan; fi
  for b in 64 256; do "./$BUILD/ember" bench --model cnn --batch-size "$b"; done
  python3 tests/gpu/torch_cnn.py 64 256 || echo "(no PyTorch CUDA reference)"
else
  echo "GPU section skipped: no Vulkan GPU (a CPU-type driver does not count)"
fi
