#!/usr/bin/env bash
# run.sh: every example under examples/embed/ built against the staged install (stage.sh) the
# ways a user would, and run. ctest's install_examples.
#
#   run.sh <staged prefix> <libdir, relative to it> <work dir> <cc>
#
# An example is a folder examples/embed/<name>/ with a CMakeLists.txt. Each is built three ways:
#   cmake    cmake -S <dir> -B <work>/<name>/cmake && cmake --build ...: its CMakeLists.txt
#            (find_package(Ember)) must build a program called <name>;
#   shared   cc <dir>/*.c $(pkg-config --cflags --libs $PKG_MODULES) $LIBS
#   static   cc -static <dir>/*.c $(pkg-config --cflags --static --libs $PKG_MODULES) $LIBS
# and each program is run in an empty folder of its own: with `sh <dir>/run.sh <program>` when
# the example has a run.sh (arguments, checks of what it wrote), else with no arguments. A
# nonzero exit fails the test. An optional <dir>/example.conf (shell assignments) changes the
# defaults:
#   PKG_MODULES="ember"   pkg-config modules of the pkg-config builds
#   CFLAGS="-std=c11"     further compile flags of the pkg-config builds
#   LIBS="-lm"            further link flags of the pkg-config builds
#   STATIC=1              0: no fully static build (a dependency has no static library)
# Builds use -Wall -Wextra -Werror, as the project does.
set -euo pipefail
root=${1:?usage: run.sh <staged prefix> <libdir> <work dir> <cc>}
libdir=${2:?libdir}
work=${3:?work dir}
cc=${4:?cc}
here=$(cd "$(dirname "$0")" && pwd)
examples=$(cd "$here/../../examples/embed" && pwd)
. "$here/env.sh"
rm -rf "$work" && mkdir -p "$work"

status=0
report() { # name, way, ok|FAILED, log
  if [ "$3" = ok ]; then echo "examples: $1 ($2): ok"; else
    echo "examples: $1 ($2) FAILED; the end of $4:" >&2
    tail -30 "$4" >&2
    status=1
  fi
}

# Runs program $3 of example dir $1 in a fresh folder; logs to $4.
run_example() {
  local dir=$1 out=$2 program=$3 log=$4
  rm -rf "$out/run" && mkdir -p "$out/run"
  if [ -f "$dir/run.sh" ]; then
    (cd "$out/run" && sh "$dir/run.sh" "$program") >>"$log" 2>&1
  else
    (cd "$out/run" && "$program") >>"$log" 2>&1
  fi
}

found=0
for dir in "$examples"/*/; do
  dir=${dir%/}
  [ -f "$dir/CMakeLists.txt" ] || continue
  found=$((found + 1))
  name=$(basename "$dir")
  out="$work/$name"
  mkdir -p "$out"
  PKG_MODULES=ember CFLAGS=-std=c11 LIBS=-lm STATIC=1
  # shellcheck disable=SC1091
  [ -f "$dir/example.conf" ] && . "$dir/example.conf"
  sources=("$dir"/*.c)
  # shellcheck disable=SC2206
  flags=($CFLAGS -Wall -Wextra -Werror $EMBER_TEST_CFLAGS)

  log="$out/cmake.log"
  if cmake -S "$dir" -B "$out/cmake" -DCMAKE_C_COMPILER="$cc" \
       -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $EMBER_TEST_CFLAGS" >"$log" 2>&1 &&
     cmake --build "$out/cmake" >>"$log" 2>&1 &&
     run_example "$dir" "$out" "$out/cmake/$name" "$log"; then
    report "$name" cmake ok
  else report "$name" cmake FAILED "$log"; fi

  log="$out/shared.log"
  # shellcheck disable=SC2046,SC2086
  if "$cc" "${flags[@]}" -o "$out/$name" "${sources[@]}" \
       $($PKG_CONFIG --cflags --libs $PKG_MODULES) $LIBS >"$log" 2>&1 &&
     run_example "$dir" "$out" "$out/$name" "$log"; then
    report "$name" pkg-config ok
  else report "$name" pkg-config FAILED "$log"; fi

  if [ "$STATIC" = 1 ] && [ "$can_static" = 1 ]; then
    log="$out/static.log"
    # shellcheck disable=SC2046,SC2086
    if "$cc" "${flags[@]}" -static -o "$out/${name}_static" "${sources[@]}" \
         $($PKG_CONFIG --cflags --static --libs $PKG_MODULES) $LIBS >"$log" 2>&1 &&
       ! readelf -d "$out/${name}_static" | grep -q NEEDED &&
       run_example "$dir" "$out" "$out/${name}_static" "$log"; then
      report "$name" "pkg-config --static" ok
    else report "$name" "pkg-config --static" FAILED "$log"; fi
  fi
done
if [ "$found" = 0 ]; then
  echo "examples: no example with a CMakeLists.txt under $examples" >&2
  exit 1
fi
exit $status
