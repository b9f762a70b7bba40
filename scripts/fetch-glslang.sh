#!/usr/bin/env bash
# Obtains a shader toolchain newer than Debian 12's: glslang from Debian 13 (trixie)'s source
# package, built once, and the Vulkan 1.4 headers from trixie's libvulkan-dev, unpacked with
# `dpkg -x`. Both are pinned to one version and checked against sha256 sums written here, on top
# of apt's own signature check, and cached outside the source tree, so every later call (each
# `make`) is a quiet no-op. Debian 12's glslang 12 knows GL_NV_cooperative_matrix only; 15.1
# adds GL_KHR_cooperative_matrix, GL_NV_cooperative_matrix2 and GL_EXT_integer_dot_product.
#
# apt runs with a private sources list, state and cache directory: the system's apt
# configuration and package lists are never touched, and nothing is installed system-wide.
#
# Anything that fails (no network, a changed archive, a checksum mismatch, a build error) prints
# one warning line and leaves the system glslang (glslang-tools) in charge: the build still
# succeeds, only the newer kernel flavors are missing. After a failure the fetch is retried
# an hour later, not on every `make`.
#
# Usage: scripts/fetch-glslang.sh                fetch and build unless cached (install-deps.sh)
#        scripts/fetch-glslang.sh --print-prefix  print the cache prefix (CMakeLists.txt reads it)
# Environment: EMBER_TOOLCHAIN_DIR  cache root (default /var/cache/ember-toolchain as root, else
#                                   ${XDG_CACHE_HOME:-~/.cache}/ember-toolchain)
#              EMBER_SYSTEM_GLSLANG=1  skip the fetch; the build then uses the system glslang
#              JOBS                 parallel jobs for the one-time build (default: nproc)
set -euo pipefail

GLSLANG_VERSION=15.1.0+1.4.309.0-1      # source package glslang, trixie
VULKAN_VERSION=1.4.309.0-1              # libvulkan-dev, trixie
ARCHIVE="http://deb.debian.org/debian trixie main"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# Bump when the build recipe below changes, so that caches built by the old one are not reused.
RECIPE=1
declare -A SHA256=(
  [glslang_15.1.0+1.4.309.0-1.dsc]=5ce0f9040bd1f03575976a1599830ef86c22f2ff7b8721c50eb841b3e235e30b
  [glslang_15.1.0+1.4.309.0.orig.tar.gz]=180f17ea51e6b71bf57b9e0fea78ba3ecd76e3ec8e4c91f0771b922eb22bf4b2
  [glslang_15.1.0+1.4.309.0-1.debian.tar.xz]=1738dcf3cf37ea9a2fc9c11eb0e990cdfbc62ddd6a09d82675835fa310e57ff7
  [libvulkan-dev_1.4.309.0-1_amd64.deb]=8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a
)

if [ -n "${EMBER_TOOLCHAIN_DIR:-}" ]; then
  root=$EMBER_TOOLCHAIN_DIR
elif [ "$(id -u)" -eq 0 ]; then
  root=/var/cache/ember-toolchain
else
  root=${XDG_CACHE_HOME:-$HOME/.cache}/ember-toolchain
fi
prefix=$root/glslang-${GLSLANG_VERSION}_vulkan-${VULKAN_VERSION}_r$RECIPE

if [ "${1:-}" = "--print-prefix" ]; then
  echo "$prefix"
  exit 0
fi
[ "${EMBER_SYSTEM_GLSLANG:-0}" = 1 ] && exit 0
[ -x "$prefix/bin/glslangValidator" ] && exit 0

failed=$root/failed-$(basename "$prefix")
system_glslang() {
  command -v glslangValidator >/dev/null && glslangValidator --version | head -1 | sed 's/.*://' ||
    echo "none"
}
# One warning line, then success: the caller goes on with the system glslang.
fallback() {
  echo "fetch-glslang: warning: $1; using the system glslang $(system_glslang)" \
       "(no KHR/coopmat2 kernel flavors)" >&2
  exit 0
}
if [ -f "$failed" ] && [ -n "$(find "$failed" -mmin -60 2>/dev/null)" ]; then
  fallback "$(cat "$failed") (at $(date -r "$failed" +%H:%M); retried an hour later, or delete $failed)"
fi

arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
[ "$arch" = amd64 ] || fallback "pinned checksums exist for amd64 only, not $arch"
for tool in apt-get dpkg-source cmake c++ python3 sha256sum flock; do
  command -v $tool >/dev/null || fallback "$tool is missing"
done
[ -r "$KEYRING" ] || fallback "$KEYRING is missing"
mkdir -p "$root" 2>/dev/null && [ -w "$root" ] || fallback "cannot write $root"

# One builder at a time (two checkouts may build at once); the second finds the cache made.
exec 9>"$root/.lock"
flock 9
[ -x "$prefix/bin/glslangValidator" ] && exit 0
rm -rf "$root"/work.*     # left by a build that was killed (the lock says none is running)

work=$(mktemp -d "$root/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/log
# Runs one step with its output in the log; a failing step records why and falls back.
step() {
  local what=$1; shift
  if ! "$@" >>"$log" 2>&1; then
    echo "$what failed" >"$failed"
    cp "$log" "$root/fetch-glslang.log"
    fallback "$what failed (log: $root/fetch-glslang.log)"
  fi
}
verify() {
  local f
  for f in "${!SHA256[@]}"; do
    [ -f "$work/dl/$f" ] || { echo "$f was not downloaded"; return 1; }
    echo "${SHA256[$f]}  $work/dl/$f" | sha256sum -c --quiet - || return 1
  done
}

start=$SECONDS
echo "fetch-glslang: building glslang ${GLSLANG_VERSION%%+*} from Debian trixie once (1-2 minutes)," \
     "cached in $prefix"
mkdir -p "$work/etc" "$work/lists/partial" "$work/cache/archives/partial" "$work/dl"
printf 'deb [signed-by=%s] %s\ndeb-src [signed-by=%s] %s\n' \
  "$KEYRING" "$ARCHIVE" "$KEYRING" "$ARCHIVE" >"$work/etc/sources.list"
# apt drops root to the user _apt for downloads: let it write the private directories.
chmod 755 "$work"
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
  chown -R _apt "$work/lists" "$work/cache" "$work/dl"
fi
apt=(apt-get -q -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
     -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
     -o Acquire::Languages=none -o Acquire::Retries=2 -o Acquire::http::Timeout=30)
step "apt-get update (trixie, private lists)" "${apt[@]}" --error-on=any update
step "apt-get source glslang=$GLSLANG_VERSION" \
  bash -c 'cd "$1/dl" && shift && "$@"' _ "$work" "${apt[@]}" source --download-only "glslang=$GLSLANG_VERSION"
step "apt-get download libvulkan-dev=$VULKAN_VERSION" \
  bash -c 'cd "$1/dl" && shift && "$@"' _ "$work" "${apt[@]}" download "libvulkan-dev=$VULKAN_VERSION"
step "sha256 check of the downloads" verify

# dpkg-source checks the .dsc's own sums. Debian's patches are skipped: they make the build
# require the system's SPIRV-Tools (for the optimizer, which Ember does not use) and Debian 12's
# is too old; the upstream sources build alone with ENABLE_OPT=OFF.
step "dpkg-source -x" dpkg-source --skip-patches -x "$work/dl/glslang_$GLSLANG_VERSION.dsc" "$work/src"
step "cmake configure" cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DENABLE_OPT=OFF -DENABLE_HLSL=OFF \
  -DGLSLANG_TESTS=OFF -DBUILD_SHARED_LIBS=OFF -DENABLE_GLSLANG_BINARIES=ON
# Only the compiler program: the cache keeps bin/glslangValidator and the Vulkan headers.
step "glslang build" cmake --build "$work/build" --target glslang-standalone -j "${JOBS:-$(nproc)}"
step "glslang install" install -D -m 755 "$work/build/StandAlone/glslang" \
  "$work/prefix/bin/glslangValidator"
# Of libvulkan-dev only its headers are kept (its share/ holds 14 MB of registry files).
step "dpkg -x libvulkan-dev" dpkg -x "$work/dl/libvulkan-dev_${VULKAN_VERSION}_amd64.deb" "$work/vk"
step "keeping the Vulkan headers" bash -c 'mkdir -p "$1/usr" && mv "$2/usr/include" "$1/usr/"' _ \
  "$work/prefix/libvulkan-dev" "$work/vk"
step "glslangValidator --version" "$work/prefix/bin/glslangValidator" --version
cat >"$work/prefix/VERSIONS" <<EOF
glslang $GLSLANG_VERSION (Debian trixie source package, built with ENABLE_OPT=OFF ENABLE_HLSL=OFF)
libvulkan-dev $VULKAN_VERSION (Debian trixie, headers in libvulkan-dev/usr/include)
recipe $RECIPE of scripts/fetch-glslang.sh, built $(date -u +%FT%TZ)
EOF
# The cache appears whole or not at all.
step "moving into $prefix" mv "$work/prefix" "$prefix"
rm -f "$failed"
echo "fetch-glslang: glslangValidator $("$prefix/bin/glslangValidator" --version | head -1 | sed 's/.*://')" \
     "and Vulkan $VULKAN_VERSION headers ready in $((SECONDS - start)) s"
