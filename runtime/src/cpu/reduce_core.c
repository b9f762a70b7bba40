/*
 * reduce_core.c: the plan and the walkers shared by the CPU reduction family (reduce_core.h
 * explains the row and column paths), and the typed tile loads and stores.
 */
#include <stdlib.h>

#include "../red_dims.h"
#include "reduce_core.h"

/* ---- the plan ------------------------------------------------------------------------------ */

static int64_t store_dims(const em_red_dim *d, int n, int64_t *size, int64_t *xs, int64_t *os) {
  int64_t total = 1;
  for (int i = 0; i < n; i++) {
    size[i] = d[i].size;
    xs[i] = d[i].xs;
    os[i] = d[i].os;
    total *= d[i].size;
  }
  if (n == 0) { /* a virtual size-1 dim keeps the walkers free of special cases */
    size[0] = 1;
    xs[0] = os[0] = 0;
  }
  return total;
}

void em_red_plan_build(em_red_plan *p, em_tensor *out, const em_tensor *x, uint32_t mask) {
  int64_t xes = (int64_t)em_dtypes[x->dtype_id].size, oes = (int64_t)em_dtypes[out->dtype_id].size;
  em_red_dim kept[EM_MAX_DIMS], red[EM_MAX_DIMS];
  int nk, nr;
  em_red_dims_split(out, x, mask, xes, oes, kept, &nk, red, &nr); /* strides in bytes */
  p->nout = store_dims(kept, nk, p->ksize, p->kx, p->ko);
  p->nred = store_dims(red, nr, p->rsize, p->rx, p->ro);
  p->nk = nk > 0 ? nk : 1;
  p->nr = nr > 0 ? nr : 1;
  p->x = em_cpu_ptr(x);
  p->o = em_cpu_ptr(out);
  p->xd = (em_dtype)x->dtype_id;
  p->od = (em_dtype)out->dtype_id;

  /* The column path pays off when neighbouring outputs are closer in memory than neighbouring
   * reduced elements. */
  int64_t kin = p->kx[p->nk - 1], rin = p->rx[p->nr - 1], kn = p->ksize[p->nk - 1];
  /* It also wins for short reductions (softmax over 4 classes, sums of pairs): the row path
   * pays tens of ns of setup per output, the column path a strided load per element. */
  p->column = kn > 1 && kin != 0 &&
              (rin == 0 || em_abs64(kin) < em_abs64(rin) || p->nred <= EM_RED_SHORT);
  p->width = kn < EM_RED_SPAN ? kn : EM_RED_SPAN;
  /* A group sweeps width * |kin| bytes once per reduced position: keep that within L2. */
  int64_t cap = EM_RED_GROUP_BYTES / (em_abs64(kin) > 0 ? em_abs64(kin) : 1);
  if (cap < EM_RED_TILE) cap = EM_RED_TILE;
  if (p->width > cap) p->width = cap;
  em_red_plan_narrow(p, 1);
}

void em_red_plan_narrow(em_red_plan *p, int64_t min_groups) {
  int64_t kn = p->ksize[p->nk - 1];
  if (p->nout == 0) { /* an empty kept dim, maybe not the innermost */
    p->nchunks = 1;
    p->ngroups = 0;
    return;
  }
  int64_t outer = p->nout / kn;
  if (outer < min_groups) {
    int64_t want = (min_groups + outer - 1) / outer;   /* groups per outer position */
    int64_t w = (kn + want - 1) / want;
    w = (w + EM_RED_TILE - 1) / EM_RED_TILE * EM_RED_TILE;
    if (w < p->width) p->width = w;
  }
  p->nchunks = (kn + p->width - 1) / p->width;
  p->ngroups = outer * p->nchunks;
}

void *em_red_scratch(const char *fn, int nt, size_t bytes) {
  void *s = malloc((size_t)nt * bytes);
  if (s == NULL)
    em_error_kind_set(EM_ERR_OOM, "%s: out of memory on cpu (%zu bytes of scratch)", fn,
                      (size_t)nt * bytes);
  return s;
}

void em_red_out_offsets(const em_red_plan *p, int64_t o, int64_t *xoff, int64_t *ooff) {
  int64_t xo = 0, oo = 0;
  for (int d = p->nk - 1; d >= 0; d--) {
    int64_t c = o % p->ksize[d];
    o /= p->ksize[d];
    xo += c * p->kx[d];
    oo += c * p->ko[d];
  }
  *xoff = xo;
  *ooff = oo;
}

int em_red_group(const em_red_plan *p, int64_t g, int64_t *xoff, int64_t *ooff) {
  int last = p->nk - 1;
  int64_t chunk = g % p->nchunks, outer = g / p->nchunks;
  int64_t xo = chunk * p->width * p->kx[last], oo = chunk * p->width * p->ko[last];
  for (int d = last - 1; d >= 0; d--) {
    int64_t c = outer % p->ksize[d];
    outer /= p->ksize[d];
    xo += c * p->kx[d];
    oo += c * p->ko[d];
  }
  *xoff = xo;
  *ooff = oo;
  int64_t left = p->ksize[last] - chunk * p->width;
  return (int)(left < p->width ? left : p->width);
}

/* ---- walkers ------------------------------------------------------------------------------- */

static void reduced_coords(const em_red_plan *p, int64_t r, int64_t *coord) {
  for (int d = p->nr - 1; d >= 0; d--) {
    coord[d] = r % p->rsize[d];
    r /= p->rsize[d];
  }
}

static void reduced_offsets(const em_red_plan *p, const int64_t *coord, int64_t *xo, int64_t *oo) {
  *xo = *oo = 0;
  for (int d = 0; d < p->nr; d++) {
    *xo += coord[d] * p->rx[d];
    *oo += coord[d] * p->ro[d];
  }
}

/* Advances the odometer past the innermost dim after it reached its size. */
static void carry(const em_red_plan *p, int64_t *coord) {
  for (int d = p->nr - 1; d > 0 && coord[d] >= p->rsize[d]; d--) {
    coord[d] = 0;
    coord[d - 1]++;
  }
}

void em_red_walk_runs(const em_red_plan *p, const char *xb, char *ob, int64_t b, int64_t e,
                      em_red_run_fn fn, void *ctx) {
  if (b >= e) return;
  int in = p->nr - 1;
  int64_t coord[EM_MAX_DIMS];
  reduced_coords(p, b, coord);
  int64_t pos = b;
  while (pos < e) {
    int64_t xo, oo;
    reduced_offsets(p, coord, &xo, &oo);
    int64_t run = p->rsize[in] - coord[in];
    if (run > e - pos) run = e - pos;
    for (int64_t i = 0; i < run; i += EM_RED_TILE) {
      int n = run - i < EM_RED_TILE ? (int)(run - i) : EM_RED_TILE;
      fn(ctx, xb + xo + i * p->rx[in], ob + oo + i * p->ro[in], n, pos + i);
    }
    pos += run;
    coord[in] += run;
    carry(p, coord);
  }
}

void em_red_walk_rows(const em_red_plan *p, const char *xb, char *ob, int64_t b, int64_t e,
                      em_red_row_fn fn, void *ctx) {
  if (b >= e) return;
  int in = p->nr - 1;
  int64_t coord[EM_MAX_DIMS];
  reduced_coords(p, b, coord);
  int64_t pos = b;
  while (pos < e) {
    int64_t xo, oo;
    reduced_offsets(p, coord, &xo, &oo);
    int64_t run = p->rsize[in] - coord[in];
    if (run > e - pos) run = e - pos;
    for (int64_t i = 0; i < run; i++)
      fn(ctx, xb + xo + i * p->rx[in], ob + oo + i * p->ro[in], pos + i);
    pos += run;
    coord[in] += run;
    carry(p, coord);
  }
}

/* ---- tile folds ---------------------------------------------------------------------------- */

double em_red_tile_sum(const double *t, int n) {
  double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) l[k] += t[i + k];
  double tail = 0;
  for (; i < n; i++) tail += t[i];
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + tail;
}

/* Eight branch-free lanes (`v > m ? v : m` compiles to maxsd, which skips a NaN v; a branchy
 * NaN-aware chain mispredicts on random data), then the vectorized sum detects NaN: it is NaN
 * only if the tile holds a NaN, or both infinities (the rescan then finds none). */
static double rescan_nan(const double *t, int n, double found) {
  /* the lanes' sum is NaN: a NaN, or both infinities (then there is none) */
  for (int i = 0; i < n; i++)
    if (t[i] != t[i]) return t[i];
  return found;
}

double em_red_tile_max(const double *t, int n, double init) {
  double l[8];
  int i = 0;
  for (int q = 0; q < 8; q++) l[q] = init;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; q++) l[q] = t[i + q] > l[q] ? t[i + q] : l[q];
  for (; i < n; i++) l[0] = em_red_max(l[0], t[i]);
  for (int q = 1; q < 8; q++) l[0] = em_red_max(l[0], l[q]);
  double check = em_red_tile_sum(t, n);
  return check != check ? rescan_nan(t, n, l[0]) : l[0];
}

double em_red_tile_min(const double *t, int n, double init) {
  double l[8];
  int i = 0;
  for (int q = 0; q < 8; q++) l[q] = init;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; q++) l[q] = t[i + q] < l[q] ? t[i + q] : l[q];
  for (; i < n; i++) l[0] = em_red_min(l[0], t[i]);
  for (int q = 1; q < 8; q++) l[0] = em_red_min(l[0], l[q]);
  double check = em_red_tile_sum(t, n);
  return check != check ? rescan_nan(t, n, l[0]) : l[0];
}

/* ---- tile loads and stores ----------------------------------------------------------------- */

/* A contiguous run gets a plain indexed loop (the compiler vectorizes the conversions); any
 * other stride walks bytes. */
#define LOAD_LOOP(T, CONV)                                                                    \
  do {                                                                                        \
    if (stride == (int64_t)sizeof(T)) {                                                       \
      const T *s_ = (const T *)src;                                                           \
      for (int i = 0; i < n; i++) dst[i] = CONV(s_[i]);                                       \
    } else {                                                                                  \
      for (int i = 0; i < n; i++) dst[i] = CONV(*(const T *)(src + i * stride));              \
    }                                                                                         \
  } while (0)

#define AS_IS(v) (v)
#define NONZERO(v) ((v) != 0)
#define HALF(v) em_half_to_float(v)
#define BF16(v) em_bf16_to_float(v)

void em_red_load_f64(double *dst, const char *src, int64_t stride, int n, em_dtype dt) {
  switch (dt) {
  case EM_FLOAT32: LOAD_LOOP(float, AS_IS); break;
  case EM_FLOAT64: LOAD_LOOP(double, AS_IS); break;
  case EM_FLOAT16: LOAD_LOOP(uint16_t, HALF); break;
  case EM_BFLOAT16: LOAD_LOOP(uint16_t, BF16); break;
  case EM_INT8: LOAD_LOOP(int8_t, AS_IS); break;
  case EM_UINT8: LOAD_LOOP(uint8_t, AS_IS); break;
  case EM_INT16: LOAD_LOOP(int16_t, AS_IS); break;
  case EM_INT32: LOAD_LOOP(int32_t, AS_IS); break;
  case EM_INT64: LOAD_LOOP(int64_t, (double)); break;
  case EM_BOOL: LOAD_LOOP(uint8_t, NONZERO); break;
  default: break;
  }
}

/* Float dtypes truncate toward zero with saturation (only reached when a caller asks for an
 * integer view of float data). */
#define SAT(v) em_sat_i64(v)
#define SAT_HALF(v) em_sat_i64(em_half_to_float(v))
#define SAT_BF16(v) em_sat_i64(em_bf16_to_float(v))

void em_red_load_i64(int64_t *dst, const char *src, int64_t stride, int n, em_dtype dt) {
  switch (dt) {
  case EM_FLOAT32: LOAD_LOOP(float, SAT); break;
  case EM_FLOAT64: LOAD_LOOP(double, SAT); break;
  case EM_FLOAT16: LOAD_LOOP(uint16_t, SAT_HALF); break;
  case EM_BFLOAT16: LOAD_LOOP(uint16_t, SAT_BF16); break;
  case EM_INT8: LOAD_LOOP(int8_t, AS_IS); break;
  case EM_UINT8: LOAD_LOOP(uint8_t, AS_IS); break;
  case EM_INT16: LOAD_LOOP(int16_t, AS_IS); break;
  case EM_INT32: LOAD_LOOP(int32_t, AS_IS); break;
  case EM_INT64: LOAD_LOOP(int64_t, AS_IS); break;
  case EM_BOOL: LOAD_LOOP(uint8_t, NONZERO); break;
  default: break;
  }
}

#define STORE_LOOP(T, CONV)                                                                   \
  do {                                                                                        \
    if (stride == (int64_t)sizeof(T)) {                                                       \
      T *d_ = (T *)dst;                                                                       \
      for (int i = 0; i < n; i++) d_[i] = CONV(src[i]);                                       \
    } else {                                                                                  \
      for (int i = 0; i < n; i++) *(T *)(dst + i * stride) = CONV(src[i]);                    \
    }                                                                                         \
  } while (0)

#define TO_F32(v) ((float)(v))
#define TO_HALF(v) em_float_to_half((float)(v))
#define TO_BF16(v) em_float_to_bf16((float)(v))
#define TO_BOOL(v) ((uint8_t)((v) != 0))
#define SAT_TO(T) (T) em_sat_i64

void em_red_store_f64(char *dst, int64_t stride, const double *src, int n, em_dtype dt) {
  switch (dt) {
  case EM_FLOAT32: STORE_LOOP(float, TO_F32); break;
  case EM_FLOAT64: STORE_LOOP(double, AS_IS); break;
  case EM_FLOAT16: STORE_LOOP(uint16_t, TO_HALF); break;
  case EM_BFLOAT16: STORE_LOOP(uint16_t, TO_BF16); break;
  case EM_INT8: STORE_LOOP(int8_t, SAT_TO(int8_t)); break;
  case EM_UINT8: STORE_LOOP(uint8_t, SAT_TO(uint8_t)); break;
  case EM_INT16: STORE_LOOP(int16_t, SAT_TO(int16_t)); break;
  case EM_INT32: STORE_LOOP(int32_t, SAT_TO(int32_t)); break;
  case EM_INT64: STORE_LOOP(int64_t, em_sat_i64); break;
  case EM_BOOL: STORE_LOOP(uint8_t, TO_BOOL); break;
  default: break;
  }
}

#define I64_TO_F(T) (T)

void em_red_store_i64(char *dst, int64_t stride, const int64_t *src, int n, em_dtype dt) {
  switch (dt) {
  case EM_FLOAT32: STORE_LOOP(float, TO_F32); break;
  case EM_FLOAT64: STORE_LOOP(double, I64_TO_F(double)); break;
  case EM_FLOAT16: STORE_LOOP(uint16_t, TO_HALF); break;
  case EM_BFLOAT16: STORE_LOOP(uint16_t, TO_BF16); break;
  case EM_INT8: STORE_LOOP(int8_t, (int8_t)); break;
  case EM_UINT8: STORE_LOOP(uint8_t, (uint8_t)); break;
  case EM_INT16: STORE_LOOP(int16_t, (int16_t)); break;
  case EM_INT32: STORE_LOOP(int32_t, (int32_t)); break;
  case EM_INT64: STORE_LOOP(int64_t, AS_IS); break;
  case EM_BOOL: STORE_LOOP(uint8_t, TO_BOOL); break;
  default: break;
  }
}
