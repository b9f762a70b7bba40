/*
 * csv.c: numeric CSV (and TSV, or blank-separated) files into a 2-D tensor.
 *
 * The file (plain or .gz) is read whole, split into lines, and the lines are parsed on several
 * threads straight into the result. Rules:
 *  - every non-blank line is a row; blank lines are skipped; CRLF and a UTF-8 BOM are accepted;
 *  - skip_header drops the first non-blank line (its field count still sets the column count);
 *  - fields may be padded with blanks and may be double-quoted; a quoted field cannot hold a
 *    line break;
 *  - with ' ' as the delimiter, any run of blanks (spaces, tabs) separates fields;
 *  - floats parse with the C locale whatever the process locale is (strtod_l), so "1.5" is
 *    always one and a half; "nan", "inf" and hex floats are accepted as strtod accepts them;
 *  - integer dtypes take integer fields only, range-checked for the dtype.
 * Errors give the 1-based line and column: "csv: data.csv line 3, column 2: expected a number,
 * got 'abc'".
 */
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>

#include "io.h"

typedef struct csv_ctx {
  const char *path;
  char delim;
  em_dtype dtype;
  int64_t ncols;
  const char *const *starts;   /* row r's text is starts[r] .. ends[r] (no line break) */
  const char *const *ends;
  const int64_t *lines;        /* row r's 1-based line number */
  char *out;
} csv_ctx;

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Walks the fields of one line. */
typedef struct field_iter {
  const char *p, *end;
  char delim;
  int done;
} field_iter;

static void trim(const char **fs, const char **fe) {
  while (*fs < *fe && is_blank(**fs)) (*fs)++;
  while (*fe > *fs && is_blank((*fe)[-1])) (*fe)--;
}

/* Sets the next field's bounds (blanks trimmed, quotes removed); 0 when the line has no more.
 * With a delimiter other than ' ', "a,,b" has an empty middle field and "a," an empty last. */
static int next_field(field_iter *it, const char **fs, const char **fe) {
  if (it->done) return 0;
  const char *s = it->p, *end = it->end;
  char delim = it->delim;
  int by_blanks = delim == ' ';
  if (by_blanks) {
    while (s < end && is_blank(*s)) s++;
    if (s == end) {
      it->done = 1;
      return 0;
    }
  } else {
    while (s < end && is_blank(*s) && *s != delim) s++;
  }
  const char *e = s;
  if (s < end && *s == '"') {
    e = s + 1;
    while (e < end && !(*e == '"' && (e + 1 >= end || e[1] != '"'))) e += *e == '"' ? 2 : 1;
    if (e > end) e = end;
    *fs = s + 1;
    *fe = e;
    trim(fs, fe);
    const char *after = e < end ? e + 1 : end;
    while (after < end && is_blank(*after) && !(by_blanks || *after == delim)) after++;
    if (after < end && !(by_blanks ? is_blank(*after) : *after == delim)) {
      /* Text after the closing quote: the whole thing is the field, and fails to parse. */
      while (after < end && !(by_blanks ? is_blank(*after) : *after == delim)) after++;
      *fs = s;
      *fe = after;
    }
    e = after;
  } else {
    while (e < end && !(by_blanks ? is_blank(*e) : *e == delim)) e++;
    *fs = s;
    *fe = e;
    trim(fs, fe);
  }
  if (!by_blanks && e < end) it->p = e + 1;
  else if (!by_blanks) it->done = 1;
  else it->p = e;
  return 1;
}

static int64_t count_fields(const char *s, const char *end, char delim) {
  field_iter it = { s, end, delim, 0 };
  const char *fs, *fe;
  int64_t n = 0;
  while (next_field(&it, &fs, &fe)) n++;
  return n;
}

static int field_error(const csv_ctx *c, int64_t row, int64_t col, const char *what,
                       const char *fs, const char *fe) {
  int n = (int)(fe - fs > 40 ? 40 : fe - fs);
  return em_error("csv: %s line %lld, column %lld: %s, got '%.*s'%s", c->path,
                  (long long)c->lines[row], (long long)col + 1, what, n, fs,
                  fe - fs > 40 ? "..." : "");
}

static int store_field(const csv_ctx *c, int64_t row, int64_t col, const char *fs, const char *fe,
                       int report) {
  char *dst = c->out + (row * c->ncols + col) * (int64_t)em_dtypes[c->dtype].size;
  if (fs == fe) {
    if (report) em_error("csv: %s line %lld, column %lld: empty field", c->path,
                         (long long)c->lines[row], (long long)col + 1);
    return -1;
  }
  char *stop;
  /* strtod and strtoll skip leading white space themselves, line breaks included. */
  if (fs[0] == '\r' || fs[0] == '\v' || fs[0] == '\f')
    return report ? field_error(c, row, col, "expected a number", fs, fe) : -1;
  if (em_dtypes[c->dtype].is_float) {
    double v = strtod_l(fs, &stop, c_locale);
    if (stop != fe) return report ? field_error(c, row, col, "expected a number", fs, fe) : -1;
    if (c->dtype == EM_FLOAT32) *(float *)dst = (float)v;
    else if (c->dtype == EM_FLOAT64) *(double *)dst = v;
    else em_store_from_double(dst, c->dtype, v);
    return 0;
  }
  errno = 0;
  long long v = strtoll(fs, &stop, 10);
  if (stop != fe)
    return report ? field_error(c, row, col, "expected an integer", fs, fe) : -1;
  int64_t lo = c->dtype == EM_INT64 ? INT64_MIN : c->dtype == EM_INT32 ? INT32_MIN
               : c->dtype == EM_INT16 ? INT16_MIN : c->dtype == EM_INT8 ? INT8_MIN : 0;
  int64_t hi = c->dtype == EM_INT64 ? INT64_MAX : c->dtype == EM_INT32 ? INT32_MAX
               : c->dtype == EM_INT16 ? INT16_MAX : c->dtype == EM_INT8 ? INT8_MAX : UINT8_MAX;
  if (errno == ERANGE || v < lo || v > hi) {
    if (!report) return -1;
    char what[64];
    snprintf(what, sizeof what, "integer out of range for %s", em_dtype_name(c->dtype));
    return field_error(c, row, col, what, fs, fe);
  }
  switch (c->dtype) {
    case EM_INT64: *(int64_t *)dst = v; break;
    case EM_INT32: *(int32_t *)dst = (int32_t)v; break;
    case EM_INT16: *(int16_t *)dst = (int16_t)v; break;
    case EM_INT8: *(int8_t *)dst = (int8_t)v; break;
    default: *(uint8_t *)dst = (uint8_t)v; break;
  }
  return 0;
}

/* Parses one row into the result; with report set, failures set the error message. */
static int parse_row(const csv_ctx *c, int64_t row, int report) {
  field_iter it = { c->starts[row], c->ends[row], c->delim, 0 };
  const char *fs, *fe;
  int64_t col = 0;
  while (next_field(&it, &fs, &fe)) {
    if (col < c->ncols && store_field(c, row, col, fs, fe, report) != 0) return -1;
    col++;
  }
  if (col != c->ncols) {
    if (report)
      em_error("csv: %s line %lld has %lld fields, expected %lld", c->path,
               (long long)c->lines[row], (long long)col, (long long)c->ncols);
    return -1;
  }
  return 0;
}

/* Splits text into non-blank lines (pointers into text). */
static int split_lines(const char *path, char *text, int64_t len, const char ***starts,
                       const char ***ends, int64_t **lines, int64_t *count) {
  int64_t cap = 1024, n = 0, line = 0;
  const char **s = malloc((size_t)cap * sizeof *s), **e = malloc((size_t)cap * sizeof *e);
  int64_t *ln = malloc((size_t)cap * sizeof *ln);
  char *p = text, *stop = text + len;
  while (s && e && ln && p < stop) {
    char *nl = memchr(p, '\n', (size_t)(stop - p));
    char *le = nl ? nl : stop;
    line++;
    char *te = le;
    if (te > p && te[-1] == '\r') te--;
    const char *q = p;
    while (q < te && (is_blank(*q) || *q == '\r')) q++;
    if (q < te) {
      if (n == cap) {
        cap *= 2;
        const char **s2 = realloc(s, (size_t)cap * sizeof *s);
        if (s2) s = s2;
        const char **e2 = realloc(e, (size_t)cap * sizeof *e);
        if (e2) e = e2;
        int64_t *l2 = realloc(ln, (size_t)cap * sizeof *ln);
        if (l2) ln = l2;
        if (!s2 || !e2 || !l2) break;
      }
      s[n] = p;
      e[n] = te;
      ln[n] = line;
      n++;
    }
    p = le + 1;
  }
  if (s == NULL || e == NULL || ln == NULL || p < stop) {
    free(s);
    free(e);
    free(ln);
    return em_error_kind_set(EM_ERR_OOM, "csv: out of memory splitting %s into lines", path);
  }
  *starts = s;
  *ends = e;
  *lines = ln;
  *count = n;
  return 0;
}

static int check_delimiter(char d) {
  if (d == '\0' || d == '\n' || d == '\r' || d == '"' || d == '.' || d == '+' || d == '-' ||
      (d >= '0' && d <= '9') || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z'))
    return em_error("csv: delimiter '%c' (code %d) cannot separate numbers; use ',', ';', "
                    "'\\t', ' ' or another symbol", d ? d : '?', d);
  return 0;
}

/* Checks one row's shape without storing it: every field present and not empty. With a
 * report, the failure sets the same message parse_row would. */
static int validate_row(const csv_ctx *c, int64_t row) {
  field_iter it = { c->starts[row], c->ends[row], c->delim, 0 };
  const char *fs, *fe;
  int64_t col = 0;
  while (next_field(&it, &fs, &fe)) {
    if (fs == fe && col < c->ncols)
      return em_error("csv: %s line %lld, column %lld: empty field", c->path,
                      (long long)c->lines[row], (long long)col + 1);
    col++;
  }
  if (col != c->ncols)
    return em_error("csv: %s line %lld has %lld fields, expected %lld", c->path,
                    (long long)c->lines[row], (long long)col, (long long)c->ncols);
  return 0;
}

/* The result is allocated only when the text can hold it: a row of ncols non-empty fields
 * takes at least 2 * ncols - 1 characters (a digit each, a separator between), so a valid file
 * never declares more elements than about half its characters. A first line of a million
 * fields over a few short lines (a 480-byte .gz made this ask for 4 GB) fails that test, and
 * then the rows are checked one by one, before any allocation, for the line at fault. */
static int check_size(csv_ctx *c, int64_t nrows, int64_t ncols) {
  int64_t chars = 0;
  for (int64_t r = 0; r < nrows; r++) chars += c->ends[r] - c->starts[r];
  if (ncols == 0 || nrows <= chars / (2 * ncols - 1)) return 0;
  for (int64_t r = 0; r < nrows; r++)
    if (validate_row(c, r) != 0) return -1;
  return 0;
}

static em_tensor *parse_all(csv_ctx *c, int64_t first_row, int64_t nrows, int64_t ncols) {
  int64_t sizes[2] = { nrows, ncols };
  c->ncols = ncols;
  c->starts += first_row;
  c->ends += first_row;
  c->lines += first_row;
  if (check_size(c, nrows, ncols) != 0) return NULL;
  em_tensor *t = em_empty(2, sizes, c->dtype, EM_CPU);
  if (t == NULL) return NULL;
  c->out = em_data_ptr(t);
  /* Rows parse independently; a failing row is reported after the loop, the earliest one,
   * so the message is the same on any number of threads. */
  int64_t bad = nrows;
  int nt = em_threads_for(nrows * ncols * 8);
#pragma omp parallel for num_threads(nt) schedule(static) reduction(min : bad)
  for (int64_t r = 0; r < nrows; r++)
    if (r < bad && parse_row(c, r, 0) != 0) bad = r;
  if (bad < nrows) {
    parse_row(c, bad, 1);
    em_release(t);
    return NULL;
  }
  return t;
}

em_tensor *em_read_csv(const char *path, char delimiter, int skip_header, em_dtype dtype) {
  if (em_check_dtype("csv", dtype) != 0 || check_delimiter(delimiter) != 0) return NULL;
  if (dtype == EM_BOOL) return em_error_null("csv: expected a numeric dtype, got bool");
  pthread_once(&c_locale_once, make_c_locale);
  if (c_locale == (locale_t)0) return em_error_null("csv: cannot create the C locale");
  em_reader r;
  if (em_reader_open(&r, "csv", path) != 0) return NULL;
  int64_t len;
  char *text = em_reader_slurp(&r, &len);
  em_reader_close(&r);
  if (text == NULL) return NULL;
  char *body = text;
  if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0) body += 3, len -= 3;
  const char **starts = NULL, **ends = NULL;
  int64_t *lines = NULL, n = 0;
  em_tensor *t = NULL;
  if (split_lines(path, body, len, &starts, &ends, &lines, &n) == 0) {
    int64_t first = skip_header && n > 0 ? 1 : 0;
    int64_t ncols = n > 0 ? count_fields(starts[0], ends[0], delimiter) : 0;
    csv_ctx c = { path, delimiter, dtype, ncols, starts, ends, lines, NULL };
    t = parse_all(&c, first, n - first, ncols);
    if (t == NULL && !skip_header && n > 0 && strstr(em_last_error(), "line 1,") != NULL) {
      char msg[900];
      snprintf(msg, sizeof msg, "%s", em_last_error());
      em_error("%s (a header line? skip it with header=true, or skip_header in C)", msg);
    }
  }
  free(starts);
  free(ends);
  free(lines);
  free(text);
  return t;
}
