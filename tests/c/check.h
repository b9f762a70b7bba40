/*
 * check.h: a tiny test harness for the C tests. Each CHECK counts; the program ends with the
 * line "N passed, N failed" and exits non-zero on any failure.
 */
#ifndef EMBER_TEST_CHECK_H
#define EMBER_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ember.h"

static int check_passed, check_failed;

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (cond) {                                                                               \
      check_passed++;                                                                         \
    } else {                                                                                  \
      check_failed++;                                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__,       \
              #cond, em_last_error());                                                        \
    }                                                                                         \
  } while (0)

#define CHECK_ERROR(expr, text)                                                               \
  do {                                                                                        \
    em_clear_error();                                                                         \
    int failed_ = (expr) != 0 ? 1 : 0;                                                        \
    (void)failed_;                                                                            \
    CHECK(strstr(em_last_error(), (text)) != NULL);                                           \
  } while (0)

static inline int check_close(double a, double b, double tol) {
  return fabs(a - b) <= tol * (1 + fabs(b));
}

static inline int check_report(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
