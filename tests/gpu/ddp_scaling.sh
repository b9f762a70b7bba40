#!/usr/bin/env bash
# Weak scaling of data-parallel training on 1, 2 and 4 GPUs, Ember (nn.DistributedDataParallel
# over Open MPI, tests/gpu/ddp_scaling.lua) against PyTorch DDP over NCCL (tests/gpu/torch_ddp.py)
# in the same run, then Ember's all-reduce bandwidth from 1 MiB to 1 GiB (tests/gpu/dist_bench.sh).
# One command:
#   bash tests/gpu/ddp_scaling.sh
# on a machine with 2 or 4 GPUs (the GPU counts tried are 1, 2 and 4 up to the GPUs present;
# GPUS='1 2' overrides). The Ember program is .gpu/ember with .gpu/lib and .gl/ as for
# tests/gpu/run.sh (tests/gpu/prepare.sh), else build/ember. Results go to $OUT/ddp_scaling.txt
# (OUT defaults to /tmp/ember-gpu).
#   MODELS='gpt cnn'   the models (gpt: nanoGPT's char config, batch 64 per GPU; cnn: the
#                      Fashion-MNIST CNN at batch 256 per GPU)
#   PRECISION=fp32     fp32, bf16 or fp16, for both frameworks
#   ALLREDUCE=1        0 skips the bandwidth sweep (dist_bench.sh, on every GPU)
#   SMOKE=1            tiny sizes on the CPU (gloo for PyTorch), to try the script anywhere
#   CMA=1              Open MPI's shared memory with cross-process reads (the default: 2-3x the
#                      bandwidth of copy-in/copy-out on the H200 host); CMA=0 turns them off, for
#                      containers without ptrace, which refuse them
#   BUCKET_MB=25       DDP's bucket size
# The summary at the end, per framework and model:
#   efficiency <ember|torch> <model> <precision> gpus <N> <throughput(N) / (N x throughput(1))>
#   gap <model> <precision> gpus <N> <Ember's efficiency - PyTorch's, in points>
# throughput(1) is one process without DDP (the single-GPU step); the goal is an efficiency of
# at least 0.9 at 2 and 4 GPUs, within 5 points of PyTorch's.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ember-gpu}
mkdir -p "$OUT"
LOG=$OUT/ddp_scaling.txt
: > "$LOG"
SMOKE=${SMOKE:-0}
E=${EMBER:-.gpu/ember}
if [ -x "$E" ]; then
  for f in .gl/*.deb; do [ -e "$f" ] && dpkg -x "$f" /; done
  command -v ldconfig >/dev/null && ldconfig 2>/dev/null
  export LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
else
  E=build/ember
fi
if [ "$SMOKE" = 1 ]; then
  DEVICE=cpu SMOKE_ARG=smoke TORCH_SMOKE=--smoke NGPU=${NGPU:-2}
  PYTHON=${PYTHON:-/usr/bin/python3}
else
  DEVICE=auto SMOKE_ARG=full TORCH_SMOKE=
  NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
  PYTHON=${PYTHON:-python3}
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
fi
if [ -z "${GPUS:-}" ]; then
  GPUS=1
  for n in 2 4; do [ "$NGPU" -ge "$n" ] && GPUS="$GPUS $n"; done
fi
P=${PRECISION:-fp32}
# --bind-to none: Open MPI would otherwise pin each rank to one core, starving Ember's threads;
# -x: the ranks get the program's libraries and Vulkan driver settings
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# containers without ptrace refuse Open MPI's cross-process reads (docs/distributed.md); CMA=0
# turns them off. Set explicitly either way: the GPU host's environment turns them off.
if [ "${CMA:-1}" = 1 ]; then export OMPI_MCA_btl_vader_single_copy_mechanism=cma
else export OMPI_MCA_btl_vader_single_copy_mechanism=none; fi
export EMBER_DDP_BUCKET_MB=${BUCKET_MB:-25}
MPIRUN=(mpirun --oversubscribe --bind-to none)
for v in LD_LIBRARY_PATH VK_DRIVER_FILES VK_ICD_FILENAMES EMBER_DDP_BUCKET_MB; do [ -n "${!v:-}" ] && MPIRUN+=(-x "$v"); done
say() { echo "$@" | tee -a "$LOG"; }
say "== ddp scaling: GPUs $GPUS, models ${MODELS:-gpt cnn}, precision $P, $(mpirun --version 2>&1 | head -1)"

for m in ${MODELS:-gpt cnn}; do
  for n in $GPUS; do
    if [ "$n" = 1 ]; then
      timeout 300 "$E" tests/gpu/ddp_scaling.lua "$m" "$DEVICE" "$SMOKE_ARG" "$P" 2>&1 | tee -a "$LOG"
    else
      timeout 300 "${MPIRUN[@]}" -np "$n" "$E" tests/gpu/ddp_scaling.lua "$m" "$DEVICE" "$SMOKE_ARG" "$P" 2>&1 | tee -a "$LOG"
    fi
    timeout 300 "$PYTHON" tests/gpu/torch_ddp.py "$m" "$n" --precision "$P" --port $((29500 + RANDOM % 2000)) $TORCH_SMOKE 2>&1 | tee -a "$LOG"
  done
done

if [ "${ALLREDUCE:-1}" = 1 ] && [ "$SMOKE" != 1 ]; then
  say "== all-reduce bandwidth (tests/gpu/dist_bench.sh)"
  EMBER=$E OUT=$OUT bash tests/gpu/dist_bench.sh 2>&1 | tee -a "$LOG"
fi

say "== summary"
awk '
  $2 == "single" { one[$1 " " $3 " " $4] = $5 }
  $2 == "ddp"    { key = $1 " " $3 " " $4; ddp[key " " $6] = $7; keys[key] = 1; ns[$6] = 1 }
  END {
    for (k in keys) for (n in ns) if ((k " " n) in ddp && one[k] > 0) {
      split(k, f, " ")
      eff[f[1] " " f[2] " " f[3] " " n] = ddp[k " " n] / (n * one[k])
      printf "efficiency %s %s %s gpus %d %.3f\n", f[1], f[2], f[3], n, ddp[k " " n] / (n * one[k])
    }
    for (e in eff) {
      split(e, f, " ")
      if (f[1] == "ember" && (("torch " f[2] " " f[3] " " f[4]) in eff))
        printf "gap %s %s gpus %d %+.1f points\n", f[2], f[3], f[4], 100 * (eff[e] - eff["torch " f[2] " " f[3] " " f[4]])
    }
  }' "$LOG" | sort | tee -a "$LOG"
