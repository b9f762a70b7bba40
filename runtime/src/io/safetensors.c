/*
 * safetensors.c: checkpoints in the safetensors format (https://github.com/huggingface/safetensors).
 *
 * A file is: an 8-byte little-endian header length N; N bytes of JSON
 *   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [2, 3],
 *    "data_offsets": [begin, end]}, ...}
 * padded with spaces; then the tensors' raw little-endian bytes, offsets counted from the end
 * of the header. PyTorch's and Hugging Face's `safetensors` read what this writes and the other
 * way round.
 *
 * Reading validates the whole header when the file is opened, as the reference implementation
 * does: every tensor's byte range must match its shape and dtype, and the ranges must tile the
 * data section exactly. A truncated or corrupt file is therefore an error at open, with the
 * counts, before any tensor is read. Tensors are read on demand (em_safetensors_tensor), so a
 * caller can take a few tensors from a large file.
 *
 * Writing goes through atomic.c: the previous checkpoint survives any failure mid-save.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"

/* The reference implementation's limit; it keeps a corrupt length from allocating gigabytes. */
#define HEADER_LIMIT 100000000LL

static const char *const st_names[EM_NUM_DTYPES] = {
  [EM_FLOAT32] = "F32", [EM_FLOAT64] = "F64", [EM_FLOAT16] = "F16", [EM_BFLOAT16] = "BF16",
  [EM_INT8] = "I8", [EM_UINT8] = "U8", [EM_INT16] = "I16", [EM_INT32] = "I32",
  [EM_INT64] = "I64", [EM_BOOL] = "BOOL",
};

/* Types of the format that Ember has no dtype for: named in errors rather than "unknown". */
static const char *const st_unsupported[] = {
  "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
};

typedef struct st_entry {
  char *name;
  em_dtype dtype;
  int ndim;
  int64_t sizes[EM_MAX_DIMS];
  int64_t begin, end;          /* byte range within the data section */
} st_entry;

struct em_safetensors {
  char *path;
  int fd;
  int64_t data_start;          /* 8 + header length */
  int64_t data_size;
  int64_t count;
  st_entry *entries;
  int64_t n_meta;
  char **meta_keys;
  char **meta_values;
};

/* ---- opening: header validation ------------------------------------------------------------ */

static int parse_dtype(const char *path, const char *name, const em_json *v, em_dtype *out) {
  if (v == NULL || v->type != EM_JSON_STRING)
    return em_error("load: tensor '%s' in %s has no \"dtype\" string", name, path);
  for (int d = 0; d < EM_NUM_DTYPES; d++)
    if (st_names[d] != NULL && strcmp(v->string, st_names[d]) == 0) {
      *out = (em_dtype)d;
      return 0;
    }
  for (size_t i = 0; i < sizeof st_unsupported / sizeof *st_unsupported; i++)
    if (strcmp(v->string, st_unsupported[i]) == 0)
      return em_error("load: tensor '%s' in %s has dtype %s, which Ember does not support",
                      name, path, v->string);
  return em_error("load: tensor '%s' in %s has an unknown dtype '%.40s'", name, path, v->string);
}

static int parse_entry(const char *path, const char *name, const em_json *v, st_entry *e) {
  if (v->type != EM_JSON_OBJECT)
    return em_error("load: entry '%s' in %s is not an object", name, path);
  if (parse_dtype(path, name, em_json_get(v, "dtype"), &e->dtype) != 0) return -1;
  const em_json *shape = em_json_get(v, "shape");
  if (shape == NULL || shape->type != EM_JSON_ARRAY)
    return em_error("load: tensor '%s' in %s has no \"shape\" array", name, path);
  if (shape->count > EM_MAX_DIMS)
    return em_error("load: tensor '%s' in %s has %lld dimensions; Ember allows at most %d", name,
                    path, (long long)shape->count, EM_MAX_DIMS);
  e->ndim = (int)shape->count;
  for (int i = 0; i < e->ndim; i++) {
    const em_json *s = &shape->items[i];
    if (s->type != EM_JSON_NUMBER || !s->is_integer || s->integer < 0)
      return em_error("load: tensor '%s' in %s: shape entry %d is not a non-negative integer",
                      name, path, i);
    e->sizes[i] = s->integer;
  }
  const em_json *off = em_json_get(v, "data_offsets");
  if (off == NULL || off->type != EM_JSON_ARRAY || off->count != 2 ||
      off->items[0].type != EM_JSON_NUMBER || !off->items[0].is_integer ||
      off->items[1].type != EM_JSON_NUMBER || !off->items[1].is_integer)
    return em_error("load: tensor '%s' in %s has no \"data_offsets\" pair of integers", name,
                    path);
  e->begin = off->items[0].integer;
  e->end = off->items[1].integer;
  if (e->begin < 0 || e->end < e->begin)
    return em_error("load: tensor '%s' in %s has data_offsets [%lld, %lld] out of order", name,
                    path, (long long)e->begin, (long long)e->end);
  int64_t numel, size = (int64_t)em_dtypes[e->dtype].size;
  char sb[EM_SHAPE_BUF];
  if (em_checked_numel(e->ndim, e->sizes, INT64_MAX / size, &numel) != 0)
    return em_error("load: tensor '%s' in %s has an absurd shape %s", name, path,
                    em_shape_str(sb, sizeof sb, e->ndim, e->sizes));
  if (!em_shape_fits(e->ndim, e->sizes)) /* zero-size shapes whose strides overflow */
    return em_error("load: tensor '%s' in %s has an absurd shape %s (too large for a tensor)",
                    name, path, em_shape_str(sb, sizeof sb, e->ndim, e->sizes));
  if (numel * size != e->end - e->begin)
    return em_error("load: tensor '%s' in %s: shape %s of %s needs %lld bytes, data_offsets "
                    "[%lld, %lld] give %lld", name, path,
                    em_shape_str(sb, sizeof sb, e->ndim, e->sizes), st_names[e->dtype],
                    (long long)(numel * size), (long long)e->begin, (long long)e->end,
                    (long long)(e->end - e->begin));
  return 0;
}

static int parse_metadata(em_safetensors *f, const em_json *v) {
  if (v->type != EM_JSON_OBJECT)
    return em_error("load: __metadata__ in %s is not an object of strings", f->path);
  f->meta_keys = calloc((size_t)v->count + 1, sizeof(char *));
  f->meta_values = calloc((size_t)v->count + 1, sizeof(char *));
  if (f->meta_keys == NULL || f->meta_values == NULL)
    return em_error_kind_set(EM_ERR_OOM, "load: out of memory reading %s", f->path);
  for (int64_t i = 0; i < v->count; i++) {
    if (v->items[i].type != EM_JSON_STRING)
      return em_error("load: __metadata__ value '%s' in %s is not a string", v->keys[i],
                      f->path);
    if (strlen(v->keys[i]) != v->key_lengths[i] || strlen(v->items[i].string) != v->items[i].length)
      return em_error("load: __metadata__ entry '%s' in %s holds a NUL character", v->keys[i],
                      f->path);
    f->meta_keys[i] = strdup(v->keys[i]);
    f->meta_values[i] = strdup(v->items[i].string);
    f->n_meta = i + 1;
    if (f->meta_keys[i] == NULL || f->meta_values[i] == NULL)
      return em_error_kind_set(EM_ERR_OOM, "load: out of memory reading %s", f->path);
  }
  return 0;
}

static int by_begin(const void *a, const void *b, void *ctx) {
  const st_entry *es = ctx;
  const st_entry *x = &es[*(const int64_t *)a], *y = &es[*(const int64_t *)b];
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}
static int by_name(const void *a, const void *b, void *ctx) {
  const st_entry *es = ctx;
  return strcmp(es[*(const int64_t *)a].name, es[*(const int64_t *)b].name);
}

/* The reference implementation's rule: the byte ranges, in order, tile [0, data_size). This is
 * what catches a truncated file (the last range passes the end) and garbage in the data. */
static int check_layout(em_safetensors *f) {
  int64_t n = f->count;
  int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
  if (order == NULL) return em_error_kind_set(EM_ERR_OOM, "load: out of memory");
  for (int64_t i = 0; i < n; i++) order[i] = i;
  int rc = 0;
  qsort_r(order, (size_t)n, sizeof *order, by_name, f->entries);
  for (int64_t i = 1; i < n && rc == 0; i++)
    if (strcmp(f->entries[order[i]].name, f->entries[order[i - 1]].name) == 0)
      rc = em_error("load: %s names tensor '%s' twice", f->path, f->entries[order[i]].name);
  if (rc == 0) qsort_r(order, (size_t)n, sizeof *order, by_begin, f->entries);
  int64_t pos = 0;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    const st_entry *e = &f->entries[order[i]];
    if (e->begin != pos)
      rc = em_error("load: %s is corrupt: tensor '%s' starts at byte %lld of the data, expected "
                    "%lld (ranges must follow each other without gaps or overlaps)", f->path,
                    e->name, (long long)e->begin, (long long)pos);
    pos = e->end;
  }
  free(order);
  if (rc != 0) return rc;
  if (pos > f->data_size)
    return em_error("load: %s is truncated: its tensors need %lld bytes of data after the "
                    "header, the file has %lld", f->path, (long long)pos,
                    (long long)f->data_size);
  if (pos < f->data_size)
    return em_error("load: %s is corrupt: %lld bytes of data follow the last tensor", f->path,
                    (long long)(f->data_size - pos));
  return 0;
}

static int parse_header(em_safetensors *f, const char *text, size_t len) {
  if (len == 0 || text[0] != '{')
    return em_error("load: %s is not a safetensors file: its header does not start with '{'",
                    f->path);
  char what[512];
  snprintf(what, sizeof what, "the header of %s", f->path);
  em_json *root = em_json_parse("load", what, text, len);
  if (root == NULL) return -1;
  int rc = 0;
  f->entries = calloc((size_t)root->count + 1, sizeof *f->entries);
  if (f->entries == NULL) rc = em_error_kind_set(EM_ERR_OOM, "load: out of memory");
  for (int64_t i = 0; i < root->count && rc == 0; i++) {
    const char *key = root->keys[i];
    if (strlen(key) != root->key_lengths[i]) {
      rc = em_error("load: %s names a tensor with a NUL character", f->path);
    } else if (strcmp(key, "__metadata__") == 0) {
      if (f->meta_keys != NULL) rc = em_error("load: %s has two __metadata__ entries", f->path);
      else rc = parse_metadata(f, &root->items[i]);
    } else {
      st_entry *e = &f->entries[f->count];
      e->name = strdup(key);
      if (e->name == NULL) rc = em_error_kind_set(EM_ERR_OOM, "load: out of memory");
      else {
        f->count++;
        rc = parse_entry(f->path, key, &root->items[i], e);
      }
    }
  }
  em_json_free(root);
  if (rc == 0) rc = check_layout(f);
  return rc;
}

/* Reads n bytes at off, through short reads and interruptions. Returns the count read: n, or
 * less at the end of the file (errno untouched), or -1 with errno from the failing pread. A
 * short count must be reported as truncation: errno then holds whatever an earlier call left. */
static int64_t read_at(int fd, void *dst, int64_t n, int64_t off) {
  int64_t got = 0;
  while (got < n) {
    int64_t chunk = n - got > (1 << 30) ? (1 << 30) : n - got;
    ssize_t k = pread(fd, (char *)dst + got, (size_t)chunk, (off_t)(off + got));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) break;
    got += k;
  }
  return got;
}

em_safetensors *em_safetensors_open(const char *path) {
  if (path == NULL) return em_error_null("load: expected a file path, got NULL");
  em_safetensors *f = calloc(1, sizeof *f);
  if (f == NULL) return em_error_kind_set(EM_ERR_OOM, "load: out of memory"), NULL;
  f->fd = -1;
  f->path = strdup(path);
  if (f->path == NULL) goto oom;
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (f->fd < 0 || fstat(f->fd, &st) != 0) {
    em_error("load: cannot open %s: %s", path, strerror(errno));
    goto fail;
  }
  if (S_ISDIR(st.st_mode)) {
    em_error("load: cannot open %s: it is a directory", path);
    goto fail;
  }
  int64_t size = (int64_t)st.st_size;
  unsigned char len8[8];
  int64_t got = size < 8 ? 0 : read_at(f->fd, len8, 8, 0);
  if (got < 0) {
    em_error("load: cannot read %s: %s", path, strerror(errno));
    goto fail;
  }
  if (got < 8) {
    em_error("load: %s is not a safetensors file: it has %lld bytes, too few for the 8-byte "
             "header length", path, (long long)(size < 8 ? size : got));
    goto fail;
  }
  uint64_t n = em_load_le64(len8);
  if (n > (uint64_t)(size - 8)) {
    em_error("load: %s is not a safetensors file: header length %llu exceeds the file size "
             "%lld", path, (unsigned long long)n, (long long)size);
    goto fail;
  }
  if (n > (uint64_t)HEADER_LIMIT) {
    em_error("load: %s is not a safetensors file: header length %llu passes the limit of %lld",
             path, (unsigned long long)n, HEADER_LIMIT);
    goto fail;
  }
  char *text = malloc(n + 1);
  if (text == NULL) goto oom;
  got = read_at(f->fd, text, (int64_t)n, 8);
  if (got != (int64_t)n) {
    free(text);
    if (got < 0) em_error("load: cannot read %s: %s", path, strerror(errno));
    else em_error("load: %s is truncated: expected %lld bytes of header, got %lld", path,
                  (long long)n, (long long)got);
    goto fail;
  }
  text[n] = '\0';
  f->data_start = 8 + (int64_t)n;
  f->data_size = size - f->data_start;
  int rc = parse_header(f, text, n);
  free(text);
  if (rc != 0) goto fail;
  return f;
oom:
  em_error_kind_set(EM_ERR_OOM, "load: out of memory opening %s", path);
fail:
  em_safetensors_close(f);
  return NULL;
}

void em_safetensors_close(em_safetensors *f) {
  if (f == NULL) return;
  if (f->fd >= 0) close(f->fd);
  for (int64_t i = 0; i < f->count; i++) free(f->entries[i].name);
  free(f->entries);
  for (int64_t i = 0; i < f->n_meta; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->meta_keys);
  free(f->meta_values);
  free(f->path);
  free(f);
}

int64_t em_safetensors_count(const em_safetensors *f) {
  EM_NOT_NULL(-1, f);
  return f->count;
}

const char *em_safetensors_name(const em_safetensors *f, int64_t i) {
  if (f == NULL || i < 0 || i >= f->count)
    return em_error_null("safetensors_name: index %lld out of range for %lld tensors",
                         (long long)i, (long long)(f ? f->count : 0));
  return f->entries[i].name;
}

int64_t em_safetensors_find(const em_safetensors *f, const char *name) {
  EM_NOT_NULL(-1, f); EM_NOT_NULL(-1, name);
  for (int64_t i = 0; i < f->count; i++)
      if (strcmp(f->entries[i].name, name) == 0) return i;
  return -1;
}

int64_t em_safetensors_metadata_count(const em_safetensors *f) {
  EM_NOT_NULL(-1, f);
  return f->n_meta;
}

const char *em_safetensors_metadata_key(const em_safetensors *f, int64_t i) {
  if (f == NULL || i < 0 || i >= f->n_meta)
    return em_error_null("safetensors_metadata_key: index %lld out of range for %lld entries",
                         (long long)i, (long long)(f ? f->n_meta : 0));
  return f->meta_keys[i];
}

const char *em_safetensors_metadata_value(const em_safetensors *f, int64_t i) {
  if (f == NULL || i < 0 || i >= f->n_meta)
    return em_error_null("safetensors_metadata_value: index %lld out of range for %lld entries",
                         (long long)i, (long long)(f ? f->n_meta : 0));
  return f->meta_values[i];
}

em_tensor *em_safetensors_tensor(const em_safetensors *f, int64_t i) {
  if (f == NULL || i < 0 || i >= f->count)
    return em_error_null("load: tensor index %lld out of range for %lld tensors", (long long)i,
                         (long long)(f ? f->count : 0));
  const st_entry *e = &f->entries[i];
  em_tensor *t = em_empty(e->ndim, e->sizes, e->dtype, EM_CPU);
  if (t == NULL) return NULL;
  char *dst = em_data_ptr(t);
  int64_t want = e->end - e->begin;
  int64_t got = read_at(f->fd, dst, want, f->data_start + e->begin);
  if (got != want) {
    int e_no = errno;
    em_release(t);
    if (got >= 0)
      return em_error_null("load: %s is truncated: tensor '%s' needs bytes up to %lld of "
                           "the file", f->path, e->name, (long long)(f->data_start + e->end));
    return em_error_null("load: cannot read %s: %s", f->path, strerror(e_no));
  }
  if (!em_host_is_little_endian()) em_swap_bytes(dst, em_numel(t), em_dtypes[e->dtype].size);
  return t;
}

/* ---- saving -------------------------------------------------------------------------------- */

static int check_save_args(int64_t n, const char *const *names, em_tensor *const *tensors,
                           int64_t n_meta, const char *const *keys, const char *const *values) {
  if (n < 0 || n_meta < 0) return em_error("save: expected counts >= 0");
  if (n > 0 && (names == NULL || tensors == NULL))
    return em_error("save: expected %lld names and tensors, got NULL", (long long)n);
  if (n_meta > 0 && (keys == NULL || values == NULL))
    return em_error("save: expected %lld metadata keys and values, got NULL", (long long)n_meta);
  for (int64_t i = 0; i < n; i++) {
    if (names[i] == NULL) return em_error("save: tensor %lld has no name", (long long)i);
    if (tensors[i] == NULL) return em_error("save: tensor '%s' is NULL", names[i]);
    if (st_names[tensors[i]->dtype_id] == NULL)
      return em_error("save: tensor '%s' has dtype %s, which safetensors has no type for (save "
                      "its bytes, em_view_dtype as uint8, as ember.save does)", names[i],
                      em_dtype_name((em_dtype)tensors[i]->dtype_id));
    if (strcmp(names[i], "__metadata__") == 0)
      return em_error("save: '__metadata__' is reserved and cannot name a tensor");
    for (int64_t j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0)
        return em_error("save: two tensors are named '%s'", names[i]);
  }
  for (int64_t i = 0; i < n_meta; i++) {
    if (keys[i] == NULL || values[i] == NULL)
      return em_error("save: metadata entry %lld has no key or value", (long long)i);
    for (int64_t j = 0; j < i; j++)
      if (strcmp(keys[i], keys[j]) == 0)
        return em_error("save: two metadata entries are named '%s'", keys[i]);
  }
  return 0;
}

/* The reference writer's order: larger elements first (so every tensor's data is aligned to its
 * element size once the header is padded to 8 bytes), then by name. */
typedef struct save_order {
  em_tensor *const *tensors;
  const char *const *names;
} save_order;
static int by_alignment(const void *a, const void *b, void *ctx) {
  const save_order *o = ctx;
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  size_t si = em_dtypes[o->tensors[i]->dtype_id].size;
  size_t sj = em_dtypes[o->tensors[j]->dtype_id].size;
  if (si != sj) return si > sj ? -1 : 1;
  return strcmp(o->names[i], o->names[j]);
}

static void header_json(em_buf *b, int64_t n, const char *const *names, em_tensor *const *ts,
                        const int64_t *order, int64_t n_meta, const char *const *keys,
                        const char *const *values) {
  em_buf_puts(b, "{");
  if (n_meta > 0) {
    em_buf_puts(b, "\"__metadata__\":{");
    for (int64_t i = 0; i < n_meta; i++) {
      if (i) em_buf_puts(b, ",");
      em_buf_json_string(b, keys[i]);
      em_buf_puts(b, ":");
      em_buf_json_string(b, values[i]);
    }
    em_buf_puts(b, "}");
  }
  int64_t pos = 0;
  for (int64_t k = 0; k < n; k++) {
    const em_tensor *t = ts[order[k]];
    int64_t bytes = em_numel(t) * (int64_t)em_dtypes[t->dtype_id].size;
    if (k || n_meta > 0) em_buf_puts(b, ",");
    em_buf_json_string(b, names[order[k]]);
    em_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", st_names[t->dtype_id]);
    for (int d = 0; d < t->ndim; d++) em_buf_printf(b, d ? ",%lld" : "%lld", (long long)t->sizes[d]);
    em_buf_printf(b, "],\"data_offsets\":[%lld,%lld]}", (long long)pos, (long long)(pos + bytes));
    pos += bytes;
  }
  em_buf_puts(b, "}");
  while (!b->failed && b->len % 8 != 0) em_buf_puts(b, " "); /* a failed buffer grows no more */
}

/* One tensor's bytes, little-endian, from a contiguous CPU copy. */
static int write_tensor(em_atomic_file *a, const em_tensor *t, const char *name) {
  em_tensor *c = t->device_id == EM_CPU ? em_contiguous(t) : em_to_device(t, EM_CPU);
  if (c != NULL && !em_is_contiguous(c)) {
    em_tensor *cc = em_contiguous(c);
    em_release(c);
    c = cc;
  }
  if (c != NULL && !em_host_is_little_endian()) {
    em_tensor *cc = em_clone(c);
    em_release(c);
    c = cc;
    if (c) em_swap_bytes(em_data_ptr(c), em_numel(c), em_dtypes[c->dtype_id].size);
  }
  if (c == NULL) {
    em_error_prefix("save");
    char msg[512];
    snprintf(msg, sizeof msg, "%s", em_last_error());
    return em_error("%s (tensor '%s')", msg, name);
  }
  size_t bytes = (size_t)em_numel(c) * em_dtypes[c->dtype_id].size;
  int rc = bytes ? em_atomic_write(a, em_data_ptr(c), bytes) : 0;
  em_release(c);
  return rc;
}

int em_safetensors_save(const char *path, int64_t n, const char *const *names,
                        em_tensor *const *tensors, int64_t n_meta, const char *const *keys,
                        const char *const *values) {
  if (check_save_args(n, names, tensors, n_meta, keys, values) != 0) return -1;
  int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
  if (order == NULL) return em_error_kind_set(EM_ERR_OOM, "save: out of memory");
  for (int64_t i = 0; i < n; i++) order[i] = i;
  save_order ctx = { tensors, names };
  qsort_r(order, (size_t)n, sizeof *order, by_alignment, &ctx);

  em_buf header = { 0 };
  header_json(&header, n, names, tensors, order, n_meta, keys, values);
  if (header.failed) {
    em_buf_free(&header);
    free(order);
    return em_error_kind_set(EM_ERR_OOM, "save: out of memory building the header of %s", path);
  }
  em_atomic_file a;
  int rc = em_atomic_open(&a, "save", path);
  if (rc == 0) {
    unsigned char len8[8];
    em_store_le64(len8, header.len);
    rc = em_atomic_write(&a, len8, 8);
    if (rc == 0) rc = em_atomic_write(&a, header.data, header.len);
    for (int64_t k = 0; k < n && rc == 0; k++)
      rc = write_tensor(&a, tensors[order[k]], names[order[k]]);
    if (rc == 0) rc = em_atomic_commit(&a);
    else em_atomic_abort(&a);
  }
  em_buf_free(&header);
  free(order);
  return rc;
}
