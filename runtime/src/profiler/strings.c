/*
 * strings.c: the profiler's interned strings (event names, shape lists, call sites).
 *
 * Events hold pointers, so a profile of a million ops keeps each distinct name once. The
 * table only grows, and its strings live until the process ends: a row read back stays valid
 * across later profiles, and a program profiles a bounded set of names and shapes.
 */
#include <stdlib.h>

#include "recorder.h"

static const char **slots;
static size_t nslots, used;

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int grow(void) {
  size_t n = nslots ? 2 * nslots : 1024;
  const char **fresh = calloc(n, sizeof *fresh);
  if (fresh == NULL) return -1;
  for (size_t i = 0; i < nslots; i++) {
    if (slots[i] == NULL) continue;
    size_t j = hash(slots[i]) & (n - 1);
    while (fresh[j] != NULL) j = (j + 1) & (n - 1);
    fresh[j] = slots[i];
  }
  free(slots);
  slots = fresh;
  nslots = n;
  return 0;
}

const char *em_prof_intern(const char *s) {
  em_prof_lock();
  const char *r = NULL;
  if (2 * (used + 1) > nslots && grow() != 0) goto done;
  size_t j = hash(s) & (nslots - 1);
  while (slots[j] != NULL && strcmp(slots[j], s) != 0) j = (j + 1) & (nslots - 1);
  if (slots[j] == NULL) {
    size_t len = strlen(s) + 1;
    char *copy = malloc(len);
    if (copy == NULL) goto done;
    memcpy(copy, s, len);
    slots[j] = copy;
    used++;
  }
  r = slots[j];
done:
  em_prof_unlock();
  return r;
}
