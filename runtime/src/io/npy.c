/*
 * npy.c: NumPy's .npy files, read (versions 1.0, 2.0, 3.0) and written (1.0, or 2.0 when the
 * header needs it).
 *
 * A file is: "\x93NUMPY", a major and a minor version byte, the header length (2 bytes
 * little-endian in 1.0, 4 bytes in 2.0 and 3.0), then a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded so that the data starts at a multiple of 64, then the raw elements.
 *
 * Supported dtypes: f2 f4 f8, i1 i2 i4 i8, u1, b1, in either byte order ('<', '>', '|', '=').
 * Big-endian data is swapped on reading. Fortran-ordered arrays are read in their own order
 * and made row-major by a transposed copy. Anything else (structured dtypes, unsigned types
 * wider than a byte, complex, strings, objects) is a clear error.
 */
#include <stdlib.h>

#include "io.h"

/* A header longer than this is not something np.save writes; refuse it before allocating. */
enum { NPY_HEADER_LIMIT = 1 << 24 };

typedef struct npy_header {
  char descr[32];
  int have_descr, have_fortran, have_shape;
  int fortran;
  int ndim;
  int64_t sizes[EM_MAX_DIMS];
} npy_header;

/* ---- the header's Python literal ----------------------------------------------------------- */

typedef struct lit {
  const char *path;
  const char *s;
  size_t pos, len;
} lit;

static int lit_error(lit *l, const char *what) {
  return em_error("npy: file %s has a malformed header: %s at character %zu", l->path, what,
                  l->pos);
}

static void lit_ws(lit *l) {
  while (l->pos < l->len && (l->s[l->pos] == ' ' || l->s[l->pos] == '\t' ||
                             l->s[l->pos] == '\n' || l->s[l->pos] == '\r'))
    l->pos++;
}

static int lit_char(lit *l, char c) {
  lit_ws(l);
  if (l->pos < l->len && l->s[l->pos] == c) {
    l->pos++;
    return 1;
  }
  return 0;
}

/* A quoted string ('...' or "...") into out (truncated to cap - 1; keys and descrs are short). */
static int lit_string(lit *l, char *out, size_t cap) {
  lit_ws(l);
  if (l->pos >= l->len || (l->s[l->pos] != '\'' && l->s[l->pos] != '"'))
    return lit_error(l, "expected a quoted string");
  char q = l->s[l->pos++];
  size_t n = 0;
  while (l->pos < l->len && l->s[l->pos] != q) {
    if (n + 1 < cap) out[n++] = l->s[l->pos];
    l->pos++;
  }
  if (l->pos >= l->len) return lit_error(l, "unterminated string");
  l->pos++;
  out[n] = '\0';
  return 0;
}

static int lit_word(lit *l, const char *w) {
  size_t n = strlen(w);
  lit_ws(l);
  if (l->len - l->pos >= n && memcmp(l->s + l->pos, w, n) == 0) {
    l->pos += n;
    return 1;
  }
  return 0;
}

/* A shape tuple: (), (5,), (2, 3), with Python 2's optional L suffix. */
static int lit_shape(lit *l, npy_header *h) {
  if (!lit_char(l, '(')) return lit_error(l, "expected a shape tuple");
  h->ndim = 0;
  for (;;) {
    if (lit_char(l, ')')) return 0;
    lit_ws(l);
    if (l->pos >= l->len || l->s[l->pos] < '0' || l->s[l->pos] > '9')
      return lit_error(l, "expected a non-negative integer in the shape");
    int64_t v = 0;
    while (l->pos < l->len && l->s[l->pos] >= '0' && l->s[l->pos] <= '9') {
      int d = l->s[l->pos++] - '0';
      if (v > (INT64_MAX - d) / 10) return lit_error(l, "shape entry too large");
      v = v * 10 + d;
    }
    if (l->pos < l->len && l->s[l->pos] == 'L') l->pos++;
    if (h->ndim == EM_MAX_DIMS)
      return em_error("npy: file %s has more than %d dimensions", l->path, EM_MAX_DIMS);
    h->sizes[h->ndim++] = v;
    if (lit_char(l, ')')) return 0;
    if (!lit_char(l, ',')) return lit_error(l, "expected ',' or ')' in the shape");
  }
}

static int parse_header(const char *path, const char *text, size_t len, npy_header *h) {
  lit l = { path, text, 0, len };
  memset(h, 0, sizeof *h);
  if (!lit_char(&l, '{')) return lit_error(&l, "expected '{'");
  for (;;) {
    if (lit_char(&l, '}')) break;
    char key[32];
    if (lit_string(&l, key, sizeof key) != 0) return -1;
    if (!lit_char(&l, ':')) return lit_error(&l, "expected ':'");
    if (strcmp(key, "descr") == 0) {
      lit_ws(&l);
      if (l.pos < l.len && l.s[l.pos] == '[')
        return em_error("npy: file %s holds a structured array (descr is a list of fields); "
                        "only plain numeric arrays are supported", path);
      if (lit_string(&l, h->descr, sizeof h->descr) != 0) return -1;
      h->have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (lit_word(&l, "True")) h->fortran = 1;
      else if (!lit_word(&l, "False")) return lit_error(&l, "expected True or False");
      h->have_fortran = 1;
    } else if (strcmp(key, "shape") == 0) {
      if (lit_shape(&l, h) != 0) return -1;
      h->have_shape = 1;
    } else {
      return lit_error(&l, "unexpected key");
    }
    if (lit_char(&l, '}')) break;
    if (!lit_char(&l, ',')) return lit_error(&l, "expected ',' or '}'");
  }
  if (!h->have_descr || !h->have_fortran || !h->have_shape)
    return em_error("npy: file %s has a header without '%s'", path,
                    !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order" : "shape");
  return 0;
}

/* descr such as '<f4' -> dtype and whether the data is big-endian. */
static int parse_descr(const char *path, const char *d, em_dtype *dtype, int *big) {
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return em_error("npy: file %s has dtype '%s', which has no byte order mark", path, d);
  *big = order == '>' || (order == '=' && !em_host_is_little_endian());
  const char *k = d + 1;
  static const struct { const char *code; em_dtype dtype; } table[] = {
    { "f2", EM_FLOAT16 }, { "f4", EM_FLOAT32 }, { "f8", EM_FLOAT64 }, { "i1", EM_INT8 },
    { "i2", EM_INT16 }, { "i4", EM_INT32 }, { "i8", EM_INT64 }, { "u1", EM_UINT8 },
    { "b1", EM_BOOL },
  };
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (strcmp(k, table[i].code) == 0) {
      *dtype = table[i].dtype;
      return 0;
    }
  if (strcmp(k, "u2") == 0 || strcmp(k, "u4") == 0 || strcmp(k, "u8") == 0)
    return em_error("npy: file %s has dtype '%s' (uint%d), which Ember does not have; convert "
                    "it in NumPy first (e.g. a.astype(np.int64))", path, d, 8 * atoi(k + 1));
  return em_error("npy: file %s has dtype '%s', which Ember does not support (supported: f2 f4 "
                  "f8 i1 i2 i4 i8 u1 b1)", path, d);
}

/* ---- reading ------------------------------------------------------------------------------- */

static em_tensor *read_data(em_reader *r, const npy_header *h, em_dtype dtype, int big) {
  const char *path = r->path;
  int64_t numel, esize = (int64_t)em_dtypes[dtype].size;
  char sb[EM_SHAPE_BUF];
  int64_t limit = em_reader_max_bytes(r) - r->consumed;
  if (em_checked_numel(h->ndim, h->sizes, INT64_MAX / 8, &numel) == 0 &&
      em_reader_check_need(r, numel * esize) != 0)
    return NULL;
  if (em_checked_numel(h->ndim, h->sizes, INT64_MAX / 8, &numel) != 0 || numel * esize > limit) {
    if (em_checked_numel(h->ndim, h->sizes, INT64_MAX / 8, &numel) == 0 && !r->compressed)
      return em_error_null("npy: file %s is truncated: expected %lld bytes of data, got %lld",
                           path, (long long)(r->consumed + numel * esize),
                           (long long)r->file_size);
    return em_error_null("npy: file %s declares shape %s of %s, more data than a file of %lld "
                         "bytes can hold", path, em_shape_str(sb, sizeof sb, h->ndim, h->sizes),
                         em_dtype_name(dtype), (long long)r->file_size);
  }
  /* a zero-size shape passes the byte count, but its strides may still overflow */
  if (em_check_file_shape("npy", path, h->ndim, h->sizes) != 0) return NULL;
  /* A Fortran-ordered array is row-major with its dimensions reversed. */
  int64_t sizes[EM_MAX_DIMS];
  for (int i = 0; i < h->ndim; i++) sizes[i] = h->fortran ? h->sizes[h->ndim - 1 - i] : h->sizes[i];
  em_tensor *t = em_empty(h->ndim, sizes, dtype, EM_CPU);
  if (t == NULL) return NULL;
  unsigned char *data = em_data_ptr(t);
  if (em_reader_read_exact(r, data, numel * esize) != 0) goto fail;
  int end = em_reader_at_end(r);
  if (end < 0) goto fail;
  if (end == 0) {
    em_error("npy: file %s has more data than its shape %s declares (%lld bytes expected)", path,
             em_shape_str(sb, sizeof sb, h->ndim, h->sizes), (long long)r->consumed);
    goto fail;
  }
  if (big == em_host_is_little_endian()) em_swap_bytes(data, numel, (size_t)esize);
  if (dtype == EM_BOOL) /* NumPy writes 0 and 1; anything else would break bool kernels */
    for (int64_t i = 0; i < numel; i++) data[i] = data[i] != 0;
  if (h->fortran && h->ndim > 1) {
    int perm[EM_MAX_DIMS];
    for (int i = 0; i < h->ndim; i++) perm[i] = h->ndim - 1 - i;
    em_tensor *view = em_permute(t, h->ndim, perm);
    em_tensor *c = view ? em_clone(view) : NULL;
    em_release(view);
    em_release(t);
    return c;
  }
  return t;
fail:
  em_release(t);
  return NULL;
}

em_tensor *em_read_npy(const char *path) {
  em_reader r;
  if (em_reader_open(&r, "npy", path) != 0) return NULL;
  em_tensor *t = NULL;
  char *text = NULL;
  unsigned char pre[12];
  int64_t got = em_reader_read(&r, pre, 10);
  if (got < 0) goto done;
  if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    em_error("npy: file %s is not an NPY file: it does not start with \\x93NUMPY", path);
    goto done;
  }
  int major = pre[6], minor = pre[7];
  int64_t hlen;
  if (major == 1) {
    hlen = pre[8] | (pre[9] << 8);
  } else if (major == 2 || major == 3) {
    if (em_reader_read_exact(&r, pre + 10, 2) != 0) goto done;
    hlen = (int64_t)pre[8] | ((int64_t)pre[9] << 8) | ((int64_t)pre[10] << 16) |
           ((int64_t)pre[11] << 24);
  } else {
    em_error("npy: file %s has format version %d.%d; supported: 1.0, 2.0, 3.0", path, major,
             minor);
    goto done;
  }
  if (hlen > NPY_HEADER_LIMIT) {
    em_error("npy: file %s declares a header of %lld bytes; the limit is %d", path,
             (long long)hlen, NPY_HEADER_LIMIT);
    goto done;
  }
  /* The header is read whole, so its declared length is checked against what the file can
   * hold before it is allocated: a 12-byte file must not allocate megabytes. */
  if (em_reader_check_need(&r, hlen) != 0) goto done;
  if (hlen > em_reader_max_bytes(&r) - r.consumed) {
    if (r.compressed)
      em_error("npy: file %s declares a header of %lld bytes, more than a compressed file of "
               "%lld bytes can hold", path, (long long)hlen, (long long)r.file_size);
    else
      em_error("npy: file %s is truncated: expected %lld bytes of data, got %lld", path,
               (long long)(r.consumed + hlen), (long long)r.file_size);
    goto done;
  }
  text = malloc((size_t)hlen + 1);
  if (text == NULL) {
    em_error_kind_set(EM_ERR_OOM, "npy: out of memory reading %s", path);
    goto done;
  }
  if (em_reader_read_exact(&r, text, hlen) != 0) goto done;
  text[hlen] = '\0';
  npy_header h;
  em_dtype dtype = EM_FLOAT32;
  int big = 0;
  if (parse_header(path, text, (size_t)hlen, &h) != 0) goto done;
  if (parse_descr(path, h.descr, &dtype, &big) != 0) goto done;
  t = read_data(&r, &h, dtype, big);
done:
  free(text);
  em_reader_close(&r);
  return t;
}

/* ---- writing ------------------------------------------------------------------------------- */

static const char *npy_code(em_dtype d) {
  switch (d) {
    case EM_FLOAT16: return "f2";
    case EM_FLOAT32: return "f4";
    case EM_FLOAT64: return "f8";
    case EM_INT8: return "i1";
    case EM_INT16: return "i2";
    case EM_INT32: return "i4";
    case EM_INT64: return "i8";
    case EM_UINT8: return "u1";
    case EM_BOOL: return "b1";
    default: return NULL;
  }
}

int em_write_npy(const char *path, const em_tensor *t) {
  if (t == NULL) return em_error("write_npy: expected a tensor, got NULL");
  const char *code = npy_code((em_dtype)t->dtype_id);
  if (code == NULL)
    return em_error("write_npy: %s has no NumPy dtype; convert it first (e.g. x:float())",
                    em_dtype_name((em_dtype)t->dtype_id));
  size_t esize = em_dtypes[t->dtype_id].size;
  char order = esize == 1 ? '|' : em_host_is_little_endian() ? '<' : '>';
  em_buf b = { 0 };
  em_buf_printf(&b, "{'descr': '%c%s', 'fortran_order': False, 'shape': (", order, code);
  for (int i = 0; i < t->ndim; i++) em_buf_printf(&b, "%lld, ", (long long)t->sizes[i]);
  /* Trim the last ", " to give (2, 3) but (5,); only when the buffer holds what was appended
   * (after a failed allocation it may hold nothing at all, or less than that). */
  if (!b.failed && t->ndim > 1) b.len -= 2, b.data[b.len] = '\0';
  else if (!b.failed && t->ndim == 1) b.len -= 1, b.data[b.len] = '\0';
  em_buf_puts(&b, "), }");
  /* Pad with spaces and a final newline so that the data starts at a multiple of 64 (a failed
   * buffer grows no more: the loop must not wait for it). */
  int v2 = b.len + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  while (!b.failed && (prefix + b.len + 1) % 64 != 0) em_buf_puts(&b, " ");
  em_buf_puts(&b, "\n");
  if (b.failed) {
    em_buf_free(&b);
    return em_error_kind_set(EM_ERR_OOM, "write_npy: out of memory");
  }
  unsigned char pre[12] = { 0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)(v2 ? 2 : 1), 0 };
  for (size_t i = 0; i < (v2 ? 4u : 2u); i++) pre[8 + i] = (unsigned char)(b.len >> (8 * i));

  em_tensor *c = t->device_id == EM_CPU ? em_contiguous(t) : em_to_device(t, EM_CPU);
  if (c == NULL) {
    em_buf_free(&b);
    em_error_prefix("write_npy");
    return -1;
  }
  em_atomic_file a;
  int rc = em_atomic_open(&a, "write_npy", path);
  if (rc == 0) {
    rc = em_atomic_write(&a, pre, prefix);
    if (rc == 0) rc = em_atomic_write(&a, b.data, b.len);
    if (rc == 0) rc = em_atomic_write(&a, em_data_ptr(c), (size_t)em_numel(c) * esize);
    if (rc == 0) rc = em_atomic_commit(&a);
    else em_atomic_abort(&a);
  }
  em_release(c);
  em_buf_free(&b);
  return rc;
}
