#!/usr/bin/env bash
# Copies the FFI section of runtime/include/ember.h into lua/ember/cdef.lua. Run it after
# changing the header; tests/lua/cdef_spec.lua fails until the two agree.
set -euo pipefail
cd "$(dirname "$0")/.."
{
  echo "-- The C declarations LuaJIT binds: a copy of runtime/include/ember.h between"
  echo "-- EMBER_FFI_BEGIN and EMBER_FFI_END (scripts/sync-cdef.sh; tests/lua/cdef_spec.lua checks it)."
  echo "return [==["
  sed -n '/EMBER_FFI_BEGIN/,/EMBER_FFI_END/p' runtime/include/ember.h | sed '1,2d;$d' | sed 's/^EM_API //'
  echo "]==]"
} > lua/ember/cdef.lua
