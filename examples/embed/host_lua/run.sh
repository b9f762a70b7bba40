#!/bin/sh
# How tests/install/run.sh runs this example: run.sh <program>, in an empty folder. Trains
# with train.lua and checks that the installed bridge found the installed Lua package by
# itself (no environment variable names it). Then a script whose op fails must make the
# program fail with the bridge's message: the call, the script's line, the traceback.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
"$1" "$here/train.lua" >out.txt
cat out.txt
grep -q '^ember package: .*/share/lua/5\.1$' out.txt || {
  echo "host_lua: the bridge did not use the installed Lua package" >&2
  exit 1
}
grep -q '^host_lua: ok$' out.txt
cat >bad.lua <<'LUA'
return function(x, y, w, b)
  local wrong = x:matmul(y)
  return wrong
end
LUA
if "$1" bad.lua >/dev/null 2>err.txt; then
  echo "host_lua: a failing script succeeded" >&2
  exit 1
fi
grep -q '^host_lua: train: lua_pcall: bad.lua:2: matmul' err.txt &&
  grep -q '^stack traceback:' err.txt || {
  echo "host_lua: unexpected error report:" >&2
  cat err.txt >&2
  exit 1
}
