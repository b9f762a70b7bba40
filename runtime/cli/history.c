/*
 * history.c: the REPL's persistent history file, ~/.ember_history (or $EMBER_HISTORY).
 *
 * One entry per line, oldest first. A multi-line chunk stays one entry: its line breaks are
 * written as \n and its backslashes doubled, so that recalling it brings back the whole chunk.
 * Each entry is appended as soon as it is entered (one write with O_APPEND, so sessions running
 * side by side interleave whole entries and a crash loses nothing), then the file is cut back
 * to its last CLI_HISTORY_MAX entries through a temporary file and a rename.
 *
 * This file only does file I/O; lineedit.c hands the entries to readline.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

char *cli_history_path(void) {
  const char *env = getenv("EMBER_HISTORY");
  if (env != NULL) return env[0] ? strdup(env) : NULL;
  const char *home = getenv("HOME");
  if (home == NULL || home[0] == '\0') {
    struct passwd *pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : NULL;
  }
  if (home == NULL) return NULL;
  size_t n = strlen(home) + sizeof "/.ember_history";
  char *path = malloc(n);
  if (path != NULL) snprintf(path, n, "%s/.ember_history", home);
  return path;
}

/* "a\nb\\c" (a real line break, a backslash) -> "a\\nb\\\\c" (one line). malloc'd. */
static char *escape(const char *s) {
  size_t n = 0;
  for (const char *p = s; *p; p++) n += (*p == '\n' || *p == '\\') ? 2 : 1;
  char *out = malloc(n + 1), *o = out;
  if (out == NULL) return NULL;
  for (const char *p = s; *p; p++) {
    if (*p == '\n') { *o++ = '\\'; *o++ = 'n'; }
    else if (*p == '\\') { *o++ = '\\'; *o++ = '\\'; }
    else *o++ = *p;
  }
  *o = '\0';
  return out;
}

/* The inverse of escape, in place. Other backslash pairs are kept as they are, so a file that
 * was written by hand reads back unchanged. */
static void unescape(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    if (p[0] == '\\' && p[1] == 'n') { *o++ = '\n'; p++; }
    else if (p[0] == '\\' && p[1] == '\\') { *o++ = '\\'; p++; }
    else *o++ = *p;
  }
  *o = '\0';
}

/* The last `max` lines of a file, kept in a ring so that a huge file costs no more memory than
 * a trimmed one. */
typedef struct tail {
  char **lines;
  int max, start, count;
  long total; /* lines in the file */
} tail;

static void tail_free(tail *t) {
  for (int i = 0; i < t->count; i++) free(t->lines[(t->start + i) % t->max]);
  free(t->lines);
}

static const char *tail_get(const tail *t, int i) { return t->lines[(t->start + i) % t->max]; }

/* Reads the non-empty lines of path. Returns 0, or -1 if the file cannot be read. */
static int tail_read(const char *path, int max, tail *t) {
  memset(t, 0, sizeof *t);
  if (max <= 0) return -1;
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  t->lines = calloc((size_t)max, sizeof *t->lines);
  t->max = max;
  if (t->lines == NULL) {
    fclose(f);
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (len == 0) continue;
    char *copy = strdup(line);
    if (copy == NULL) break;
    t->total++;
    if (t->count < max) {
      t->lines[(t->start + t->count++) % max] = copy;
    } else {
      free(t->lines[t->start]);
      t->lines[t->start] = copy;
      t->start = (t->start + 1) % max;
    }
  }
  free(line);
  fclose(f);
  return 0;
}

void cli_history_load(const char *path, int max, void (*add)(const char *entry)) {
  tail t;
  if (path == NULL || tail_read(path, max, &t) != 0) return;
  for (int i = 0; i < t.count; i++) {
    char *entry = strdup(tail_get(&t, i));
    if (entry == NULL) break;
    unescape(entry);
    add(entry);
    free(entry);
  }
  tail_free(&t);
}

/* Rewrites path with only its last `max` entries, atomically (temporary file, then rename). */
static int trim(const char *path, int max) {
  tail t;
  if (tail_read(path, max, &t) != 0) return -1;
  int rc = 0;
  if (t.total > max) {
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    FILE *f = NULL;
    if (tmp != NULL) {
      snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
      int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      f = fd >= 0 ? fdopen(fd, "w") : NULL;
      if (f == NULL && fd >= 0) close(fd);
    }
    if (f != NULL) {
      for (int i = 0; i < t.count; i++) fprintf(f, "%s\n", tail_get(&t, i));
      rc = (fclose(f) == 0 && rename(tmp, path) == 0) ? 0 : -1;
      if (rc != 0) unlink(tmp);
    } else {
      rc = -1;
    }
    free(tmp);
  }
  tail_free(&t);
  return rc;
}

int cli_history_append(const char *path, const char *entry, int max) {
  if (path == NULL || entry == NULL || entry[0] == '\0') return 0;
  char *line = escape(entry);
  if (line == NULL) return -1;
  size_t len = strlen(line);
  line[len] = '\n'; /* the terminator's byte becomes the newline: one write, one whole line */
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  int rc = -1;
  if (fd >= 0) {
    ssize_t w;
    do w = write(fd, line, len + 1); while (w < 0 && errno == EINTR);
    rc = (w == (ssize_t)(len + 1)) ? 0 : -1;
    close(fd);
  }
  free(line);
  if (rc == 0) rc = trim(path, max);
  return rc;
}
