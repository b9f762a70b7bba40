/*
 * main.c: the `ember` program. It embeds LuaJIT, puts Ember's Lua package on the path, loads
 * `ember` as a global, applies EMBER_DEVICE, and then runs what the command line asks for, in
 * order, as lua.c does: -e statements, -l modules, a script with its arguments, and the REPL
 * (with no script or -e, or with -i). An uncaught error prints its message and a traceback on
 * stderr and the program exits with status 1. Under ember.distributed the message names the
 * rank and the whole job ends (MPI_Abort), so no other rank waits for this one forever.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ember.h"
#include "luajit.h"

static const char *progname = "ember";

static const char usage[] =
  "usage: ember [options] [script.lua [args...]]\n"
  "  (no script)     start the interactive REPL\n"
  "  bench [options] time training steps of a model on each device (bench --help)\n"
  "  doctor          print the devices, their kernels, threads and BLAS, with warnings\n"
  "  run --nproc N script.lua [args...]  run the script in N processes (mpirun; run --help)\n"
  "  -e stmt         run the Lua statement stmt\n"
  "  -l mod          require the module mod, as a global named after its last part\n"
  "  -i              open the REPL after running the script (or the -e statements)\n"
  "  -               run the script read from stdin\n"
  "  --              stop handling options\n"
  "  -v, --version   print the version\n"
  "  -h, --help      print this help\n"
  "Options run in the order given, before the script.\n"
  "Environment:\n"
  "  EMBER_DEVICE    the default device (cpu, auto, vulkan:N)\n"
  "  EMBER_HISTORY   the REPL's history file (default ~/.ember_history; empty: none)\n"
  "In the REPL, ?name shows the help for name and ? lists the names.\n";

/* The version, with what this runtime can use. (Calling into libember here also keeps the
 * program linked to it under --as-needed, which Lua's ffi.C relies on to find the runtime's
 * symbols in-process.) */
static void print_version(void) {
  printf("ember %s (%s)\n", EMBER_VERSION, LUAJIT_VERSION);
  printf("devices:");
  for (int d = 0; d < em_device_count(); d++) printf(" %s", em_device_name(d));
  printf("; threads: %d\n", em_get_num_threads());
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Where an installed program finds the Lua package and the docs, relative to its own folder
 * (cmake/install.cmake computes them from the install layout, so an install to any prefix, or
 * a staged one under DESTDIR, works without environment variables). */
#ifndef EMBER_INSTALL_LUA_REL
#define EMBER_INSTALL_LUA_REL "../share/lua/5.1"
#endif
#ifndef EMBER_INSTALL_DOCS_REL
#define EMBER_INSTALL_DOCS_REL "../share/doc/ember"
#endif

/* Finds ember/init.lua and the docs folder (for `?name`): in the build tree (build/../lua, its
 * docs next to it), in the install layout, in an older install layout (share/ember/lua), or
 * else in the source tree this program was built from. Both are recorded in
 * package.ember_lua_dir and package.ember_docs_dir. */
static void set_package_path(lua_State *L) {
  static const struct { const char *lua, *docs; } layouts[] = {
      {"/../lua", "/../docs"},
      {"/" EMBER_INSTALL_LUA_REL, "/" EMBER_INSTALL_DOCS_REL},
      {"/../share/ember/lua", "/../share/ember/docs"},
      {"/lua", "/docs"},
  };
  char exe[PATH_MAX], candidate[PATH_MAX + 64], chosen[PATH_MAX + 64] = "";
  char docs[PATH_MAX + 64] = "";
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0] && !chosen[0]; i++) {
      snprintf(candidate, sizeof candidate, "%s%s/ember/init.lua", exe, layouts[i].lua);
      if (access(candidate, R_OK) == 0) {
        snprintf(chosen, sizeof chosen, "%s%s", exe, layouts[i].lua);
        snprintf(docs, sizeof docs, "%s%s", exe, layouts[i].docs);
      }
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
  lua_pushstring(L, docs[0] && is_dir(docs) ? docs : EMBER_SOURCE_DOCS_DIR);
  lua_setfield(L, -2, "ember_docs_dir");
  lua_pop(L, 1);
}

/* What the command line asks for. */
typedef struct options {
  int script;      /* argv index of the script (0: none); "-" means stdin */
  int interactive; /* -i */
  int has_e;       /* some -e */
} options;

/* Checks the options; returns 0 to go on, 1 after printing help or the version, -1 on a bad
 * command line (reported). */
static int parse_options(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      o->script = i;
      return 0;
    }
    if (strcmp(a, "--") == 0) {
      o->script = i + 1 < argc ? i + 1 : 0;
      return 0;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(usage, stdout);
      return 1;
    }
    if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
      print_version();
      return 1;
    }
    if (strcmp(a, "-i") == 0) {
      o->interactive = 1;
    } else if (a[1] == 'e' || a[1] == 'l') {
      if (a[1] == 'e') o->has_e = 1;
      if (a[2] == '\0' && ++i >= argc) {
        fprintf(stderr, "%s: option %s needs an argument (%s --help lists the options)\n",
                progname, a, progname);
        return -1;
      }
    } else {
      fprintf(stderr, "%s: unknown option %s (%s --help lists the options)\n", progname, a,
              progname);
      return -1;
    }
  }
  return 0;
}

/* The global `arg`, as lua.c builds it: arg[0] the script, arg[1..] its arguments, the
 * program and options at negative indices. Without a script, arg[0] is the program. */
static void set_arg_table(lua_State *L, int argc, char **argv, int script) {
  lua_createtable(L, argc, 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* require(mod), stored in the global named after the last part of mod (-l ember.nn -> nn). */
static int require_global(lua_State *L, const char *mod) {
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int status = cli_pcall(L, 1, 1);
  if (status != 0) return status;
  const char *dot = strrchr(mod, '.');
  lua_setglobal(L, dot ? dot + 1 : mod);
  return 0;
}

static int run_string(lua_State *L, const char *code, const char *name) {
  int status = luaL_loadbuffer(L, code, strlen(code), name);
  if (status == 0) status = cli_pcall(L, 0, 0);
  return status;
}

/* Runs the -e and -l options in the order given. */
static int run_options(lua_State *L, char **argv, int end) {
  for (int i = 1; i < end; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l')) continue;
    const char *value = a[2] != '\0' ? a + 2 : argv[++i];
    int status = a[1] == 'e' ? run_string(L, value, "=(command line)") : require_global(L, value);
    if (status != 0) return status;
  }
  return 0;
}

/* The built-in command argv[script] names (`ember bench ...`, `ember doctor`), or NULL: a
 * command is a name without a file of that name. */
static const char *builtin_command(char **argv, int script) {
  static const char *const commands[] = {"bench", "doctor", "run"};
  if (script == 0) return NULL;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[script], commands[i]) == 0 && access(argv[script], F_OK) != 0)
      return commands[i];
  return NULL;
}

/* Runs the script at argv[script] with its arguments as `...`. The built-in commands run the
 * main function of the Lua module ember.<command>. */
static int run_script(lua_State *L, int argc, char **argv, int script) {
  const char *path = argv[script], *command = builtin_command(argv, script);
  int status;
  if (command != NULL) {
    char code[96];
    snprintf(code, sizeof code, "return require('ember.%s').main({...})", command);
    status = luaL_loadstring(L, code);
  } else
    status = luaL_loadfile(L, strcmp(path, "-") == 0 ? NULL : path);
  if (status != 0) return status;
  for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
  return cli_pcall(L, argc - script - 1, 0);
}

/* EMBER_DEVICE picks the default device before anything runs; an unknown name is an error. */
static int apply_device_env(lua_State *L) {
  const char *device = getenv("EMBER_DEVICE");
  if (device == NULL || device[0] == '\0') return 0;
  lua_getglobal(L, "ember");
  lua_getfield(L, -1, "set_default_device");
  lua_remove(L, -2);
  lua_pushstring(L, device);
  if (lua_pcall(L, 1, 0, 0) == 0) return 0;
  const char *msg = lua_tostring(L, -1);
  lua_pushfstring(L, "EMBER_DEVICE=%s: %s", device, msg ? msg : "cannot set the device");
  lua_remove(L, -2);
  return LUA_ERRRUN;
}

/* OpenMP's threads spin for a long while (about a millisecond) after each parallel region
 * before they sleep. On a machine whose cores are shared with other work, a spinning thread
 * takes the core the thread it waits for needs: a CNN training step measured 24 ms on a quiet
 * 2-core machine and 200-290 ms while another process ran, against 50 ms with a short spin.
 * A GPT step has many more, shorter regions: its tiny config (docs/performance.md) took 75 ms
 * at a spin of 20000 with another process running and 15 ms at 1000, while on a quiet machine
 * 1000 costs it 5-10% (about 10 ms against 9.5). 1000 is the default: robust first.
 * libgomp reads its settings when it is loaded, before main, so the program sets a shorter
 * spin and starts itself again; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept. */
static void tune_openmp(char **argv) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("EMBER_OPENMP_TUNED")) return;
  setenv("GOMP_SPINCOUNT", "1000", 1);
  /* OpenBLAS's own threads (Debian's pthreads build) busy-wait 2^28 cycles (about 0.1 s)
   * after each call before they sleep; 2^18 cycles is about as long as libgomp's spin above. */
  if (getenv("OPENBLAS_THREAD_TIMEOUT") == NULL) setenv("OPENBLAS_THREAD_TIMEOUT", "18", 1);
  setenv("EMBER_OPENMP_TUNED", "1", 1);
  execv("/proc/self/exe", argv); /* returns only on failure: then run as we are */
}

/* An uncaught error: its message (and traceback) on stderr. Under ember.distributed it names
 * the rank and ends every process of the job (MPI_Abort), so that no rank waits for this one
 * in a collective. */
static void report_failure(lua_State *L) {
  if (!em_dist_is_initialized()) {
    cli_report(L, progname);
    return;
  }
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s: rank %d", progname, em_dist_rank());
  cli_report(L, prefix);
  em_dist_abort(1);
}

int main(int argc, char **argv) {
  tune_openmp(argv);
  options o;
  int parsed = parse_options(argc, argv, &o);
  if (parsed != 0) return parsed < 0 ? 1 : 0;

  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create the Lua state (out of memory)\n", progname);
    return 1;
  }
  luaL_openlibs(L);
  set_package_path(L);
  set_arg_table(L, argc, argv, o.script);

  int status = require_global(L, "ember");
  /* `ember doctor` reports an unusable EMBER_DEVICE instead of stopping at it */
  const char *command = builtin_command(argv, o.script);
  if (status == 0 && !(command && strcmp(command, "doctor") == 0)) status = apply_device_env(L);
  if (status == 0) status = run_options(L, argv, o.script ? o.script : argc);
  if (status == 0 && o.script) status = run_script(L, argc, argv, o.script);
  if (status != 0) {
    report_failure(L);
    lua_close(L);
    return 1;
  }
  /* Piped input in which an entry failed exits 1, as a failed script does. */
  int failed = 0;
  if (o.interactive || (!o.script && !o.has_e)) failed = cli_repl(L) != 0;
  fflush(stdout);
  /* a distributed run that did not finalize: do it for the script (mpirun reports a process
   * that exits without it as a failure) */
  if (em_dist_is_initialized() && em_dist_finalize() != 0) {
    fprintf(stderr, "%s: rank %d: %s\n", progname, em_dist_rank(), em_last_error());
    em_dist_abort(1);
    failed = 1;
  }
  lua_close(L);
  return failed;
}
