/*
 * test_lua_bridge.c: the Lua bridge (ember_lua.h, libember_lua) as a host uses it. A tensor
 * pushed into Lua is the same memory (Lua's in-place op shows in the C buffer behind an
 * em_from_blob tensor); a tensor comes back as a new reference; the references balance (the
 * blob's deleter runs once, after both sides let go); Lua errors (error(), a failing op, a
 * syntax error, a missing file, a non-string error value) come back as -1 with a message and
 * traceback, the stack as it was; a value that is not a tensor is a clear error; a state
 * without the package is refused; and every function given NULL fails cleanly (the cases
 * scripts/gen-null-args.py generates from the header, each in a child process).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ember_lua.h"
#include "lauxlib.h"
#include "lualib.h"

/* The source tree's folders, from this file's path (tests/c/../../x). */
static void source_path(char *out, size_t cap, const char *rel) {
  snprintf(out, cap, "%s", __FILE__);
  char *slash = strrchr(out, '/');
  if (slash != NULL) snprintf(slash, cap - (size_t)(slash - out), "/../../%s", rel);
}

static int deleter_calls;
static void count_delete(void *data, void *ctx) {
  (void)ctx;
  deleter_calls++;
  free(data);
}

/* Lua's in-place op changes the C buffer; Lua's result comes back; references balance. */
static void test_sharing(void) {
  lua_State *L = em_lua_open(NULL);
  CHECK(L != NULL);
  if (L == NULL) return;
  float *buf = malloc(4 * sizeof *buf);
  for (int i = 0; i < 4; i++) buf[i] = (float)(i + 1);
  int64_t n = 4;
  deleter_calls = 0;
  em_tensor *x = em_from_blob(buf, EM_FLOAT32, 1, &n, NULL, count_delete, NULL);
  CHECK(x != NULL && x->refcount == 1);
  int top = lua_gettop(L);
  CHECK(em_lua_push_tensor(L, x) == 0);
  CHECK(lua_gettop(L) == top + 1);
  CHECK(x->refcount == 2); /* Lua's own reference */
  lua_setglobal(L, "x");
  CHECK(em_lua_dostring(L, "x:mul_(10); x[2] = -1", "=sharing", 0) == 0);
  CHECK(buf[0] == 10 && buf[1] == -1 && buf[2] == 30 && buf[3] == 40); /* the same memory */
  buf[3] = 7; /* and C's writes show in Lua */
  CHECK(em_lua_dostring(L, "return x[4], x:sum()", "=read", 2) == 0);
  CHECK(lua_tonumber(L, -2) == 7);
  em_tensor *sum = em_lua_to_tensor(L, -1);
  double v = 0;
  CHECK(sum != NULL && em_item(sum, &v) == 0 && v == 10 - 1 + 30 + 7);
  CHECK(sum != NULL && sum->refcount >= 2); /* C's new reference and the Lua value's */
  lua_pop(L, 2);
  CHECK(lua_gettop(L) == top);

  /* The same tensor comes back: the very em_tensor, one more reference. */
  lua_getglobal(L, "x");
  em_tensor *back = em_lua_to_tensor(L, -1);
  lua_pop(L, 1);
  CHECK(back == x && x->refcount == 3);
  em_release(back);
  CHECK(x->refcount == 2);

  /* A Lua function called with C tensors and numbers (em_lua_pcall): an update in place. */
  CHECK(em_lua_dostring(L, "return function(w, lr) w:sub_(lr) return w:mean() end", "=step",
                        1) == 0);
  CHECK(em_lua_push_tensor(L, x) == 0);
  lua_pushnumber(L, 1);
  CHECK(em_lua_pcall(L, 2, 1) == 0);
  em_tensor *mean = em_lua_to_tensor(L, -1);
  lua_pop(L, 1);
  CHECK(mean != NULL && em_item(mean, &v) == 0 && check_close(v, (9 - 2 + 29 + 6) / 4.0, 1e-6));
  CHECK(buf[0] == 9);
  em_release(mean);

  em_release(x); /* Lua still holds it: the memory stays */
  CHECK(deleter_calls == 0);
  em_lua_close(L); /* Lua's references go with the state */
  CHECK(deleter_calls == 1);
  CHECK(sum != NULL && sum->refcount == 1); /* C's reference outlives the state */
  em_release(sum);
}

/* Lua errors come back as Ember errors with a traceback, never a crash; the stack is kept. */
static void test_errors(void) {
  lua_State *L = em_lua_open(NULL);
  CHECK(L != NULL);
  if (L == NULL) return;
  lua_pushinteger(L, 42);
  int top = lua_gettop(L);

  CHECK(em_lua_dostring(L, "local a = 1\nerror('boom')", "=script", 0) == -1);
  CHECK(strncmp(em_last_error(), "lua_dostring: script:2: boom\nstack traceback:", 45) == 0);
  CHECK(em_last_error_kind() == EM_ERR_VALUE);
  CHECK(lua_gettop(L) == top);

  /* An Ember op failing in Lua: its message, at the script's line. */
  CHECK(em_lua_dostring(L, "\nreturn ember.ones(3) + ember.ones(4)", "=ops", 1) == -1);
  CHECK(strncmp(em_last_error(), "lua_dostring: ops:2: ", 21) == 0);
  CHECK(strstr(em_last_error(), "broadcast") != NULL);
  CHECK(lua_gettop(L) == top);

  CHECK(em_lua_dostring(L, "return 1 +", "=syntax", 1) == -1);
  CHECK(strncmp(em_last_error(), "lua_dostring: syntax:1:", 23) == 0);
  CHECK(em_lua_dostring(L, "error({})", "=table", 0) == -1);
  CHECK(strstr(em_last_error(), "(error object is a table value)") != NULL);
  CHECK(em_lua_dofile(L, "/no/such/script.lua", 0) == -1);
  CHECK(strncmp(em_last_error(), "lua_dofile: cannot open /no/such/script.lua", 43) == 0);
  CHECK(lua_gettop(L) == top);

  /* em_lua_pcall: the function and its arguments are popped on error too. */
  CHECK(em_lua_dostring(L, "return function(t) return t:nosuch() end", "=f", 1) == 0);
  lua_pushnil(L);
  CHECK(em_lua_pcall(L, 1, 1) == -1);
  CHECK(strncmp(em_last_error(), "lua_pcall: f:1: ", 16) == 0);
  CHECK(lua_gettop(L) == top);
  CHECK(em_lua_pcall(L, 5, 0) == -1); /* not that many values on the stack */
  CHECK(strstr(em_last_error(), "expected a function and 5 arguments") != NULL);
  CHECK(lua_gettop(L) == top);

  /* A value that is not a tensor: what it is, where it is; nothing popped. */
  CHECK(em_lua_to_tensor(L, -1) == NULL);
  CHECK(strcmp(em_last_error(),
               "lua_to_tensor: expected an ember tensor at stack index -1, got a number") == 0);
  lua_newtable(L);
  CHECK(em_lua_to_tensor(L, top + 1) == NULL);
  CHECK(strstr(em_last_error(), "got a table") != NULL);
  lua_pop(L, 1);
  CHECK(em_lua_dostring(L, "return ember.ffi.new('int[2]')", "=cdata", 1) == 0);
  CHECK(em_lua_to_tensor(L, -1) == NULL);
  CHECK(strstr(em_last_error(), "got a cdata<int [2]>") != NULL);
  lua_pop(L, 1);
  CHECK(em_lua_to_tensor(L, top + 3) == NULL);
  CHECK(strstr(em_last_error(), "stack index 4 is not valid (the stack holds 1 values)") != NULL);
  CHECK(em_lua_to_tensor(L, LUA_GLOBALSINDEX) == NULL);
  CHECK(lua_gettop(L) == top);

  /* One NULL among valid arguments. */
  CHECK_ERROR(em_lua_push_tensor(L, NULL), "lua_push_tensor: expected t, got NULL");
  CHECK_ERROR(em_lua_dofile(L, NULL, 0), "lua_dofile: expected path, got NULL");
  CHECK_ERROR(em_lua_dostring(L, NULL, "=x", 0), "lua_dostring: expected code, got NULL");
  CHECK(em_lua_dostring(L, "return 5", NULL, 1) == 0 && lua_tointeger(L, -1) == 5);
  lua_pop(L, 1);
  CHECK(lua_gettop(L) == top);
  em_lua_close(L);
}

/* A state the host made itself gets the package with em_lua_load; a bare one is refused. */
static void test_host_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  int64_t n = 2;
  em_tensor *t = em_ones(1, &n, EM_FLOAT32, 0);
  CHECK_ERROR(em_lua_push_tensor(L, t), "lua_push_tensor: this Lua state has no ember package");
  CHECK(em_lua_to_tensor(L, 1) == NULL);
  CHECK_ERROR(em_lua_load(L, "/no/such/folder"), "lua_load: no ember/init.lua in /no/such/folder");
  char lua_dir[4096];
  source_path(lua_dir, sizeof lua_dir, "lua");
  CHECK(em_lua_load(L, lua_dir) == 0);
  CHECK(em_lua_push_tensor(L, t) == 0);
  lua_setglobal(L, "t");
  CHECK(em_lua_dostring(L, "assert(ember.is_tensor(t)) return t:sum():item()", "=t", 1) == 0);
  CHECK(lua_tonumber(L, -1) == 2);
  lua_pop(L, 1);
  em_lua_close(L);
  CHECK(t->refcount == 1);
  em_release(t);

  lua_State *bare = luaL_newstate(); /* no standard libraries: no package library */
  CHECK_ERROR(em_lua_load(bare, NULL), "lua_load: the state has no package library");
  lua_close(bare);
  CHECK(em_lua_open("/no/such/folder") == NULL);
  CHECK(strncmp(em_last_error(), "lua_open: no ember/init.lua in", 30) == 0);
}

typedef struct null_case {
  const char *function;
  const char *name; /* the expected start of the message; NULL: no message expected */
  int (*run)(void); /* 1 when the failure value came back; NULL: no pointer arguments */
} null_case;
#include "null_args_lua_cases.h"

/* Every bridge function with its pointer arguments NULL, each in a child process (as
 * test_null_args.c does for ember.h); the cases cover every EM_API line of the header. */
static void test_null_args(void) {
  char path[4096], line[1024];
  source_path(path, sizeof path, "runtime/include/ember_lua.h");
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  int declared = 0, cases = (int)(sizeof null_lua_cases / sizeof null_lua_cases[0]);
  while (f != NULL && fgets(line, sizeof line, f))
    if (strncmp(line, "EM_API ", 7) == 0) declared++;
  if (f != NULL) fclose(f);
  if (declared != cases)
    fprintf(stderr, "ember_lua.h declares %d functions, the cases cover %d: run "
                    "scripts/gen-null-args.py\n", declared, cases);
  CHECK(declared == cases);
  for (int i = 0; i < cases; i++) {
    const null_case *c = &null_lua_cases[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      em_clear_error();
      int rc = c->run() == 1 ? 0 : 1;
      if (rc == 0 && c->name != NULL &&
          (strncmp(em_last_error(), c->name, strlen(c->name)) != 0 ||
           em_last_error()[strlen(c->name)] != ':'))
        rc = 2;
      if (rc != 0) fprintf(stderr, "%s: rc %d, message \"%s\"\n", c->function, rc, em_last_error());
      fflush(NULL);
      _exit(rc);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) fprintf(stderr, "%s: crashed (signal %d)\n", c->function,
                                     WTERMSIG(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

int main(void) {
  test_sharing();
  test_errors();
  test_host_state();
  test_null_args();
  return check_report();
}
