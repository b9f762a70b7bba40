#!/usr/bin/env bash
# Prepares what tests/gpu/run.sh needs on a GPU machine without packages (docs/devices.md
# "Running on a GPU", ../shared/GPU.md), here on a Debian 12 build machine:
#   .gpu/ember        the static program (LuaJIT and OpenBLAS linked in; build-gpu/)
#   .gpu/lib/         the shared libraries it still needs beyond libc/libm/libgcc_s (libgomp)
#   .gpu/lua/share/   busted's pure-Lua modules (luassert, say) for tests/gpu/specs.lua
#   .gl/              the Vulkan loader and the GL dispatch libraries NVIDIA's driver loads
#                     (.debs, unpacked there by run.sh)
#   .data/fortunes/   the plain-text fortune files of Debian's fortunes package (the GPT main
#                     job's text; carry .data)
# None of it is committed (.gitignore). Pass the ignored folders to the device call (carry
# .gpu and .gl). The shader compiler is the build's (docs/toolchain.md: the cached glslang 15.1
# builds the GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2 kernels, Debian 12's
# glslang 12 only the GL_NV_cooperative_matrix one); EMBER_GLSLANG=system|auto|/path picks it.
# JOBS sets the build's parallelism (default 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/fetch-glslang.sh
glslang=(-DEMBER_GLSLANG="${EMBER_GLSLANG:-auto}")
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_STATIC_DEPS=ON -DEMBER_READLINE=OFF \
  "${glslang[@]}" >/dev/null
cmake --build build-gpu -j "${JOBS:-2}" --target ember_cli
mkdir -p .gpu/lib .gpu/lua/share
strip -o .gpu/ember build-gpu/ember  # (its dynamic symbols stay: LuaJIT's FFI binds them)
# every shared library but the C runtime's own (present on any glibc machine)
ldd build-gpu/ember | awk '$3 ~ /^\// {print $3}' |
  grep -Ev '/(libc|libm|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
for m in luassert say; do
  for d in /usr/share/lua/5.1 /usr/local/share/lua/5.1; do
    [ -e "$d/$m" ] && cp -r "$d/$m" .gpu/lua/share/ && break
  done
done
if ! ls .gl/*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  apt-get "${o[@]}" update >/dev/null
  (cd .gl && apt-get "${o[@]}" download libvulkan1 libglvnd0 libegl1 libopengl0 libgl1 libglx0 libgles2)
fi
if [ -d /usr/share/games/fortunes ]; then
  mkdir -p .data/fortunes
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' -exec cp {} .data/fortunes/ \;
fi
echo "prepared: $(du -sh .gpu | cut -f1) in .gpu, $(ls .gl/*.deb | wc -l) packages in .gl"
