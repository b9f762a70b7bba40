/*
 * test_null_one_arg.c: one NULL among valid arguments. test_null_args.c calls every public
 * function with all its pointer arguments NULL, which the first check of each function
 * catches; this test makes each pointer argument NULL in turn while the others are valid
 * (a real tensor, arrays, buffers, out-slots), so that a function that checks its first
 * argument and dereferences its second is caught too. The cases are generated from the header
 * (scripts/gen-null-args.py -> null_one_arg_cases.h) for every function with two or more
 * pointer parameters whose other parameters the fixtures below can fill (opaque handles and
 * callbacks cannot be made up; test_null_args covers those functions). The arguments that are
 * not pointers are 1, and 0 for a device (the CPU).
 *
 * A case passes when the function returns its failure value with a message that names it,
 * without crashing. Each runs in a child process, so that one crash does not hide the others:
 * the report lists every function and argument that failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* The fixtures the generated cases pass for the pointer arguments that are not NULL (some
 * may go unused while no function in the header has such a parameter). */
#define FIXTURE static __attribute__((unused))
FIXTURE em_tensor *fx_t;                /* a float32 CPU tensor [2, 2] of ones */
FIXTURE em_tensor *fx_tensors[8];       /* fx_t, eight times */
FIXTURE em_tensor *fx_out[8];           /* out-slots */
FIXTURE int64_t fx_i64[EM_MAX_DIMS * 2];
FIXTURE int fx_int[EM_MAX_DIMS * 2];
FIXTURE _Alignas(64) unsigned char fx_buf[4096];
FIXTURE const char *fx_path = "/nonexistent-folder-of-ember-tests/x"; /* never created */
FIXTURE const char *fx_names[8] = {"n", "n", "n", "n", "n", "n", "n", "n"};
FIXTURE uint64_t fx_u64[8];
FIXTURE double fx_double[8];
FIXTURE float fx_float[64];
FIXTURE em_dtype fx_dtype[8];
FIXTURE em_sgd_options fx_sgd;
FIXTURE em_adam_options fx_adam;

typedef struct one_null_case {
  const char *function, *param; /* the function, and its argument that is NULL */
  const char *name;             /* the expected start of the message */
  int (*run)(void);             /* 1 when the failure value came back */
} one_null_case;

#include "null_one_arg_cases.h"

/* As test_null_args.c: the message starts with "name:", where name (without a trailing '_')
 * is part of the function's C name or the expected name itself. */
static int names_function(const char *msg, const one_null_case *c) {
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

static void make_fixtures(void) {
  int64_t sizes[2] = {2, 2};
  fx_t = em_ones(2, sizes, EM_FLOAT32, 0);
  CHECK(fx_t != NULL);
  for (int i = 0; i < 8; i++) fx_tensors[i] = fx_t;
  for (int i = 0; i < EM_MAX_DIMS * 2; i++) fx_i64[i] = 1;
  memset(&fx_sgd, 0, sizeof fx_sgd);
  memset(&fx_adam, 0, sizeof fx_adam);
}

/* The calls the issue that asked for these checks named: each must fail, not crash. */
static void test_reported(void) {
  CHECK_ERROR(em_numel(NULL), "numel: expected");
  CHECK(em_ones(2, NULL, EM_FLOAT32, 0) == NULL);
  CHECK(strncmp(em_last_error(), "ones: expected sizes, got NULL", 30) == 0);
  CHECK(em_zeros(2, NULL, EM_FLOAT32, 0) == NULL);
  CHECK(strncmp(em_last_error(), "zeros:", 6) == 0);
  CHECK(em_full(2, NULL, 1.0, EM_FLOAT32, 0) == NULL);
  CHECK(strncmp(em_last_error(), "full:", 5) == 0);
}

int main(void) {
  test_reported();
  make_fixtures();
  int cases = (int)(sizeof one_null_cases / sizeof one_null_cases[0]), bad = 0;
  for (int i = 0; i < cases; i++) {
    const one_null_case *c = &one_null_cases[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      em_clear_error();
      int rc = c->run() != 1 ? 1 : names_function(em_last_error(), c) ? 0 : 2;
      if (rc == 1) fprintf(stderr, "%s with %s NULL: did not return its failure value\n",
                           c->function, c->param);
      if (rc == 2)
        fprintf(stderr, "%s with %s NULL: expected a message naming it (\"%s: ...\"), got "
                "\"%s\"\n", c->function, c->param, c->name, em_last_error());
      fflush(NULL);
      _exit(rc);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
      fprintf(stderr, "%s: cannot run the case in a child process\n", c->function);
      bad++;
      continue;
    }
    if (WIFSIGNALED(status))
      fprintf(stderr, "%s with %s NULL: crashed (signal %d)\n", c->function, c->param,
              WTERMSIG(status));
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) bad++;
  }
  CHECK(bad == 0);
  printf("%d cases of one NULL argument among valid ones, %d failed\n", cases, bad);
  em_release(fx_t);
  return check_report();
}
