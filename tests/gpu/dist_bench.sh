#!/usr/bin/env bash
# all_reduce bandwidth on a multi-GPU machine in one command (tests/gpu/dist_bench.lua says what
# it measures): one process per GPU under Open MPI's mpirun, each on vulkan:<local rank>.
#   bash tests/gpu/dist_bench.sh                 # every GPU, 1 MiB .. 1 GiB
#   NPROC=2 bash tests/gpu/dist_bench.sh --max-mb 256
# On the GPU machine it runs the static program (.gpu/ember, built by tests/gpu/prepare.sh; it
# dlopens that machine's libmpi) with the Vulkan loader unpacked from .gl/, as run.sh does.
# Elsewhere EMBER=build/ember NPROC=2 DEVICE=vulkan runs it on lavapipe (DEVICE=vulkan takes
# CPU-type drivers too). Results: $OUT/dist_bench_<N>.txt and .json (OUT default /tmp/ember-gpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ember-gpu}
mkdir -p "$OUT"
E=${EMBER:-.gpu/ember}
if [ "$E" = .gpu/ember ]; then
  for f in .gl/*.deb; do [ -e "$f" ] && dpkg -x "$f" /; done
  ldconfig
  export LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
fi
if [ -z "${NPROC:-}" ]; then
  NPROC=$(nvidia-smi -L 2>/dev/null | wc -l)
  [ "$NPROC" -ge 1 ] || NPROC=2
fi
command -v mpirun >/dev/null || { echo "dist_bench: mpirun not found on PATH (Open MPI)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fwd=()
[ -n "${LD_LIBRARY_PATH:-}" ] && fwd+=(-x LD_LIBRARY_PATH)
[ -n "${VK_DRIVER_FILES:-}" ] && fwd+=(-x VK_DRIVER_FILES)
[ -n "${VK_ICD_FILENAMES:-}" ] && fwd+=(-x VK_ICD_FILENAMES)
mpirun --version | head -1
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -"$NPROC"
mpirun -np "$NPROC" --bind-to none --map-by slot --oversubscribe "${fwd[@]}" "$E" \
  tests/gpu/dist_bench.lua --device "${DEVICE:-auto}" --json "$OUT/dist_bench_$NPROC.json" "$@" |
  tee "$OUT/dist_bench_$NPROC.txt"
exit "${PIPESTATUS[0]}"
