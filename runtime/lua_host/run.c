/*
 * run.c: running Lua from the host, the bridge's way: every call is protected, and a Lua
 * error comes back as an Ember error (-1 and em_last_error()), never as a longjmp through the
 * host's frames or a call to Lua's panic function (which exits the process). The message
 * keeps Lua's position ("train.lua:12: ...") and gains the stack traceback, which is what a
 * host shows its user.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lauxlib.h"
#include "lua_host.h"

/* As em_last_error's buffer (runtime/src/error.c): a longer message is cut there anyway. */
enum { LH_MESSAGE_CAP = 1024 };

int lh_error(const char *fn, const char *fmt, ...) {
  char msg[LH_MESSAGE_CAP];
  int n = snprintf(msg, sizeof msg, "%s: ", fn);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  em_set_error(msg);
  return -1;
}

/* The message handler: the error message (or a description of a non-string error value)
 * followed by the traceback of where it was raised. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Takes the error value on top of the stack into the Ember error, popping it. */
static int take_error(lua_State *L, const char *fn) {
  const char *msg = lua_tostring(L, -1);
  lh_error(fn, "%s", msg != NULL ? msg : "(error object is not a string)");
  lua_pop(L, 1);
  return -1;
}

int lh_pcall(lua_State *L, const char *fn, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs; /* the function's slot: the handler goes under it */
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return status == 0 ? 0 : take_error(L, fn);
}

EM_API int em_lua_pcall(lua_State *L, int nargs, int nresults) {
  if (L == NULL) return lh_error("lua_pcall", "expected L, got NULL");
  if (nargs < 0 || lua_gettop(L) < nargs + 1)
    return lh_error("lua_pcall", "expected a function and %d arguments on the stack, got %d "
                    "values", nargs, lua_gettop(L));
  if (!lua_checkstack(L, 2)) return lh_error("lua_pcall", "the Lua stack cannot grow");
  return lh_pcall(L, "lua_pcall", nargs, nresults);
}

EM_API int em_lua_dofile(lua_State *L, const char *path, int nresults) {
  if (L == NULL) return lh_error("lua_dofile", "expected L, got NULL");
  if (path == NULL) return lh_error("lua_dofile", "expected path, got NULL");
  if (!lua_checkstack(L, 2)) return lh_error("lua_dofile", "the Lua stack cannot grow");
  if (luaL_loadfile(L, path) != 0) return take_error(L, "lua_dofile");
  return lh_pcall(L, "lua_dofile", 0, nresults);
}

EM_API int em_lua_dostring(lua_State *L, const char *code, const char *chunkname,
                           int nresults) {
  if (L == NULL) return lh_error("lua_dostring", "expected L, got NULL");
  if (code == NULL) return lh_error("lua_dostring", "expected code, got NULL");
  if (!lua_checkstack(L, 2)) return lh_error("lua_dostring", "the Lua stack cannot grow");
  if (luaL_loadbuffer(L, code, strlen(code), chunkname != NULL ? chunkname : code) != 0)
    return take_error(L, "lua_dostring");
  return lh_pcall(L, "lua_dostring", 0, nresults);
}
