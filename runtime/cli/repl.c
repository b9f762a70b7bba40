/*
 * repl.c: the interactive loop: read a line, compile it as an expression (so results print
 * without '='), else as a statement; keep reading while the chunk is incomplete.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef EMBER_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

static char *read_line(const char *prompt) {
#ifdef EMBER_HAVE_READLINE
  return readline(prompt);
#else
  static char buf[4096];
  fputs(prompt, stdout);
  fflush(stdout);
  if (fgets(buf, sizeof buf, stdin) == NULL) return NULL;
  buf[strcspn(buf, "\n")] = '\0';
  return strdup(buf);
#endif
}

static int incomplete(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  return len >= 5 && strcmp(msg + len - 5, "<eof>") == 0;
}

static void print_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base;
  if (n <= 0) return;
  lua_getglobal(L, "print");
  lua_insert(L, base + 1);
  if (cli_pcall(L, n, 0) != 0) cli_report(L, 1);
}

void cli_repl(lua_State *L) {
  char *chunk = NULL;
  for (;;) {
    char *line = read_line(chunk ? ">> " : "> ");
    if (line == NULL) break;
    size_t old = chunk ? strlen(chunk) : 0;
    char *joined = malloc(old + strlen(line) + 2);
    if (joined == NULL) break;
    snprintf(joined, old + strlen(line) + 2, "%s%s%s", chunk ? chunk : "", chunk ? "\n" : "", line);
    free(chunk);
    free(line);
    chunk = joined;
    int base = lua_gettop(L);
    size_t len = strlen(chunk) + 8;
    char *expr = malloc(len);
    snprintf(expr, len, "return %s", chunk);
    int status = luaL_loadbuffer(L, expr, strlen(expr), "=stdin");
    free(expr);
    if (status != 0) {
      lua_pop(L, 1);
      status = luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
    }
    if (incomplete(L, status)) {
      lua_pop(L, 1);
      continue;
    }
#ifdef EMBER_HAVE_READLINE
    add_history(chunk);
#endif
    free(chunk);
    chunk = NULL;
    if (status == 0) status = cli_pcall(L, 0, LUA_MULTRET);
    if (status != 0) cli_report(L, status);
    else print_results(L, base);
    lua_settop(L, base);
  }
  free(chunk);
  fputs("\n", stdout);
}
