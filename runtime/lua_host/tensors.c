/*
 * tensors.c: tensors across the bridge. C hands Lua an em_tensor * as a light userdata, and
 * ember.host (lua/ember/host.lua) turns it into an ordinary Lua tensor holding a reference of
 * its own (em_retain), with Ember's own handle lifetime (core.own). The way back: ember.host
 * checks that the value is a tensor and writes a new reference into a slot the C side gives
 * it. Doing both in Lua keeps the FFI types in one place, so that a tensor from C is exactly
 * what Ember's Lua code makes and expects.
 */
#include "lauxlib.h"
#include "lua_host.h"

int lh_push_helper(lua_State *L, const char *fn, const char *name, int slots) {
  if (L == NULL) return lh_error(fn, "expected L, got NULL");
  if (!lua_checkstack(L, slots + 3)) return lh_error(fn, "the Lua stack cannot grow");
  lua_getfield(L, LUA_REGISTRYINDEX, LH_REGISTRY_KEY);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return lh_error(fn, "this Lua state has no ember package: open it with em_lua_open, or "
                    "call em_lua_load on it first");
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  return 0;
}

EM_API int em_lua_push_tensor(lua_State *L, em_tensor *t) {
  const char *fn = "lua_push_tensor";
  if (L == NULL) return lh_error(fn, "expected L, got NULL");
  if (t == NULL) return lh_error(fn, "expected t, got NULL");
  if (lh_push_helper(L, fn, "push", 1) != 0) return -1;
  lua_pushlightuserdata(L, t);
  return lh_pcall(L, fn, 1, 1);
}

EM_API em_tensor *em_lua_to_tensor(lua_State *L, int index) {
  const char *fn = "lua_to_tensor";
  if (L == NULL) {
    lh_error(fn, "expected L, got NULL");
    return NULL;
  }
  int top = lua_gettop(L);
  /* Lua's pseudo-indices (the registry, globals) are not stack positions: refused. */
  int absolute = index < 0 ? top + index + 1 : index;
  if (index == 0 || absolute < 1 || absolute > top) {
    lh_error(fn, "stack index %d is not valid (the stack holds %d values)", index, top);
    return NULL;
  }
  if (lh_push_helper(L, fn, "take", 2) != 0) return NULL;
  em_tensor *slot = NULL;
  lua_pushvalue(L, absolute);
  lua_pushlightuserdata(L, &slot);
  if (lh_pcall(L, fn, 2, 1) != 0) return NULL;
  if (slot == NULL) { /* not a tensor: ember.host described the value */
    const char *got = lua_tostring(L, -1);
    lh_error(fn, "expected an ember tensor at stack index %d, got %s", index,
             got != NULL ? got : "something else");
  }
  lua_pop(L, 1);
  return slot;
}
