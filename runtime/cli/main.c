/*
 * main.c: the `ember` program. It embeds LuaJIT, puts Ember's Lua package on the path, loads
 * `ember` as a global, and then runs scripts (`ember script.lua args`), statements (`-e`),
 * modules (`-l`) or the REPL. Uncaught errors print a traceback and exit with status 1.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "luajit.h"
#include "ember.h"

static const char *usage =
  "usage: ember [options] [script.lua [args...]]\n"
  "  (no script)     start the interactive REPL\n"
  "  -e stmt         run the Lua statement stmt\n"
  "  -l mod          require the module mod (as a global of the same name)\n"
  "  -i              open the REPL after running the script\n"
  "  -v, --version   print the version\n"
  "  -h, --help      print this help\n"
  "Environment: EMBER_DEVICE picks the default device (cpu, auto, ...).\n";

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int cli_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return status;
}

void cli_report(lua_State *L, int status) {
  if (status == 0) return;
  const char *msg = lua_tostring(L, -1);
  fprintf(stderr, "%s\n", msg ? msg : "(error with no message)");
  fflush(stderr);
  lua_pop(L, 1);
}

static int file_exists(const char *path) { return access(path, R_OK) == 0; }

/* Finds lua/ember/init.lua: next to the program (build/../lua), in an installed share folder,
 * or in the source tree this program was built from. */
static void set_package_path(lua_State *L) {
  char exe[PATH_MAX], candidate[PATH_MAX + 64], chosen[PATH_MAX + 64] = "";
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    const char *rel[] = {"/../lua", "/../share/ember/lua", "/lua"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0] && !chosen[0]; i++) {
      snprintf(candidate, sizeof candidate, "%s%s/ember/init.lua", exe, rel[i]);
      if (file_exists(candidate)) snprintf(chosen, sizeof chosen, "%s%s", exe, rel[i]);
    }
  }
  if (!chosen[0]) snprintf(chosen, sizeof chosen, "%s", EMBER_SOURCE_LUA_DIR);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", chosen, chosen, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 1);
  lua_pushstring(L, chosen);
  lua_setfield(L, -2, "ember_lua_dir");
  lua_pop(L, 1);
}

static int require_global(lua_State *L, const char *mod) {
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int status = cli_pcall(L, 1, 1);
  if (status != 0) return status;
  lua_setglobal(L, mod);
  return 0;
}

static int run_string(lua_State *L, const char *code, const char *name) {
  int status = luaL_loadbuffer(L, code, strlen(code), name);
  if (status == 0) status = cli_pcall(L, 0, 0);
  return status;
}

/* Runs a script with the global `arg` set as in lua.c: arg[0] the script, arg[1..] its args. */
static int run_script(lua_State *L, int argc, char **argv, int script_index) {
  lua_createtable(L, argc - script_index, script_index + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script_index);
  }
  lua_setglobal(L, "arg");
  int status = luaL_loadfile(L, argv[script_index]);
  if (status != 0) return status;
  int nargs = argc - script_index - 1;
  for (int i = script_index + 1; i < argc; i++) lua_pushstring(L, argv[i]);
  return cli_pcall(L, nargs, 0);
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "ember: cannot create the Lua state (out of memory)\n");
    return 1;
  }
  luaL_openlibs(L);
  set_package_path(L);

  int interactive = 0, script = 0, did_something = 0;
  for (int i = 1; i < argc && !script; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(usage, stdout);
      lua_close(L);
      return 0;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
      printf("ember %s (%s)\n", EMBER_VERSION, LUAJIT_VERSION);
      lua_close(L);
      return 0;
    } else if (strcmp(a, "-i") == 0) {
      interactive = 1;
    } else if ((strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) && i + 1 >= argc) {
      fprintf(stderr, "ember: option %s needs an argument\n%s", a, usage);
      lua_close(L);
      return 1;
    } else if (a[0] == '-' && strcmp(a, "-e") != 0 && strcmp(a, "-l") != 0 && a[1] != '\0') {
      fprintf(stderr, "ember: unknown option %s\n%s", a, usage);
      lua_close(L);
      return 1;
    } else if (a[0] != '-') {
      script = i;
    } else {
      i++; /* -e / -l take their argument in the second pass */
    }
  }

  int status = require_global(L, "ember");
  for (int i = 1; status == 0 && i < argc && (script == 0 || i < script); i++) {
    if (strcmp(argv[i], "-e") == 0) {
      status = run_string(L, argv[++i], "=(command line)");
      did_something = 1;
    } else if (strcmp(argv[i], "-l") == 0) {
      status = require_global(L, argv[++i]);
    }
  }
  if (status == 0 && script) status = run_script(L, argc, argv, script);
  if (status != 0) {
    cli_report(L, status);
    lua_close(L);
    return 1;
  }
  if (interactive || (!script && !did_something)) cli_repl(L);
  lua_close(L);
  return 0;
}
