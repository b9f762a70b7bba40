/*
 * interrupt.c: running Lua code from the program (with a traceback on error), and Ctrl-C.
 *
 * While Lua code runs, SIGINT installs a count hook, as lua.c's laction/lstop do: the hook
 * raises "interrupted!" at the next instruction the interpreter runs, so the error unwinds
 * through lua_pcall with a traceback and the REPL goes on. The handler is one-shot: a second
 * Ctrl-C before the hook fires gets the default action and ends the program. That is the way out
 * of code that never reaches the interpreter: a long C call, or a loop that LuaJIT compiled
 * (compiled traces do not check hooks). The REPL turns the JIT off for the chunks typed at it
 * (repl.c), so loops typed there are always interruptible.
 *
 * While input is being read, SIGINT only sets a flag and makes the blocking read return EINTR;
 * the line editor then drops what was typed (lineedit.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static lua_State *volatile running_state; /* the state the SIGINT handler hooks, or NULL */
static volatile sig_atomic_t newline_on_sigint; /* stderr is a terminal: end the echoed ^C */
static volatile sig_atomic_t prompt_sigint;

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  /* A C hook adds no frame of its own: level 0 is the Lua code that was running. */
  luaL_where(L, 0);
  lua_pushfstring(L, "%sinterrupted!", lua_tostring(L, -1));
  lua_error(L);
}

static void on_sigint_running(int sig) {
  (void)sig; /* SA_RESETHAND has already restored the default action for a second Ctrl-C. */
  /* The terminal echoed "^C" where the output was; the error message starts on a new line.
   * (write is async-signal-safe.) */
  if (newline_on_sigint && write(STDERR_FILENO, "\n", 1) < 0) newline_on_sigint = 0;
  lua_State *L = running_state;
  if (L != NULL) lua_sethook(L, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static void on_sigint_prompt(int sig) {
  (void)sig;
  prompt_sigint = 1;
}

/* The message handler: the error message (tostring'd when it is not a string) plus a
 * traceback of the stack where the error happened. */
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

int cli_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);

  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint_running;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  lua_State *outer = running_state;
  running_state = L;
  newline_on_sigint = isatty(STDERR_FILENO);
  /* A SIGINT that was ignored when we started (nohup, `cmd &` in a script) stays ignored. */
  sigaction(SIGINT, NULL, &old);
  int catching = old.sa_handler != SIG_IGN;
  if (catching) sigaction(SIGINT, &sa, NULL);

  int status = lua_pcall(L, nargs, nresults, base);

  if (catching) sigaction(SIGINT, &old, NULL);
  running_state = outer;
  /* A Ctrl-C that came after the last Lua instruction left its hook behind: drop it, or it
   * would interrupt the next, innocent chunk. */
  if (lua_gethook(L) == lstop) lua_sethook(L, NULL, 0, 0);
  lua_remove(L, base);
  return status;
}

void cli_report(lua_State *L, const char *prefix) {
  const char *msg = lua_tostring(L, -1);
  fflush(stdout);
  if (prefix != NULL) fprintf(stderr, "%s: ", prefix);
  fprintf(stderr, "%s\n", msg ? msg : "(error object is not a string)");
  fflush(stderr);
  lua_pop(L, 1);
}

void cli_prompt_signals_on(void) {
  struct sigaction sa;
  sigaction(SIGINT, NULL, &sa);
  if (sa.sa_handler == SIG_IGN) return; /* ignored by whoever started us: leave it so */
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint_prompt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a blocking read returns EINTR so the flag is seen at once */
  sigaction(SIGINT, &sa, NULL);
}

int cli_prompt_interrupted(void) {
  if (!prompt_sigint) return 0;
  prompt_sigint = 0;
  return 1;
}
