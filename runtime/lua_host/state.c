/*
 * state.c: opening a Lua state with Ember loaded (em_lua_open, em_lua_load) and closing it.
 *
 * The package is found the way the `ember` program finds it (runtime/cli/main.c), but from
 * where libember_lua itself lies rather than the program: an installed library finds
 * <prefix>/share/lua/5.1 (the relative path cmake/install.cmake computes), the build folder's
 * library finds lua/ next to it. So an install, or a staged one under DESTDIR, works without
 * environment variables. The host may name the folder instead (a build tree elsewhere).
 *
 * Loading also checks that the Lua layer bound the very libember this library calls: the Lua
 * package finds the runtime's functions in the process (ffi.C) when the host links
 * libember.so, but would load a second copy of the library from elsewhere when the host's copy
 * is not visible to it (libember.a linked without exporting its symbols). Two runtimes in
 * one process cannot share tensors, so that is an error here, not a crash later.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lauxlib.h"
#include "lua_host.h"
#include "lualib.h"

/* Set by cmake/install.cmake and cmake/lua_host.cmake; the defaults suit the usual layout. */
#ifndef EMBER_LIB_TO_LUA
#define EMBER_LIB_TO_LUA "../share/lua/5.1"
#endif
#ifndef EMBER_LIB_TO_DOCS
#define EMBER_LIB_TO_DOCS "../share/doc/ember"
#endif
#ifndef EMBER_INSTALL_FULL_LUADIR
#define EMBER_INSTALL_FULL_LUADIR "/usr/local/share/lua/5.1"
#endif
#ifndef EMBER_INSTALL_FULL_DOCDIR
#define EMBER_INSTALL_FULL_DOCDIR "/usr/local/share/doc/ember"
#endif
#ifndef EMBER_SOURCE_LUA_DIR
#define EMBER_SOURCE_LUA_DIR "lua"
#endif
#ifndef EMBER_SOURCE_DOCS_DIR
#define EMBER_SOURCE_DOCS_DIR "docs"
#endif

enum { LH_PATH_CAP = PATH_MAX + 64 };

static int has_package(const char *dir) {
  char init[LH_PATH_CAP];
  snprintf(init, sizeof init, "%s/ember/init.lua", dir);
  return access(init, R_OK) == 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir, made canonical where it exists (no "build/../lua" in messages and tracebacks). */
static void canonical(char *dir) {
  char real[PATH_MAX];
  if (realpath(dir, real) != NULL) snprintf(dir, LH_PATH_CAP, "%s", real);
}

/* The package folder and its docs folder (docs may stay ""). 0, or -1 with the error set. */
static int find_package(const char *fn, char *lua, char *docs) {
  static const struct { const char *lua, *docs; } beside_library[] = {
      {"/../lua", "/../docs"},                              /* build/ of a source tree */
      {"/" EMBER_LIB_TO_LUA, "/" EMBER_LIB_TO_DOCS},       /* <prefix>/lib of an install */
  };
  static const struct { const char *lua, *docs; } fixed[] = {
      {EMBER_INSTALL_FULL_LUADIR, EMBER_INSTALL_FULL_DOCDIR}, /* the configured prefix */
      {EMBER_SOURCE_LUA_DIR, EMBER_SOURCE_DOCS_DIR},          /* the source tree built from */
  };
  char here[LH_PATH_CAP] = "";
  Dl_info info;
  /* This library's file (or the program's, when the static library is linked in). */
  if (dladdr((void *)find_package, &info) != 0 && info.dli_fname != NULL &&
      realpath(info.dli_fname, here) != NULL) {
    char *slash = strrchr(here, '/');
    if (slash != NULL) *slash = '\0';
  }
  for (size_t i = 0; here[0] && i < sizeof beside_library / sizeof beside_library[0]; i++) {
    snprintf(lua, LH_PATH_CAP, "%s%s", here, beside_library[i].lua);
    if (has_package(lua)) {
      snprintf(docs, LH_PATH_CAP, "%s%s", here, beside_library[i].docs);
      canonical(lua);
      canonical(docs);
      return 0;
    }
  }
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    if (has_package(fixed[i].lua)) {
      snprintf(lua, LH_PATH_CAP, "%s", fixed[i].lua);
      snprintf(docs, LH_PATH_CAP, "%s", fixed[i].docs);
      return 0;
    }
  }
  return lh_error(fn, "cannot find the ember Lua package (ember/init.lua) beside %s, in %s or "
                  "in %s: pass its folder", here[0] ? here : "this library",
                  EMBER_INSTALL_FULL_LUADIR, EMBER_SOURCE_LUA_DIR);
}

/* package.path gains the package folder first; package.ember_lua_dir and ember_docs_dir say
 * where it is (the REPL's help reads the docs there), as the `ember` program sets them. */
static void set_package_path(lua_State *L, const char *lua, const char *docs) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", lua, lua, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 1);
  lua_pushstring(L, lua);
  lua_setfield(L, -2, "ember_lua_dir");
  if (docs[0] && is_dir(docs)) {
    lua_pushstring(L, docs);
    lua_setfield(L, -2, "ember_docs_dir");
  }
  lua_pop(L, 1);
}

/* The Lua half: `ember = require 'ember'`, ember.host into the registry, and the check that
 * Lua bound this process's libember (the address of em_last_error seen from both sides). */
static const char load_code[] =
    "local expected = ...\n"
    "ember = require 'ember'\n"
    "local host = require 'ember.host'\n"
    "host.check_library(expected)\n"
    "return host\n";

EM_API int em_lua_load(lua_State *L, const char *package_dir) {
  const char *fn = "lua_load";
  if (L == NULL) return lh_error(fn, "expected L, got NULL");
  if (!lua_checkstack(L, 4)) return lh_error(fn, "the Lua stack cannot grow");
  char lua[LH_PATH_CAP], docs[LH_PATH_CAP] = "";
  if (package_dir != NULL) {
    if (!has_package(package_dir))
      return lh_error(fn, "no ember/init.lua in %s (package_dir: the folder that holds ember/)",
                      package_dir);
    snprintf(lua, sizeof lua, "%s", package_dir);
  } else if (find_package(fn, lua, docs) != 0) {
    return -1;
  }
  lua_getglobal(L, "package");
  int has_package_lib = lua_istable(L, -1);
  lua_pop(L, 1);
  if (!has_package_lib)
    return lh_error(fn, "the state has no package library: call luaL_openlibs first");
  set_package_path(L, lua, docs);
  if (luaL_loadbuffer(L, load_code, sizeof load_code - 1, "=em_lua_load") != 0)
    return lh_error(fn, "%s", lua_tostring(L, -1)); /* cannot happen: the chunk is ours */
  /* A function pointer as a data pointer: POSIX guarantees the conversion (dlsym). */
  em_error_kind (*kind_fn)(void) = em_last_error_kind;
  void *address;
  memcpy(&address, &kind_fn, sizeof address);
  lua_pushlightuserdata(L, address);
  if (lh_pcall(L, fn, 1, 1) != 0) return -1;
  lua_setfield(L, LUA_REGISTRYINDEX, LH_REGISTRY_KEY);
  return 0;
}

EM_API lua_State *em_lua_open(const char *package_dir) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    lh_error("lua_open", "cannot create a Lua state (out of memory)");
    return NULL;
  }
  luaL_openlibs(L);
  if (em_lua_load(L, package_dir) != 0) {
    /* The message names em_lua_load's work; say it was this call's. */
    const char *why = em_last_error();
    if (strncmp(why, "lua_load: ", 10) == 0) why += 10;
    char msg[1024];
    snprintf(msg, sizeof msg, "lua_open: %s", why);
    em_set_error(msg);
    lua_close(L);
    return NULL;
  }
  return L;
}

EM_API void em_lua_close(lua_State *L) {
  if (L != NULL) lua_close(L);
}
