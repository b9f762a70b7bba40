/*
 * fuzz_checkpoint.c: libFuzzer target for Ember's own checkpoints as ember.load reads them: the
 * safetensors reader (C, instrumented) and the Lua that rebuilds the saved table from the
 * file's names and its __metadata__ (the __ember_types__ entry, typed leaves, dotted keys:
 * lua/ember/serialize.lua), run in an embedded LuaJIT.
 *
 * Every input must load or fail with a clear error, one that starts "load: "; any other Lua
 * error (an internal "attempt to index a nil value", say) is a finding. Coverage comes from the
 * C side only, so the seeds (ember.save's files) carry the Lua side's variety.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"

static lua_State *L;

/* No leak checks here: the tensors Lua holds are referenced from LuaJIT's own mmap'ed heap,
 * which LeakSanitizer does not scan, so each would look leaked. The C reader's leaks are
 * fuzz_safetensors' to find. */
int __lsan_is_turned_off(void) { return 1; }

/* Loads the file at path; returns nil on success, or the error message without the position
 * of the call that Ember's errors start with ("chunk:3: load: ..."). */
static const char *harness =
    "local ember = require 'ember'\n"
    "local function message(err)\n"
    "  err = tostring(err)\n"
    "  if err:sub(1, 6) == 'load: ' then return err end\n"
    "  return (err:gsub('^.-:%d+: ', '', 1))\n"
    "end\n"
    "return function(path)\n"
    "  local ok, err = pcall(ember.load, path)\n"
    "  if not ok then return message(err) end\n"
    "  ok, err = pcall(ember.load, path, { flat = true })\n"
    "  if not ok then return message(err) end\n"
    "  return nil\n"
    "end\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  L = luaL_newstate();
  luaL_openlibs(L);
  char code[1024];
  snprintf(code, sizeof code, "package.path = '%s/?.lua;%s/?/init.lua;' .. package.path",
           EMBER_LUA_DIR, EMBER_LUA_DIR);
  if (luaL_dostring(L, code) != 0 || luaL_loadstring(L, harness) != 0 ||
      lua_pcall(L, 0, 1, 0) != 0) {
    fprintf(stderr, "fuzz_checkpoint: cannot start Ember's Lua: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_setglobal(L, "fuzz_load");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  lua_getglobal(L, "fuzz_load");
  lua_pushstring(L, path);
  if (lua_pcall(L, 1, 1, 0) != 0) {
    fprintf(stderr, "fuzz_checkpoint: the harness failed: %s\n", lua_tostring(L, -1));
    abort();
  }
  const char *err = lua_tostring(L, -1);
  if (err != NULL && strncmp(err, "load: ", 6) != 0) {
    fprintf(stderr, "fuzz_checkpoint: an unclear error: %s\n", err);
    abort();
  }
  lua_pop(L, 1);
  /* Tensors are freed by Lua's collector: collect now, so that none outlives its input (and
   * the leak check sees only real leaks). */
  lua_gc(L, LUA_GCCOLLECT, 0);
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
