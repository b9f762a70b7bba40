/*
 * error.c: errors as values. A failing function stores a message in a thread-local buffer and
 * returns NULL or -1; the Lua layer raises it with error(), a C caller reads em_last_error().
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

enum { EM_ERROR_CAP = 1024 };

static _Thread_local char error_message[EM_ERROR_CAP];
static _Thread_local em_error_kind error_kind;

static void set_message(em_error_kind kind, const char *fmt, va_list ap) {
  vsnprintf(error_message, sizeof error_message, fmt, ap);
  error_kind = kind;
}

int em_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(EM_ERR_VALUE, fmt, ap);
  va_end(ap);
  return -1;
}

int em_error_kind_set(em_error_kind kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(kind, fmt, ap);
  va_end(ap);
  return -1;
}

void *em_error_null(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(EM_ERR_VALUE, fmt, ap);
  va_end(ap);
  return NULL;
}

void em_error_prefix(const char *fn) {
  size_t n = strlen(fn);
  if (strncmp(error_message, fn, n) == 0 && error_message[n] == ':') return;
  char copy[EM_ERROR_CAP];
  memcpy(copy, error_message, sizeof copy);
  size_t used = (size_t)snprintf(error_message, sizeof error_message, "%s: ", fn);
  if (used < sizeof error_message)
    memcpy(error_message + used, copy, strnlen(copy, sizeof error_message - used - 1) + 1);
  error_message[sizeof error_message - 1] = '\0';
}

void em_null_arg(const char *func, const char *arg) {
  if (strncmp(func, "em_", 3) == 0) func += 3;
  em_error("%s: expected %s, got NULL", func, arg);
}

const char *em_last_error(void) { return error_message; }
em_error_kind em_last_error_kind(void) { return error_kind; }

void em_set_error(const char *message) {
  snprintf(error_message, sizeof error_message, "%s", message ? message : "unknown error");
  error_kind = EM_ERR_VALUE;
}

void em_clear_error(void) {
  error_message[0] = '\0';
  error_kind = EM_OK;
}

const char *em_shape_str(char *buf, size_t cap, int ndim, const int64_t *sizes) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld", (long long)sizes[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
  return buf;
}
