/*
 * attention.c: the definition of scaled_dot_product_attention (DESIGN.md decision 12) and of
 * its fused backward op, which formulas_attention.c calls.
 *
 * Everything but the arithmetic happens here, once for every device:
 *  - argument checks (shapes, dtypes, devices, the causal/mask and head-count rules), with
 *    errors that name the 1-based argument;
 *  - views: query/key/value [..., H, T, E] become [B, H, T, E] views (the batch dims merged
 *    into one where their strides allow, else copied), with a unit stride in the last dim;
 *  - the mask: a boolean mask becomes an additive float32 0/-inf mask of its own shape, a
 *    floating one float32; either is then broadcast to [B, Hq, L, S] as a stride-0 view, so a
 *    [L, S] mask shared by every batch and head is never expanded in memory;
 *  - dtypes: float32/float64 go to the kernel; float16/bfloat16 run in float32 between
 *    recorded casts unless the backend sets attention_half;
 *  - dropout: the Philox stream is reserved from the generator as the random ops do, one
 *    word per score (nn.h, em_attn_geom), so the backward regenerates the same mask;
 *  - empty cases: no key (S = 0) gives zeros with lse = -inf; no query gives an empty output.
 *    The kernels only see Tq, Tk >= 1 and B, Hq >= 1;
 *  - autograd: one node over query, key and value (formulas_attention.c).
 */
#include <math.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "../nn.h"

#define FN "scaled_dot_product_attention"

static bool is_half(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }

/* ---- views ----------------------------------------------------------------------------------- */

/* t [batch..., H, T, D] as a [B, H, T, D] view: the batch dims merged into one (stride 0 when
 * there are none). When they cannot merge (a permuted batch), or unit_last asks for a stride-1
 * last dim that t lacks, t is copied to contiguous memory first. Size-1 dims get the stride
 * of a contiguous layout, which addresses the same elements. A bare view: no autograd. */
static em_tensor *as4(const em_tensor *t, bool unit_last) {
  int nb = t->ndim - 3;
  int64_t B = 1, bstride = 0, prev = -1; /* prev: the last batch dim of size > 1 */
  bool ok = true;
  for (int d = 0; d < nb; d++) {
    B *= t->sizes[d];
    if (t->sizes[d] == 1) continue;
    if (prev >= 0 && t->strides[prev] != t->strides[d] * t->sizes[d]) ok = false;
    prev = d;
  }
  if (prev >= 0) bstride = t->strides[prev];
  const int64_t *ts = t->sizes + nb;
  if (unit_last && ts[2] > 1 && t->strides[t->ndim - 1] != 1) ok = false;
  if (!ok && B * ts[0] * ts[1] * ts[2] > 0) {
    em_tensor *c = em_contiguous(t);
    em_tensor *r = c ? as4(c, unit_last) : NULL;
    em_release(c);
    return r;
  }
  int64_t sizes[4] = {B, ts[0], ts[1], ts[2]};
  int64_t strides[4] = {bstride, t->strides[nb], t->strides[nb + 1], t->strides[nb + 2]};
  int64_t contig[4];
  em_contiguous_strides(4, sizes, contig);
  for (int d = 0; d < 4; d++)
    if (sizes[d] == 1) strides[d] = contig[d];
  return em_tensor_view_of(t, 4, sizes, strides, t->offset);
}

/* The additive float32 mask as a [B, Hq, L, S] view (stride 0 where it broadcasts). A boolean
 * mask becomes 0 where true and -inf where false, at its own shape, before broadcasting. */
static em_tensor *mask4(const em_tensor *mask, const em_tensor *q, int64_t S) {
  em_tensor *f;
  if (mask->dtype_id == EM_BOOL) {
    em_tensor *zero = em_scalar_tensor(0.0, EM_FLOAT32, mask->device_id, 0);
    em_tensor *ninf = em_scalar_tensor(-INFINITY, EM_FLOAT32, mask->device_id, 0);
    f = zero && ninf ? em_where(mask, zero, ninf) : NULL;
    em_release(zero);
    em_release(ninf);
  } else if (mask->dtype_id == EM_FLOAT32) {
    f = em_detach(mask);
  } else {
    f = em_to_dtype(mask, EM_FLOAT32);
  }
  if (f == NULL) return NULL;
  int64_t full[EM_MAX_DIMS];
  memcpy(full, q->sizes, sizeof(int64_t) * (size_t)q->ndim);
  full[q->ndim - 1] = S;
  em_tensor *b = em_broadcast_to(FN, f, q->ndim, full);
  em_release(f);
  em_tensor *r = b ? as4(b, false) : NULL;
  em_release(b);
  return r;
}

/* ---- checks ---------------------------------------------------------------------------------- */

static const char *arg_names[4] = {"query", "key", "value", "attn_mask"};

static int check_tensor(int i, const em_tensor *t) {
  if (t == NULL)
    return em_error("%s: expected argument %d (%s) to be a tensor, got NULL", FN, i + 1,
                    arg_names[i]);
  if (!em_dtypes[t->dtype_id].is_float)
    return em_error("%s: expected argument %d (%s) to be floating point, got %s", FN, i + 1,
                    arg_names[i], em_dtype_name((em_dtype)t->dtype_id));
  if (t->ndim < 3) {
    char b[EM_SHAPE_BUF];
    return em_error("%s: expected argument %d (%s) with at least 3 dims ([..., heads, "
                    "length, features]), got %s", FN, i + 1, arg_names[i],
                    em_shape_str(b, sizeof b, t->ndim, t->sizes));
  }
  return 0;
}

static int shape_error(const char *what, const em_tensor *q, const em_tensor *k,
                       const em_tensor *v) {
  char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF], c[EM_SHAPE_BUF];
  return em_error("%s: %s; got query %s, key %s, value %s", FN, what,
                  em_shape_str(a, sizeof a, q->ndim, q->sizes),
                  em_shape_str(b, sizeof b, k->ndim, k->sizes),
                  em_shape_str(c, sizeof c, v->ndim, v->sizes));
}

/* Checks everything and fills the geometry (all but the dropout stream). */
static int check_args(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                      const em_tensor *mask, double dropout_p, int is_causal, double scale,
                      int enable_gqa, em_attn_geom *g) {
  const em_tensor *ts[4] = {q, k, v, mask};
  for (int i = 0; i < 3; i++)
    if (check_tensor(i, ts[i]) != 0) return -1;
  if (em_check_same_device(FN, 4, ts) != 0) return -1;
  if (k->dtype_id != q->dtype_id || v->dtype_id != q->dtype_id)
    return em_error("%s: expected query, key and value of one dtype, got %s, %s and %s", FN,
                    em_dtype_name((em_dtype)q->dtype_id), em_dtype_name((em_dtype)k->dtype_id),
                    em_dtype_name((em_dtype)v->dtype_id));
  int n = q->ndim;
  if (k->ndim != n || v->ndim != n)
    return shape_error("expected query, key and value of one rank", q, k, v);
  for (int d = 0; d < n - 3; d++)
    if (k->sizes[d] != q->sizes[d] || v->sizes[d] != q->sizes[d])
      return shape_error("expected the same batch dims (before the heads) in query, key and "
                         "value", q, k, v);
  int64_t Hq = q->sizes[n - 3], Hkv = k->sizes[n - 3];
  if (v->sizes[n - 3] != Hkv)
    return shape_error("expected key and value with one head count", q, k, v);
  if (k->sizes[n - 2] != v->sizes[n - 2])
    return shape_error("expected key and value of one length (dim -2)", q, k, v);
  if (k->sizes[n - 1] != q->sizes[n - 1])
    return shape_error("expected query and key of one feature size (dim -1)", q, k, v);
  if (Hq != Hkv) {
    if (!enable_gqa)
      return shape_error("expected query and key/value with one head count (dim -3); pass "
                         "enable_gqa for grouped-query attention", q, k, v);
    if (Hkv == 0 || Hq % Hkv != 0)
      return shape_error("expected the query heads (dim -3) to be a multiple of the key/value "
                         "heads with enable_gqa", q, k, v);
  }
  if (mask) {
    if (mask->dtype_id != EM_BOOL && !em_dtypes[mask->dtype_id].is_float)
      return em_error("%s: expected argument 4 (attn_mask) to be boolean or floating point, "
                      "got %s", FN, em_dtype_name((em_dtype)mask->dtype_id));
    if (is_causal)
      return em_error("%s: expected attn_mask or is_causal, not both (is_causal stands for a "
                      "lower-triangular mask)", FN);
    if (em_grad_enabled() && em_requires_grad(mask))
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: a gradient for a floating "
                               "attn_mask is not supported (detach it)", FN);
  }
  if (!(dropout_p >= 0 && dropout_p <= 1)) /* NaN too */
    return em_error("%s: expected dropout_p between 0 and 1, got %g", FN, dropout_p);
  int64_t E = q->sizes[n - 1];
  if (isnan(scale)) scale = E > 0 ? 1.0 / sqrt((double)E) : 1.0;
  if (!isfinite(scale)) return em_error("%s: expected a finite scale, got %g", FN, scale);
  int64_t B = 1;
  for (int d = 0; d < n - 3; d++) B *= q->sizes[d];
  *g = (em_attn_geom){.B = B, .Hq = Hq, .Hkv = Hkv, .Tq = q->sizes[n - 2],
                      .Tk = k->sizes[n - 2], .D = E, .Dv = v->sizes[n - 1], .scale = scale,
                      .causal = is_causal != 0, .dropout_p = dropout_p};
  return 0;
}

/* ---- the op ---------------------------------------------------------------------------------- */

/* The log-sum-exp rows' dtype: float32, float64 for float64 inputs (nn.h). */
static em_dtype lse_dtype(int dt) { return dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32; }

/* Runs the kernel (or the empty cases) on [B, H, T, D] views. */
static int run_forward(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                       const em_tensor *v, const em_tensor *m, const em_attn_geom *g) {
  if (g->B * g->Hq * g->Tq == 0) return 0;
  if (g->Tk == 0) /* every row masked: zeros, lse -inf */
    return em_zero_(out) || em_fill_(lse, -INFINITY) ? -1 : 0;
  const em_backend *be = em_device_backend(q->device_id);
  EM_NEED_KERNEL(FN, be, attention);
  return be->attention(out, lse, q, k, v, m, g);
}

static em_tensor *attention_run(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                                const em_tensor *mask, em_attn_geom *g) {
  em_dtype dt = (em_dtype)q->dtype_id;
  em_tensor *q4 = as4(q, true), *k4 = as4(k, true), *v4 = as4(v, true);
  em_tensor *m4 = mask ? mask4(mask, q, g->Tk) : NULL;
  int64_t osz[4] = {g->B, g->Hq, g->Tq, g->Dv};
  em_tensor *out4 = em_empty(4, osz, dt, q->device_id);
  em_tensor *lse = em_empty(3, osz, lse_dtype(dt), q->device_id);
  em_tensor *out = NULL;
  int rc = q4 && k4 && v4 && (m4 || !mask) && out4 && lse ? 0 : -1;
  if (rc == 0 && g->dropout_p > 0) {
    uint64_t scores = (uint64_t)(g->B * g->Hq * g->Tq) * (uint64_t)g->Tk;
    g->offset = em_rng_reserve((scores + 3) / 4, &g->seed);
    g->drop_below = (uint32_t)ceil(g->dropout_p * 16777216.0);
  }
  if (rc == 0) rc = run_forward(out4, lse, q4, k4, v4, m4, g);
  if (rc == 0) { /* out in query's layout: [batch..., Hq, L, Ev] */
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    memcpy(sizes, q->sizes, sizeof(int64_t) * (size_t)q->ndim);
    sizes[q->ndim - 1] = g->Dv;
    em_contiguous_strides(q->ndim, sizes, strides);
    out = em_tensor_view_of(out4, q->ndim, sizes, strides, 0);
    rc = out ? 0 : -1;
  }
  const em_tensor *ins[3] = {q, k, v};
  if (rc == 0 && em_ag_should_record(3, ins) &&
      em_ag_record_attention(out, q, k, v, q4, k4, v4, out4, lse, m4, g) != 0)
    rc = -1;
  em_tensor *tmp[6] = {q4, k4, v4, m4, out4, lse};
  for (int i = 0; i < 6; i++) em_release(tmp[i]);
  if (rc != 0) {
    em_error_prefix(FN);
    em_release(out);
    return NULL;
  }
  return out;
}

em_tensor *em_scaled_dot_product_attention(const em_tensor *query, const em_tensor *key,
                                           const em_tensor *value, const em_tensor *attn_mask,
                                           double dropout_p, int is_causal, double scale,
                                           int enable_gqa) {
  EM_AUTOCAST(FN, em_scaled_dot_product_attention(ac_[0], ac_[1], ac_[2], ac_[3], dropout_p,
                                                  is_causal, scale, enable_gqa),
              query, key, value, attn_mask);
  em_attn_geom g;
  if (check_args(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, &g) != 0)
    return NULL;
  const em_backend *be = em_device_backend(query->device_id);
  if (!is_half(query->dtype_id) || be->attention_half)
    return attention_run(query, key, value, attn_mask, &g);
  /* 16-bit without a 16-bit kernel: float32 between recorded casts */
  em_tensor *fq = em_to_dtype(query, EM_FLOAT32), *fk = em_to_dtype(key, EM_FLOAT32);
  em_tensor *fv = em_to_dtype(value, EM_FLOAT32), *r = NULL;
  em_tensor *fo = fq && fk && fv ? attention_run(fq, fk, fv, attn_mask, &g) : NULL;
  if (fo) r = em_to_dtype(fo, (em_dtype)query->dtype_id);
  em_tensor *tmp[4] = {fq, fk, fv, fo};
  for (int i = 0; i < 4; i++) em_release(tmp[i]);
  if (r == NULL) em_error_prefix(FN);
  return r;
}

/* ---- the fused backward ---------------------------------------------------------------------- */

int em_nn_attention_backward(const em_tensor *gout, const em_tensor *q, const em_tensor *k,
                             const em_tensor *v, const em_tensor *out, const em_tensor *lse,
                             const em_tensor *mask, const em_attn_geom *g, em_tensor **gq,
                             em_tensor **gk, em_tensor **gv) {
  const char *fn = FN "_backward";
  em_dtype dt = (em_dtype)q->dtype_id;
  int64_t qs[4] = {g->B, g->Hq, g->Tq, g->D}, ks[4] = {g->B, g->Hkv, g->Tk, g->D};
  int64_t vs[4] = {g->B, g->Hkv, g->Tk, g->Dv};
  *gq = em_empty(4, qs, dt, q->device_id);
  *gk = em_empty(4, ks, dt, q->device_id);
  *gv = em_empty(4, vs, dt, q->device_id);
  em_tensor *go = as4(gout, true);
  int rc = *gq && *gk && *gv && go ? 0 : -1;
  if (rc == 0 && (g->B * g->Hq * g->Tq == 0 || g->Tk == 0)) {
    /* no score: every gradient is zero */
    rc = em_zero_(*gq) || em_zero_(*gk) || em_zero_(*gv) ? -1 : 0;
  } else if (rc == 0) {
    const em_backend *be = em_device_backend(q->device_id);
    rc = be->attention_backward
             ? be->attention_backward(*gq, *gk, *gv, go, q, k, v, out, lse, mask, g)
             : em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn,
                                 be->name);
  }
  em_release(go);
  if (rc != 0) {
    em_tensor **outs[3] = {gq, gk, gv};
    for (int i = 0; i < 3; i++) {
      em_release(*outs[i]);
      *outs[i] = NULL;
    }
  }
  return rc;
}
