#!/usr/bin/env bash
# stage.sh: a staged install (DESTDIR) of this build, and the checks that it works in place
# without environment variables. ctest's install_stage, the fixture the other install tests
# build on (tests/install/run.sh, static.sh).
#
#   stage.sh <build dir> <stage dir> <prefix> <libdir, relative to prefix>
#
# Checks: the files of the layout (cmake/install.cmake), libember.so's SONAME and its links;
# the installed `ember` finds the installed library, Lua package and docs with an empty
# environment; a plain `luajit` that finds the package (LUA_PATH standing in for LuaJIT's
# default share/lua/5.1 of /usr/local) loads the library installed with it, not the build's.
set -euo pipefail
build=${1:?usage: stage.sh <build dir> <stage dir> <prefix> <libdir>}
stage=$(realpath -m "${2:?stage dir}")
prefix=${3:?prefix}
libdir=${4:?libdir}
root=$stage$prefix
fail() { echo "install: $*" >&2; exit 1; }
# The environment is emptied for the runs below, except for a sanitizer build's own variables
# (ctest passes EMBER_TEST_PRELOAD: the sanitizer runtimes that an uninstrumented luajit needs).
keep=()
for v in ASAN_OPTIONS UBSAN_OPTIONS; do [ -n "${!v:-}" ] && keep+=("$v=${!v}"); done
preload=()
[ -n "${EMBER_TEST_PRELOAD:-}" ] && preload=("LD_PRELOAD=$EMBER_TEST_PRELOAD")

rm -rf "$stage"
DESTDIR=$stage cmake --install "$build" --prefix "$prefix" >"$build/install_stage.log" ||
  fail "cmake --install failed (log: $build/install_stage.log)"

for f in include/ember.h "$libdir/libember.a" bin/ember share/lua/5.1/ember/init.lua \
         share/lua/5.1/ember/installed.lua share/doc/ember/api/tensor.md \
         "$libdir/pkgconfig/ember.pc" "$libdir/cmake/Ember/EmberConfig.cmake" \
         "$libdir/cmake/Ember/EmberConfigVersion.cmake" include/ember_lua.h \
         "$libdir/libember_lua.a" "$libdir/libember_lua.so" "$libdir/pkgconfig/ember-lua.pc"; do
  [ -e "$root/$f" ] || fail "$f is missing from the install"
done

# libember.so -> libember.so.<SONAME version> -> the real file, whose SONAME is the middle name.
real=$(readlink -f "$root/$libdir/libember.so")
[ -f "$real" ] || fail "libember.so does not lead to a file"
soname=$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ -n "$soname" ] || fail "$real has no SONAME"
[ -L "$root/$libdir/$soname" ] || fail "no $soname link next to $real"
[ "$(readlink -f "$root/$libdir/$soname")" = "$real" ] || fail "$soname does not lead to $real"

# Lua code that prints the libember this process mapped, and the package and docs it found.
probe='for l in io.lines("/proc/self/maps") do
         local p = l:match("(/%S*libember%.so[%.%d]*)$")
         if p then print("lib " .. p) break end
       end
       local t = ember.ones(2, 3) * 2
       print("sum " .. t:sum():item())'
out=$(env -i "${keep[@]}" "$root/bin/ember" -e "$probe"' print("lua " .. package.ember_lua_dir)
      print("docs " .. package.ember_docs_dir)') || fail "the installed ember failed: $out"
echo "$out" | grep -qx "sum 12" || fail "the installed ember computed wrongly: $out"
for what in lib lua docs; do
  path=$(echo "$out" | sed -n "s/^$what //p")
  [ -n "$path" ] || fail "no $what path in: $out"
  case "$(readlink -f "$path")" in
    "$(readlink -f "$root")"/*) ;;
    *) fail "the installed ember used the $what at $path, not the install's" ;;
  esac
done
[ -f "$(echo "$out" | sed -n 's/^docs //p')/api/tensor.md" ] || fail "docs folder without api/"

lua_path="$root/share/lua/5.1/?.lua;$root/share/lua/5.1/?/init.lua"
out=$(env -i "${keep[@]}" "${preload[@]}" PATH=/usr/bin:/bin LUA_PATH="$lua_path" luajit -e "ember = require 'ember' $probe") ||
  fail "plain luajit could not use the installed package: $out"
echo "$out" | grep -qx "sum 12" || fail "plain luajit computed wrongly: $out"
case "$(readlink -f "$(echo "$out" | sed -n 's/^lib //p')")" in
  "$(readlink -f "$root")"/*) ;;
  *) fail "plain luajit loaded $(echo "$out" | sed -n 's/^lib //p'), not the install's library" ;;
esac
echo "install: staged at $root; ember and luajit use the installed library, package and docs"
