#!/usr/bin/env bash
# The whole GPU-machine run in one command (docs/performance.md, ../shared/GPU.md): the Vulkan
# specs under the static `ember` program, the elementwise/matmul/training benchmarks against
# PyTorch CUDA, and the main job on the GPU. Expects the static program in .gpu/ember, its
# libraries in .gpu/lib, busted's pure-Lua modules (luassert, say) in .gpu/lua/share and the
# Vulkan loader's .debs in .gl/ (and, for the main job, Fashion-MNIST's IDX files in
# .data/fashion-mnist; for the GPT main job, the fortune files in .data/fortunes, which
# prepare.sh copies). Results go to $OUT (or /tmp/ember-gpu).
# STEPS picks a subset (one device call is limited to 10 minutes), e.g.
#   STEPS='specs matmul' bash tests/gpu/run.sh
# The steps: specs elementwise matmul conv index transfer random attention training main-job gpt
# gpt-job quant (all by default).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ember-gpu}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
export LUA_PATH="$PWD/.gpu/lua/share/?.lua;$PWD/.gpu/lua/share/?/init.lua;;"
# The specs start child processes with `luajit script.lua`: the ember program runs them.
mkdir -p /tmp/ember-shim
printf '#!/bin/sh\nexec %s "$@"\n' "$PWD/.gpu/ember" > /tmp/ember-shim/luajit
chmod +x /tmp/ember-shim/luajit
export PATH=/tmp/ember-shim:$PATH
E=.gpu/ember
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
want() { [[ " ${STEPS:-specs elementwise matmul conv index transfer random attention training main-job gpt gpt-job quant} " == *" $1 "* ]]; }
step() { echo "== $*"; }
# SPECS picks spec files (default: the Vulkan ones), SPECS_TIMEOUT their time limit.
if want specs; then step specs; SPECS_VERBOSE=1 timeout ${SPECS_TIMEOUT:-500} $E tests/gpu/specs.lua ${SPECS:-tests/lua/vulkan*_spec.lua} > "$OUT/specs.txt" 2>&1; grep -v "^\.\. " "$OUT/specs.txt" | tail -40; fi
if want elementwise; then step elementwise; timeout 120 $E tests/gpu/bench.lua vulkan 2>&1 | tee "$OUT/elementwise.txt"; fi
if want matmul; then step matmul; timeout 240 $E tests/gpu/matmul.lua vulkan 2>&1 | tee "$OUT/matmul.txt"; fi
if want conv; then step conv; timeout 300 $E tests/gpu/conv.lua vulkan 2>&1 | tee "$OUT/conv.txt"; fi
if want index; then step index; timeout 200 $E tests/gpu/index.lua vulkan 2>&1 | tee "$OUT/index.txt"; fi
if want transfer; then step transfer; timeout 120 $E tests/gpu/transfer.lua vulkan 2>&1 | tee "$OUT/transfer.txt"; fi
if want random; then step random; timeout 120 $E tests/gpu/random_bench.lua vulkan 2>&1 | tee "$OUT/random.txt"; fi
if want attention; then step attention; timeout 400 $E tests/gpu/attention.lua vulkan 2>&1 | tee "$OUT/attention.txt"; fi
if want training; then
  step training
  # PRECISIONS: the mixed-precision rows (ember bench --precision, torch_cnn.py autocast)
  P=${PRECISIONS:-fp32,bf16,fp16}
  for b in 64 256; do timeout 150 $E bench --model cnn --batch-size $b --steps 20 --repeats 5 --devices vulkan --precision $P 2>&1 | tee -a "$OUT/training.txt"; done
  timeout 150 python3 tests/gpu/torch_cnn.py 64 256 --precision $P 2>&1 | tee -a "$OUT/training.txt"
fi
if want main-job; then
  step main-job
  # the GPU machine lacks Debian's dataset package: the data travels in .data/ (carried)
  DATA=/usr/share/datasets/fashion-mnist
  [ -d "$DATA" ] || DATA=.data/fashion-mnist
  # MAIN_PRECISIONS: one run of the main job per precision (accuracy within 0.5 points of fp32)
  for p in ${MAIN_PRECISIONS:-fp32}; do
    timeout ${MAIN_JOB_TIMEOUT:-200} $E examples/fashion_mnist.lua --device vulkan --epochs ${EPOCHS:-6} --precision $p --checkpoint "" --data "$DATA" 2>&1 | grep -v '%' | tee -a "$OUT/main_job.txt"
  done
fi
if want gpt; then
  # nanoGPT's char config: one training step per precision and generation with a KV cache,
  # against PyTorch CUDA (fp32 + SDPA, bf16 autocast + SDPA) in the same run
  step gpt
  timeout ${GPT_TIMEOUT:-400} $E tests/gpu/gpt.lua vulkan 2>&1 | tee "$OUT/gpt.txt"
fi
if want gpt-job; then
  # the second main job on the GPU (its defaults, or GPT_ARGS, e.g. '--precision bf16')
  step gpt-job
  DATA=/usr/share/games/fortunes
  [ -d "$DATA" ] || DATA=.data/fortunes
  timeout ${GPT_JOB_TIMEOUT:-400} $E examples/gpt.lua --device vulkan --checkpoint "" --data "$DATA" ${GPT_ARGS:-} 2>&1 | tee -a "$OUT/gpt_job.txt"
fi
if want quant; then
  # the quantized Linear (issue 14): its specs on the GPU, then matvec GB/s against the copy
  # bandwidth and batch-64 TFLOP/s against PyTorch fp16 (tests/gpu/quant.lua, torch_quant.py)
  step quant
  SPECS_VERBOSE=1 timeout 200 $E tests/gpu/specs.lua tests/lua/quant_linear_vk_spec.lua tests/lua/quant_device_spec.lua 2>&1 | grep -v "^\\.\\. " | tail -20 | tee "$OUT/quant.txt"
  timeout ${QUANT_TIMEOUT:-300} $E tests/gpu/quant.lua vulkan 2>&1 | tee -a "$OUT/quant.txt"
fi
