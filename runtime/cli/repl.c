/*
 * repl.c: the read-eval-print loop.
 *
 * Each chunk is compiled first as an expression ("return <chunk>"), so that results print
 * without '=', then as a statement. While either form is only missing its end ("... near
 * <eof>"), the next line continues the chunk at a ">>" prompt. A trailing ';' evaluates
 * without printing. A line starting with '?' asks for help (ember.repl.help_command).
 *
 * Chunks typed here run with LuaJIT's JIT off (for the chunk and the functions defined in it):
 * compiled loops do not check hooks, and Ctrl-C must be able to stop `while true do end`.
 * Library code that such a chunk calls is still compiled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "luajit.h"

typedef enum chunk_kind { CHUNK_EXPR, CHUNK_STMT, CHUNK_INCOMPLETE, CHUNK_ERROR } chunk_kind;

/* A syntax error at the end of the text: more lines may complete it. */
static int incomplete(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  const char eof[] = "'<eof>'";
  size_t n = sizeof eof - 1;
  return msg != NULL && len >= n && strcmp(msg + len - n, eof) == 0;
}

/* Compiles "<before><body, without a trailing ';'><after>" as the chunk "stdin". */
static int load_wrapped(lua_State *L, const char *before, const char *body, const char *after) {
  size_t n = strlen(body);
  if (*after != '\0') /* the wrapped form must not end in "x;)" */
    while (n > 0 && strchr(" \t\r;", body[n - 1]) != NULL) n--;
  size_t a = strlen(before), b = strlen(after);
  char *code = malloc(a + n + b + 1);
  if (code == NULL) {
    lua_pushliteral(L, "out of memory");
    return LUA_ERRMEM;
  }
  memcpy(code, before, a);
  memcpy(code + a, body, n);
  memcpy(code + a + n, after, b + 1);
  int status = luaL_loadbuffer(L, code, a + n + b, "=stdin");
  free(code);
  return status;
}

/* Compiles the chunk. CHUNK_EXPR / CHUNK_STMT leave the function on the stack, CHUNK_ERROR the
 * message; CHUNK_INCOMPLETE leaves nothing. */
static chunk_kind compile(lua_State *L, const char *chunk) {
  /* Lua 5.1's "=expr" shorthand prints expr. */
  const char *body = chunk[0] == '=' ? chunk + 1 : chunk;
  int status = load_wrapped(L, "return ", body, "");
  if (status == 0) {
    /* Run it as "return (function(...) return ... end)(<expr>\n)": the same values, but the
     * expression's last call is not a tail call, so an error raised there still names
     * stdin:line. (No global is involved: the user may have redefined any of them.) */
    if (load_wrapped(L, "return (function(...) return ... end)(", body, "\n)") == 0)
      lua_remove(L, -2);
    else lua_pop(L, 1);
    return CHUNK_EXPR;
  }
  int expr_incomplete = incomplete(L, status);
  lua_pop(L, 1);
  status = luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
  if (status == 0) return CHUNK_STMT;
  if (incomplete(L, status) || expr_incomplete) {
    lua_pop(L, 1);
    return CHUNK_INCOMPLETE;
  }
  return CHUNK_ERROR;
}

/* A chunk ending in ';' runs silently, as in MATLAB and Torch7's trepl. */
static int ends_with_semicolon(const char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
  return n > 0 && s[n - 1] == ';';
}

/* The loop's state: the chunk read so far (NULL at the primary prompt), and how many entries
 * failed (piped input that raised an error makes the program exit non-zero). */
typedef struct repl {
  lua_State *L;
  int ref; /* ember.repl in the registry, or LUA_NOREF */
  char *chunk;
  int failed;
} repl;

/* Reports the error on top of the stack, counting it. */
static void report(repl *r) {
  cli_report(r->L, NULL);
  r->failed++;
}

/* Calls ember.repl.<name> with the values above base as arguments (or the global `print` when
 * ember.repl did not load), reporting errors. */
static void call_repl(repl *r, const char *name, int base) {
  lua_State *L = r->L;
  int n = lua_gettop(L) - base;
  if (r->ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
  } else {
    lua_getglobal(L, "print");
  }
  lua_insert(L, base + 1);
  if (cli_pcall(L, n, 0) != 0) report(r);
}

static void run_chunk(repl *r, const char *chunk, chunk_kind kind) {
  lua_State *L = r->L;
  int base = lua_gettop(L) - 1;
  /* The JIT off for this chunk and its nested functions: see the head of this file. */
  luaJIT_setmode(L, -1, LUAJIT_MODE_ALLFUNC | LUAJIT_MODE_OFF);
  if (cli_pcall(L, 0, LUA_MULTRET) != 0) {
    report(r);
  } else if (kind == CHUNK_EXPR && lua_gettop(L) > base) {
    /* `_` holds the last expression's (first) value, as in Python's REPL */
    if (!lua_isnil(L, base + 1)) {
      lua_pushvalue(L, base + 1);
      lua_setglobal(L, "_");
    }
    if (!ends_with_semicolon(chunk)) call_repl(r, "print_results", base);
  }
  lua_settop(L, base);
  fflush(stdout);
}

/* `?name` or `?`: the text after '?' when the line is a help request, else NULL. */
static const char *help_request(const char *line) {
  while (*line == ' ' || *line == '\t') line++;
  return *line == '?' ? line + 1 : NULL;
}

static int load_repl_module(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ember.repl");
  if (cli_pcall(L, 1, 1) != 0) {
    fprintf(stderr, "ember: the REPL helpers did not load (no completion or help):\n");
    cli_report(L, NULL);
    return LUA_NOREF;
  }
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

static void show_banner(lua_State *L, int repl_ref) {
  if (repl_ref == LUA_NOREF) return;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, repl_ref);
  lua_getfield(L, -1, "banner");
  if (lua_pcall(L, 0, 1, 0) == 0 && lua_isstring(L, -1)) {
    cli_input_message(lua_tostring(L, -1));
    cli_input_message("\n");
  }
  lua_settop(L, top);
}

/* chunk + "\n" + line (just a copy of line when there is no chunk yet). */
static char *append_line(char *chunk, const char *line) {
  int continued = chunk != NULL;
  size_t old = continued ? strlen(chunk) : 0, n = strlen(line);
  char *joined = realloc(chunk, old + n + 2);
  if (joined == NULL) {
    free(chunk);
    return NULL;
  }
  if (continued) joined[old++] = '\n';
  memcpy(joined + old, line, n + 1);
  return joined;
}

/* Takes one line as if typed: a `?` request, or one more line of the chunk, which runs once it
 * is complete. */
static void feed(repl *r, const char *line) {
  lua_State *L = r->L;
  const char *help = r->chunk == NULL ? help_request(line) : NULL;
  if (help != NULL) {
    cli_input_remember(line);
    int base = lua_gettop(L);
    lua_pushstring(L, help);
    call_repl(r, "help_command", base);
    lua_settop(L, base);
    return;
  }
  if (r->chunk == NULL && line[strspn(line, " \t\r")] == '\0') return;
  r->chunk = append_line(r->chunk, line);
  if (r->chunk == NULL) {
    fprintf(stderr, "ember: out of memory reading input\n");
    return;
  }
  chunk_kind kind = compile(L, r->chunk);
  if (kind == CHUNK_INCOMPLETE) return;
  cli_input_remember(r->chunk);
  if (kind == CHUNK_ERROR) report(r);
  else run_chunk(r, r->chunk, kind);
  free(r->chunk);
  r->chunk = NULL;
}

/* Several lines at once (a paste, or a multi-line entry recalled from the history). Whole, if
 * they compile as one chunk: its locals then stay in scope from line to line, as in the script
 * they were copied from. Otherwise line by line, as if typed, so that "x = 1" followed by
 * "x + 1" prints 2. */
static void feed_block(repl *r, char *block) {
  if (r->chunk == NULL && help_request(block) == NULL) {
    chunk_kind kind = compile(r->L, block);
    if (kind == CHUNK_EXPR || kind == CHUNK_STMT) {
      cli_input_remember(block);
      run_chunk(r, block, kind);
      return;
    }
    if (kind == CHUNK_ERROR) lua_pop(r->L, 1);
  }
  for (char *line = block, *next; line != NULL; line = next) {
    next = strchr(line, '\n');
    if (next != NULL) *next++ = '\0';
    feed(r, line);
  }
}

int cli_repl(lua_State *L) {
  repl r = {L, load_repl_module(L), NULL, 0};
  cli_input_open(L, r.ref);
  if (cli_input_interactive()) show_banner(L, r.ref);
  cli_prompt_signals_on();

  for (;;) {
    char *line;
    cli_read_status rs = cli_read_line(r.chunk ? ">> " : "> ", &line);
    if (rs == CLI_READ_INTERRUPT) {
      free(r.chunk);
      r.chunk = NULL;
      continue;
    }
    if (rs == CLI_READ_EOF) break;
    if (strchr(line, '\n') != NULL) feed_block(&r, line);
    else feed(&r, line);
    free(line);
  }

  /* Input ended inside a chunk (piped input): say why it did not run. */
  if (r.chunk != NULL) {
    int status = luaL_loadbuffer(L, r.chunk, strlen(r.chunk), "=stdin");
    if (status != 0) report(&r);
    else lua_pop(L, 1);
    free(r.chunk);
  }
  int interactive = cli_input_interactive();
  cli_input_close();
  if (r.ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, r.ref);
  return interactive ? 0 : r.failed;
}
