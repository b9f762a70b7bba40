/* GGUF reader (versions 2 and 3): the header, typed metadata and tensor directory of a
 * llama.cpp model file, checked against the file size before anything is read.
 *
 * The file is mapped read-only; em_gguf keeps the map, one record per metadata entry (where
 * its value starts, and for arrays of strings where each string starts, so that a 32000-word
 * vocabulary is read in one pass) and one per tensor. Tensor bytes are handed to the caller as
 * a pointer into the map (em_gguf_data + offset): Lua copies them into tensors, and quantized
 * blocks stay bytes (ember.quant). Every length, count and offset is checked against the bytes
 * that remain, so a truncated or hostile file gives an error, never a read past the map. */
#include "../internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };
static const int scalar_size[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

typedef struct {
  uint64_t key_at, key_len;   /* the key's bytes */
  int type, elem_type;        /* elem_type: an array's, else the type itself */
  uint64_t at, len;           /* value (array: first element); len: array length, else 1 */
  uint64_t *str_at;           /* arrays of strings: each string's length field */
} gguf_kv;

typedef struct {
  char *name;
  int type, ndim;
  int64_t dims[4];
  uint64_t offset, nbytes;    /* offset from the file's start */
} gguf_tensor;

struct em_gguf {
  const uint8_t *map;
  uint64_t size, data_at, alignment;
  uint32_t version;
  int64_t n_kv, n_tensors;
  uint64_t cap_kv, cap_t;     /* entries allocated: a record that failed half-way owns memory too */
  gguf_kv *kv;
  gguf_tensor *t;
  char *key_buf;
};

typedef struct { const uint8_t *p; uint64_t size, pos; const char *path; } cursor;

static int need(cursor *c, uint64_t n, const char *what) {
  if (n > c->size - c->pos)
    return em_error("gguf_open: %s is truncated: %s needs %llu bytes at offset %llu, the file "
                    "has %llu", c->path, what, (unsigned long long)n, (unsigned long long)c->pos,
                    (unsigned long long)c->size);
  return 0;
}
static int rd(cursor *c, void *out, uint64_t n, const char *what) {
  if (need(c, n, what)) return -1;
  memcpy(out, c->p + c->pos, n);
  c->pos += n;
  return 0;
}
static int skip_string(cursor *c, uint64_t *len, const char *what) {
  uint64_t n;
  if (rd(c, &n, 8, what) || need(c, n, what)) return -1;
  c->pos += n;
  if (len) *len = n;
  return 0;
}

/* Type sizes of the tensor types Ember reads: elements per block, bytes per block. */
static int ggml_type_size(int type, uint64_t *be, uint64_t *bb) {
  switch (type) {
  case 0: *be = 1; *bb = 4; return 0;     /* F32 */
  case 1: *be = 1; *bb = 2; return 0;     /* F16 */
  case 2: *be = 32; *bb = 18; return 0;   /* Q4_0 */
  case 3: *be = 32; *bb = 20; return 0;   /* Q4_1 */
  case 8: *be = 32; *bb = 34; return 0;   /* Q8_0 */
  case 12: *be = 256; *bb = 144; return 0; /* Q4_K */
  case 14: *be = 256; *bb = 210; return 0; /* Q6_K */
  case 24: *be = 1; *bb = 1; return 0;    /* I8 */
  case 25: *be = 1; *bb = 2; return 0;    /* I16 */
  case 26: *be = 1; *bb = 4; return 0;    /* I32 */
  case 27: *be = 1; *bb = 8; return 0;    /* I64 */
  case 28: *be = 1; *bb = 8; return 0;    /* F64 */
  case 30: *be = 1; *bb = 2; return 0;    /* BF16 */
  default: return -1;
  }
}

void em_gguf_close(em_gguf *g) {
  if (!g) return;
  for (uint64_t i = 0; g->kv && i < g->cap_kv; i++) free(g->kv[i].str_at);
  for (uint64_t i = 0; g->t && i < g->cap_t; i++) free(g->t[i].name);
  free(g->kv);
  free(g->t);
  if (g->map && g->size) munmap((void *)g->map, g->size);
  free(g);
}

static int parse(em_gguf *g, const char *path) {
  cursor c = { g->map, g->size, 0, path };
  char magic[4];
  if (need(&c, 4, "the magic")) return -1;
  memcpy(magic, c.p, 4);
  if (memcmp(magic, "GGUF", 4) != 0)
    return em_error("gguf_open: %s is not a GGUF file (expected the magic \"GGUF\")", path);
  c.pos = 4;
  if (rd(&c, &g->version, 4, "the version")) return -1;
  if (g->version != 2 && g->version != 3)
    return em_error("gguf_open: %s has GGUF version %u, expected 2 or 3", path, g->version);
  uint64_t nt, nkv;
  if (rd(&c, &nt, 8, "the tensor count") || rd(&c, &nkv, 8, "the metadata count")) return -1;
  /* every entry takes at least 8 + 4 bytes (key length, type), every tensor at least 8 + 4 + 4 + 8 */
  if (nkv > (c.size - c.pos) / 12 || nt > (c.size - c.pos) / 24)
    return em_error("gguf_open: %s is truncated: %llu metadata entries and %llu tensors cannot "
                    "fit in %llu bytes", path, (unsigned long long)nkv, (unsigned long long)nt,
                    (unsigned long long)c.size);
  g->kv = calloc(nkv ? nkv : 1, sizeof *g->kv);
  g->t = calloc(nt ? nt : 1, sizeof *g->t);
  if (!g->kv || !g->t) return em_error("gguf_open: out of memory");
  g->cap_kv = nkv;
  g->cap_t = nt;
  g->alignment = 32;
  for (uint64_t i = 0; i < nkv; i++, g->n_kv++) {
    gguf_kv *kv = &g->kv[i];
    uint32_t type;
    kv->key_at = c.pos + 8;
    if (skip_string(&c, &kv->key_len, "a metadata key") || rd(&c, &type, 4, "a metadata type"))
      return -1;
    if (type > T_F64)
      return em_error("gguf_open: %s: metadata entry %llu has unknown type %u", path,
                      (unsigned long long)i + 1, type);
    kv->type = kv->elem_type = (int)type;
    kv->len = 1;
    if (type == T_ARR) {
      uint32_t et;
      if (rd(&c, &et, 4, "an array type") || rd(&c, &kv->len, 8, "an array length")) return -1;
      if (et > T_F64 || et == T_ARR)
        return em_error("gguf_open: %s: metadata entry %llu is an array of unsupported type %u",
                        path, (unsigned long long)i + 1, et);
      kv->elem_type = (int)et;
    }
    kv->at = c.pos;
    if (kv->elem_type == T_STR) {
      if (kv->len > (c.size - c.pos) / 8) return need(&c, c.size, "a string array");
      kv->str_at = malloc((kv->len ? kv->len : 1) * sizeof *kv->str_at);
      if (!kv->str_at) return em_error("gguf_open: out of memory");
      for (uint64_t j = 0; j < kv->len; j++) {
        kv->str_at[j] = c.pos;
        if (skip_string(&c, NULL, "a metadata string")) return -1;
      }
    } else {
      uint64_t es = (uint64_t)scalar_size[kv->elem_type];
      if (kv->len > (c.size - c.pos) / es) return need(&c, c.size, "a metadata array");
      c.pos += es * kv->len;
    }
    if (kv->key_len == 17 && memcmp(c.p + kv->key_at, "general.alignment", 17) == 0) {
      uint32_t a;
      if (kv->type != T_U32) return em_error("gguf_open: %s: general.alignment is not a uint32", path);
      memcpy(&a, c.p + kv->at, 4);
      if (a == 0 || (a & (a - 1)) != 0)
        return em_error("gguf_open: %s: general.alignment is %u, expected a power of two", path, a);
      g->alignment = a;
    }
  }
  for (uint64_t i = 0; i < nt; i++, g->n_tensors++) {
    gguf_tensor *t = &g->t[i];
    uint64_t name_len;
    uint32_t nd, type;
    uint64_t name_at = c.pos + 8;
    if (skip_string(&c, &name_len, "a tensor name")) return -1;
    t->name = malloc(name_len + 1);
    if (!t->name) return em_error("gguf_open: out of memory");
    memcpy(t->name, c.p + name_at, name_len);
    t->name[name_len] = 0;
    if (rd(&c, &nd, 4, "a tensor's dimension count")) return -1;
    if (nd < 1 || nd > 4)
      return em_error("gguf_open: %s: tensor '%s' has %u dimensions, expected 1 to 4", path, t->name, nd);
    t->ndim = (int)nd;
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; d++) {
      uint64_t v;
      if (rd(&c, &v, 8, "a tensor dimension")) return -1;
      if (v > INT64_MAX || (v && n > UINT64_MAX / v / 256))
        return em_error("gguf_open: %s: tensor '%s' is too large", path, t->name);
      t->dims[d] = (int64_t)v;
      n *= v;
    }
    if (rd(&c, &type, 4, "a tensor type") || rd(&c, &t->offset, 8, "a tensor offset")) return -1;
    uint64_t be, bb;
    if (ggml_type_size((int)type, &be, &bb) != 0)
      return em_error("gguf_open: %s: tensor '%s' has ggml type %u, which Ember does not read",
                      path, t->name, type);
    if (t->dims[0] % (int64_t)be != 0)
      return em_error("gguf_open: %s: tensor '%s' has %lld columns, not whole blocks of %llu",
                      path, t->name, (long long)t->dims[0], (unsigned long long)be);
    t->type = (int)type;
    t->nbytes = n / be * bb;
  }
  uint64_t a = g->alignment;
  g->data_at = (c.pos + a - 1) / a * a;
  for (int64_t i = 0; i < g->n_tensors; i++) {
    gguf_tensor *t = &g->t[i];
    if (t->offset % a != 0)
      return em_error("gguf_open: %s: tensor '%s' is at offset %llu, not a multiple of the "
                      "alignment %llu", path, t->name, (unsigned long long)t->offset, (unsigned long long)a);
    if (g->data_at > g->size || t->offset > g->size - g->data_at ||
        t->nbytes > g->size - g->data_at - t->offset)
      return em_error("gguf_open: %s: tensor '%s' (%llu bytes at offset %llu) lies outside the "
                      "file (%llu bytes)", path, t->name, (unsigned long long)t->nbytes,
                      (unsigned long long)t->offset, (unsigned long long)g->size);
    t->offset += g->data_at;
  }
  return 0;
}

em_gguf *em_gguf_open(const char *path) {
  EM_NOT_NULL(NULL, path);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return em_error_null("gguf_open: cannot open %s", path);
  struct stat st;
  em_gguf *g = calloc(1, sizeof *g);
  if (!g || fstat(fd, &st) != 0) { close(fd); free(g); return em_error_null("gguf_open: cannot read %s", path); }
  g->size = (uint64_t)st.st_size;
  if (g->size) {
    void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) { close(fd); free(g); return em_error_null("gguf_open: cannot map %s", path); }
    g->map = m;
  }
  close(fd);
  if (parse(g, path) != 0) { em_gguf_close(g); return NULL; }
  return g;
}

int64_t em_gguf_version(const em_gguf *g) {
  EM_NOT_NULL(-1, g);
  return g->version;
}
int64_t em_gguf_kv_count(const em_gguf *g) {
  EM_NOT_NULL(-1, g);
  return g->n_kv;
}
int64_t em_gguf_tensor_count(const em_gguf *g) {
  EM_NOT_NULL(-1, g);
  return g->n_tensors;
}
const void *em_gguf_data(const em_gguf *g) {
  EM_NOT_NULL(NULL, g);
  return g->map;
}

/* An entry index the handle has, or an error naming fn. */
static bool kv_ok(const char *fn, const em_gguf *g, int64_t i) {
  if (i >= 0 && i < (int64_t)g->n_kv) return true;
  em_error("%s: metadata index %lld out of range (%lld entries)", fn, (long long)i,
           (long long)g->n_kv);
  return false;
}

const char *em_gguf_kv_key(const em_gguf *g, int64_t i, int64_t *len) {
  EM_NOT_NULL(NULL, g);
  EM_NOT_NULL(NULL, len);
  if (!kv_ok("gguf_kv_key", g, i)) return NULL;
  *len = (int64_t)g->kv[i].key_len;
  return (const char *)g->map + g->kv[i].key_at;
}
int em_gguf_kv_type(const em_gguf *g, int64_t i, int *elem_type, int64_t *len) {
  EM_NOT_NULL(-1, g);
  EM_NOT_NULL(-1, elem_type);
  EM_NOT_NULL(-1, len);
  if (!kv_ok("gguf_kv_type", g, i)) return -1;
  *elem_type = g->kv[i].elem_type;
  *len = (int64_t)g->kv[i].len;
  return g->kv[i].type;
}
/* Element j (0-based) of entry i: a pointer to its bytes (strings: to the characters, length in
 * *len). The caller has checked i and j against the counts. */
const void *em_gguf_kv_value(const em_gguf *g, int64_t i, int64_t j, int64_t *len) {
  EM_NOT_NULL(NULL, g);
  EM_NOT_NULL(NULL, len);
  if (!kv_ok("gguf_kv_value", g, i)) return NULL;
  if (j < 0 || (uint64_t)j >= g->kv[i].len)
    return em_error_null("gguf_kv_value: element %lld out of range", (long long)j);
  const gguf_kv *kv = &g->kv[i];
  if (kv->elem_type == T_STR) {
    uint64_t at = kv->str_at ? kv->str_at[j] : kv->at, n;
    memcpy(&n, g->map + at, 8);
    *len = (int64_t)n;
    return g->map + at + 8;
  }
  *len = scalar_size[kv->elem_type];
  return g->map + kv->at + (uint64_t)j * (uint64_t)scalar_size[kv->elem_type];
}

const char *em_gguf_tensor_info(const em_gguf *g, int64_t i, int *type, int *ndim, int64_t *dims,
                                int64_t *offset, int64_t *nbytes) {
  EM_NOT_NULL(NULL, g);
  EM_NOT_NULL(NULL, type);
  EM_NOT_NULL(NULL, ndim);
  EM_NOT_NULL(NULL, dims);
  EM_NOT_NULL(NULL, offset);
  EM_NOT_NULL(NULL, nbytes);
  if (i < 0 || i >= (int64_t)g->n_tensors)
    return em_error_null("gguf_tensor_info: tensor index %lld out of range (%lld tensors)",
                         (long long)i, (long long)g->n_tensors);
  const gguf_tensor *t = &g->t[i];
  *type = t->type;
  *ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) dims[d] = t->dims[d];
  *offset = (int64_t)t->offset;
  *nbytes = (int64_t)t->nbytes;
  return t->name;
}
