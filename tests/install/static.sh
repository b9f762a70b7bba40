#!/usr/bin/env bash
# static.sh: libember.a linked the ordinary way (no --whole-archive) from the staged install
# (stage.sh): tests/install/static_link/static_link.c built twice and run, each time checking
# that the program does not load libember.so:
#   - fully static, with pkg-config's static flags:
#       cc -static static_link.c $(pkg-config --cflags --static --libs ember) -lm
#   - with CMake's Ember::ember_static (libember.a, its dependencies shared).
#
#   static.sh <staged prefix> <libdir, relative to it> <work dir> <cc>
set -euo pipefail
root=${1:?usage: static.sh <staged prefix> <libdir> <work dir> <cc>}
libdir=${2:?libdir}
work=${3:?work dir}
cc=${4:?cc}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
fail() { echo "static: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"

no_libember() { # the program's dynamic dependencies leave libember.so out
  if readelf -d "$1" | grep -q 'NEEDED.*libember'; then fail "$1 needs libember.so"; fi
}

if [ "$can_static" = 1 ]; then
  # shellcheck disable=SC2046,SC2086
  "$cc" -std=c11 -Wall -Wextra -Werror -static -o "$work/static_link_pc" \
    "$here/static_link/static_link.c" $($PKG_CONFIG --cflags --static --libs ember) -lm \
    2>"$work/link.log" || { cat "$work/link.log" >&2; fail "the pkg-config --static build failed"; }
  readelf -d "$work/static_link_pc" | grep -q NEEDED && fail "the -static program has NEEDED entries"
  "$work/static_link_pc" || fail "the pkg-config --static program failed"
else
  echo "static: sanitizer build: no fully static program"
fi

# shellcheck disable=SC2086
cmake -S "$here/static_link" -B "$work/cmake" -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $EMBER_TEST_CFLAGS" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; fail "the Ember::ember_static build failed"; }
no_libember "$work/cmake/static_link"
"$work/cmake/static_link" || fail "the Ember::ember_static program failed"
