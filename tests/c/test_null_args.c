/*
 * test_null_args.c: every public function, called with NULL for each of its pointer
 * arguments, fails cleanly: it returns its failure value (NULL, -1, EM_NUM_DTYPES) with an
 * error message that starts with the function's name (names_function says how), and does not
 * crash. The functions
 * documented to accept NULL (em_release, em_retain, the *_free and *_close functions, ...)
 * only have to return.
 *
 * The cases are generated from the header (scripts/gen-null-args.py -> null_args_cases.h);
 * this test counts the header's EM_API declarations itself, so a function added without
 * regenerating the cases fails here. Each case runs in a child process, so that one crash
 * does not hide the others: the report lists every function that failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

typedef struct null_case {
  const char *function;
  const char *name; /* the expected start of the message; NULL: no message expected */
  int (*run)(void); /* 1 when the failure value came back; NULL: no pointer arguments */
} null_case;

#include "null_args_cases.h"

/* The EM_API declarations in the header next to this source (tests/c/../../runtime/include). */
static int count_header_functions(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s", __FILE__);
  char *slash = strrchr(path, '/');
  if (slash == NULL) return -1;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/../../runtime/include/ember.h");
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "EM_API ", 7) == 0) n++;
  fclose(f);
  return n;
}

/* Whether msg names the function: it starts with "name:", where name (without a trailing
 * '_') is part of the function's C name ("solve:" for em_linalg_solve, "idx:" for
 * em_read_idx, "add_:" for em_add_scaled_: the name the Lua layer shows), or is the expected
 * name itself (the op called, for em_binary and the like). */
static int names_function(const char *msg, const null_case *c) {
  const char *colon = strchr(msg, ':');
  if (colon == NULL || colon == msg || colon - msg >= 64) return 0;
  char name[64];
  size_t n = (size_t)(colon - msg);
  memcpy(name, msg, n);
  name[n] = '\0';
  if (strcmp(name, c->name) == 0) return 1;
  if (n > 1 && name[n - 1] == '_') name[n - 1] = '\0';
  return strstr(c->function + 3, name) != NULL;
}

/* In a child: 0 when the case behaved, 1 for a wrong return value, 2 for a wrong message. */
static int run_case(const null_case *c) {
  em_clear_error();
  if (c->run() != 1) return 1;
  if (c->name == NULL) return 0;
  return names_function(em_last_error(), c) ? 0 : 2;
}

int main(void) {
  int cases = (int)(sizeof null_cases / sizeof null_cases[0]);
  int declared = count_header_functions();
  if (declared != cases)
    fprintf(stderr, "ember.h declares %d EM_API functions, null_args_cases.h covers %d: run "
                    "scripts/gen-null-args.py\n", declared, cases);
  CHECK(declared == cases);
  int checked = 0;
  for (int i = 0; i < cases; i++) {
    const null_case *c = &null_cases[i];
    if (c->run == NULL) continue;
    checked++;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      int rc = run_case(c);
      if (rc == 1) fprintf(stderr, "%s: did not return its failure value\n", c->function);
      if (rc == 2)
        fprintf(stderr, "%s: expected a message naming it (\"%s: ...\"), got \"%s\"\n",
                c->function, c->name, em_last_error());
      fflush(NULL);
      _exit(rc);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
      fprintf(stderr, "%s: cannot run the case in a child process\n", c->function);
      CHECK(0);
      continue;
    }
    if (WIFSIGNALED(status))
      fprintf(stderr, "%s: crashed (signal %d)\n", c->function, WTERMSIG(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  printf("%d functions with pointer arguments checked\n", checked);
  return check_report();
}
