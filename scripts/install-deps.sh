#!/usr/bin/env bash
# Installs exactly the Debian packages Ember needs that are missing, and stays quiet when all
# are present. Called by `make run`, `make test` and `make bench`; safe to run repeatedly.
# Then scripts/fetch-glslang.sh builds the newer shader compiler once into its cache (a no-op
# when cached; on failure one warning line, and the build uses the system glslang).
# Usage: scripts/install-deps.sh [--bench]   (--bench adds python3-torch for reference timings)
set -euo pipefail
here=$(dirname "$0")

packages=(
  cmake build-essential pkg-config
  luajit libluajit-5.1-dev lua-busted
  libopenblas-dev libopenblas-openmp-dev libreadline-dev zlib1g-dev
  libvulkan-dev glslang-tools spirv-tools mesa-vulkan-drivers vulkan-validationlayers
  dataset-fashion-mnist fortunes
  tmux python3-numpy
  clang libclang-rt-14-dev
  python3 dpkg-dev debian-archive-keyring
  openmpi-bin libopenmpi-dev
)
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-torch)
fi
# node and npm run the independent GGUF reader (scripts/gguf-reader.sh, tests/lua/gguf_spec.lua);
# a machine that already has them (from another nodejs package) keeps its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
  else
    SUDO=
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bash "$here/fetch-glslang.sh"
