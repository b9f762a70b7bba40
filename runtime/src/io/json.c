/*
 * json.c: a small JSON parser and writer, enough for safetensors headers.
 *
 * The parser builds a tree (em_json) from RFC 8259 text: objects, arrays, strings with every
 * escape (\uXXXX surrogate pairs become UTF-8), numbers (integers kept exact as int64 when
 * they fit), true, false, null. It is written for hostile input: every read is bounds-checked,
 * nesting is limited, and a failure names the reason and the byte offset.
 */
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>

#include "io.h"

enum { JSON_MAX_DEPTH = 64 };

typedef struct parser {
  const char *fn, *what;
  const char *s;
  size_t len, pos;
  int failed;
} parser;

static int fail(parser *p, const char *reason) {
  if (!p->failed)
    em_error("%s: %s is not valid JSON: %s at byte %zu", p->fn, p->what, reason, p->pos);
  p->failed = 1;
  return -1;
}

static int oom(parser *p) {
  if (!p->failed) em_error_kind_set(EM_ERR_OOM, "%s: out of memory parsing %s", p->fn, p->what);
  p->failed = 1;
  return -1;
}

static void skip_ws(parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int expect_literal(parser *p, const char *lit) {
  size_t n = strlen(lit);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0)
    return fail(p, "unexpected character");
  p->pos += n;
  return 0;
}

static int hex4(parser *p, uint32_t *out) {
  if (p->len - p->pos < 4) return fail(p, "unfinished \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos + i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return fail(p, "bad hex digit in \\u escape");
    v = v * 16 + (uint32_t)d;
  }
  p->pos += 4;
  *out = v;
  return 0;
}

static size_t put_utf8(char *dst, uint32_t cp) {
  if (cp < 0x80) {
    dst[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    dst[0] = (char)(0xC0 | (cp >> 6));
    dst[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    dst[0] = (char)(0xE0 | (cp >> 12));
    dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  dst[0] = (char)(0xF0 | (cp >> 18));
  dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  dst[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Parses a string at p->pos (on the opening quote). The decoded text is never longer than
 * the escaped one, so one allocation of the raw length suffices. */
static int parse_string(parser *p, char **out, size_t *out_len) {
  p->pos++; /* the quote */
  size_t end = p->pos;
  while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->len) return fail(p, "unterminated string");
  char *buf = malloc(end - p->pos + 1);
  if (buf == NULL) return oom(p);
  size_t n = 0;
  while (p->s[p->pos] != '"') {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c < 0x20) {
      free(buf);
      return fail(p, "control character in string");
    }
    if (c != '\\') {
      buf[n++] = (char)c;
      p->pos++;
      continue;
    }
    char e = p->s[p->pos + 1];
    p->pos += 2;
    switch (e) {
      case '"': buf[n++] = '"'; break;
      case '\\': buf[n++] = '\\'; break;
      case '/': buf[n++] = '/'; break;
      case 'b': buf[n++] = '\b'; break;
      case 'f': buf[n++] = '\f'; break;
      case 'n': buf[n++] = '\n'; break;
      case 'r': buf[n++] = '\r'; break;
      case 't': buf[n++] = '\t'; break;
      case 'u': {
        uint32_t cp;
        if (hex4(p, &cp) != 0) break;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          fail(p, "lone low surrogate in \\u escape");
          break;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
            fail(p, "high surrogate without its low half");
            break;
          }
          p->pos += 2;
          if (hex4(p, &lo) != 0) break;
          if (lo < 0xDC00 || lo > 0xDFFF) {
            fail(p, "high surrogate without its low half");
            break;
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        n += put_utf8(buf + n, cp);
        break;
      }
      default:
        p->pos -= 1;
        fail(p, "unknown escape in string");
    }
    if (p->failed) {
      free(buf);
      return -1;
    }
  }
  p->pos++; /* the closing quote */
  buf[n] = '\0';
  *out = buf;
  *out_len = n;
  return 0;
}

/* JSON's decimal point is '.', whatever LC_NUMERIC the host program has set. */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }
static locale_t json_c_locale(void) {
  pthread_once(&c_locale_once, make_c_locale);
  return c_locale;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *p, em_json *v) {
  size_t start = p->pos;
  int negative = 0, is_int = 1;
  if (p->s[p->pos] == '-') {
    negative = 1;
    p->pos++;
  }
  if (p->pos >= p->len || !is_digit(p->s[p->pos])) return fail(p, "expected a digit");
  if (p->s[p->pos] == '0' && p->pos + 1 < p->len && is_digit(p->s[p->pos + 1]))
    return fail(p, "leading zero in number");
  /* Integer part, accumulated as a negative number so that INT64_MIN fits. */
  int64_t acc = 0;
  int overflow = 0;
  while (p->pos < p->len && is_digit(p->s[p->pos])) {
    int d = p->s[p->pos++] - '0';
    if (acc < (INT64_MIN + d) / 10) overflow = 1;
    else acc = acc * 10 - d;
  }
  if (p->pos < p->len && p->s[p->pos] == '.') {
    is_int = 0;
    p->pos++;
    if (p->pos >= p->len || !is_digit(p->s[p->pos])) return fail(p, "expected a digit after '.'");
    while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
  }
  if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
    is_int = 0;
    p->pos++;
    if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
    if (p->pos >= p->len || !is_digit(p->s[p->pos])) return fail(p, "expected an exponent");
    while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
  }
  /* strtod needs a terminated copy. A literal too long for the stack buffer is copied whole to
   * the heap: cutting it short would drop its exponent ("1.000...0e5" read as 1). */
  char tmp[64], *text = tmp;
  size_t n = p->pos - start;
  if (n >= sizeof tmp) {
    text = malloc(n + 1);
    if (text == NULL) return oom(p);
  }
  memcpy(text, p->s + start, n);
  text[n] = '\0';
  v->type = EM_JSON_NUMBER;
  locale_t loc = json_c_locale();
  v->number = loc != (locale_t)0 ? strtod_l(text, NULL, loc) : strtod(text, NULL);
  if (text != tmp) free(text);
  if (is_int && !overflow && (negative || acc != INT64_MIN)) {
    v->is_integer = 1;
    v->integer = negative ? acc : -acc;
  }
  return 0;
}

static int parse_value(parser *p, em_json *v, int depth);

static int grow(parser *p, em_json *v, int64_t *cap, int with_keys) {
  int64_t ncap = *cap ? *cap * 2 : 4;
  em_json *items = realloc(v->items, (size_t)ncap * sizeof *items);
  if (items == NULL) return oom(p);
  v->items = items;
  if (with_keys) {
    char **keys = realloc(v->keys, (size_t)ncap * sizeof *keys);
    if (keys == NULL) return oom(p);
    v->keys = keys;
    size_t *kl = realloc(v->key_lengths, (size_t)ncap * sizeof *kl);
    if (kl == NULL) return oom(p);
    v->key_lengths = kl;
  }
  *cap = ncap;
  return 0;
}

static int parse_array(parser *p, em_json *v, int depth) {
  v->type = EM_JSON_ARRAY;
  p->pos++;
  int64_t cap = 0;
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == ']') {
    p->pos++;
    return 0;
  }
  for (;;) {
    if (v->count == cap && grow(p, v, &cap, 0) != 0) return -1;
    memset(&v->items[v->count], 0, sizeof *v->items);
    v->count++;
    if (parse_value(p, &v->items[v->count - 1], depth + 1) != 0) return -1;
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unterminated array");
    char c = p->s[p->pos++];
    if (c == ']') return 0;
    if (c != ',') {
      p->pos--;
      return fail(p, "expected ',' or ']' in array");
    }
  }
}

static int parse_object(parser *p, em_json *v, int depth) {
  v->type = EM_JSON_OBJECT;
  p->pos++;
  int64_t cap = 0;
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == '}') {
    p->pos++;
    return 0;
  }
  for (;;) {
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a string key");
    if (v->count == cap && grow(p, v, &cap, 1) != 0) return -1;
    char *key;
    size_t klen;
    if (parse_string(p, &key, &klen) != 0) return -1;
    memset(&v->items[v->count], 0, sizeof *v->items);
    v->keys[v->count] = key;
    v->key_lengths[v->count] = klen;
    v->count++;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':') return fail(p, "expected ':' after key");
    p->pos++;
    if (parse_value(p, &v->items[v->count - 1], depth + 1) != 0) return -1;
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unterminated object");
    char c = p->s[p->pos++];
    if (c == '}') return 0;
    if (c != ',') {
      p->pos--;
      return fail(p, "expected ',' or '}' in object");
    }
  }
}

static int parse_value(parser *p, em_json *v, int depth) {
  if (depth > JSON_MAX_DEPTH) return fail(p, "nesting too deep");
  skip_ws(p);
  if (p->pos >= p->len) return fail(p, "unexpected end of text");
  char c = p->s[p->pos];
  switch (c) {
    case '{': return parse_object(p, v, depth);
    case '[': return parse_array(p, v, depth);
    case '"':
      v->type = EM_JSON_STRING;
      return parse_string(p, &v->string, &v->length);
    case 't':
      v->type = EM_JSON_BOOL;
      v->integer = 1;
      return expect_literal(p, "true");
    case 'f':
      v->type = EM_JSON_BOOL;
      return expect_literal(p, "false");
    case 'n':
      v->type = EM_JSON_NULL;
      return expect_literal(p, "null");
    default:
      if (c == '-' || is_digit(c)) return parse_number(p, v);
      return fail(p, "unexpected character");
  }
}

static void free_value(em_json *v) {
  free(v->string);
  for (int64_t i = 0; i < v->count; i++) {
    free_value(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->key_lengths);
}

em_json *em_json_parse(const char *fn, const char *what, const char *text, size_t len) {
  parser p = { fn, what, text, len, 0, 0 };
  em_json *root = calloc(1, sizeof *root);
  if (root == NULL) {
    oom(&p);
    return NULL;
  }
  if (parse_value(&p, root, 0) == 0) {
    skip_ws(&p);
    if (p.pos < p.len) fail(&p, "unexpected text after the value");
  }
  if (p.failed) {
    em_json_free(root);
    return NULL;
  }
  return root;
}

void em_json_free(em_json *v) {
  if (v == NULL) return;
  free_value(v);
  free(v);
}

const em_json *em_json_get(const em_json *obj, const char *key) {
  if (obj == NULL || obj->type != EM_JSON_OBJECT) return NULL;
  size_t n = strlen(key);
  for (int64_t i = 0; i < obj->count; i++)
    if (obj->key_lengths[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
  return NULL;
}

/* ---- writing ------------------------------------------------------------------------------- */

void em_buf_append(em_buf *b, const void *data, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL) {
      b->failed = 1;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void em_buf_puts(em_buf *b, const char *s) { em_buf_append(b, s, strlen(s)); }

void em_buf_printf(em_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) {
    b->failed = 1;
    return;
  }
  em_buf_append(b, tmp, (size_t)n);
}

void em_buf_json_string(em_buf *b, const char *s) {
  em_buf_append(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    switch (*c) {
      case '"': em_buf_append(b, "\\\"", 2); break;
      case '\\': em_buf_append(b, "\\\\", 2); break;
      case '\n': em_buf_append(b, "\\n", 2); break;
      case '\r': em_buf_append(b, "\\r", 2); break;
      case '\t': em_buf_append(b, "\\t", 2); break;
      default:
        if (*c < 0x20) em_buf_printf(b, "\\u%04x", *c);
        else em_buf_append(b, c, 1);
    }
  }
  em_buf_append(b, "\"", 1);
}

void em_buf_free(em_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
