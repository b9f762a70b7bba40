/*
 * vk_matmul.c: the gemm slot on Vulkan, out[B,M,N] = beta * out + alpha * a[B,M,K] @ b[B,K,N]
 * (backend.h). Every product op (matmul, mm, bmm, addmm, linear and their backwards) arrives
 * here; the definitions (ops/linalg.c) guarantee B, M, N > 0, out contiguous, a and b of out's
 * dtype with any strides (batch stride 0: one matrix shared by every batch). Operands are 3-D
 * or 4-D ([B1, B2, M, K]: attention's [B, H, T, hd] views); either way the whole batch is the
 * grid's z (kernels/matmul_push.glsl decomposes it), one dispatch per product unless the grid
 * exceeds the device's limits.
 *
 * Kernels:
 *  - kernels/matmul.comp: tiled in shared memory, for float32, float64 and float16/bfloat16
 *    (accumulated in float32, as the CPU does). Operands are read in place whatever their
 *    layout: the host tells the kernel, per operand, which dimension is contiguous and whether
 *    its 4-element chunks are aligned for vector loads (layout()). Transposed views (x @ w:t(),
 *    the backward's a:t() @ g) therefore cost no copy.
 *    Integer dtypes take the same kernel's INT variant: elements widened to 64 bits, products
 *    summed modulo 2^64 and narrowed, like the CPU's loop (so overflow wraps the same way).
 *  - kernels/coopmat2/matmul_cm2.comp and kernels/coopmat/matmul_coop.comp: float16 on tensor
 *    cores (vk_matmul_coop.c), when the build and the device have cooperative matrices;
 *    em_vk_coop_wanted() decides.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"
#include "vk_conv.h"
#include "vk_matmul.h"

/* Tile configurations of matmul.comp: "L" 128 x 128 tiles with 8x8 per invocation, "S" 64 x 64
 * with 4x4. Large tiles do twice the arithmetic per shared-memory read, but a problem needs
 * enough of them to fill the GPU: below LARGE_MIN_TILES tiles of 128 the small ones win by
 * occupancy (a 1024^2 product has 64 large tiles for the 132 SMs of an H100). */
enum { TILE_L = 128, TILE_S = 64, LARGE_MIN_TILES = 192 };

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* EMBER_VK_MATMUL_TILE=L or S forces a tile size (tests reach the large tile with small
 * problems this way); read on every call, which costs nothing next to a dispatch. */
static int tile_for(em_dtype dt, int64_t B, int64_t M, int64_t N) {
  if (dt == EM_FLOAT64 || !em_dtypes[dt].is_float) return TILE_S;
  const char *force = getenv("EMBER_VK_MATMUL_TILE");
  if (force && force[0] == 'L') return TILE_L;
  if (force && force[0] == 'S') return TILE_S;
  int64_t tiles = cdiv(M, TILE_L) * cdiv(N, TILE_L) * B;
  return M >= TILE_L && N >= TILE_L && tiles >= LARGE_MIN_TILES ? TILE_L : TILE_S;
}

/* Shared memory of a variant of kernels/matmul.comp: two tiles of (buffers x BK) rows of
 * BM/4 + 1 vectors of 4 elements. */
static uint32_t shared_bytes(em_dtype dt, int tile) {
  if (tile == TILE_L) return 2 * 2 * 8 * 33 * 16;
  bool wide = dt == EM_FLOAT64 || !em_dtypes[dt].is_float; /* 8-byte elements, one buffer */
  return wide ? 2 * 1 * 16 * 17 * 32 : 2 * 2 * 16 * 17 * 16;
}

bool em_vk_mm_fits_i32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/* How the kernel reads an operand t (a: [.., M, K], b: [.., K, N], 3-D or 4-D). Chunks of
 * `chunk` consecutive elements run along the contiguous dimension (bit 0 set: along the rows,
 * i.e. down a column); bit 1 says they are whole and aligned in every matrix of the batch, so
 * the kernel may load each with one vector load (never with chunk 0). Strides of size-1
 * dimensions are never used and count as anything. */
uint32_t em_vk_mm_layout(const em_tensor *t, int chunk) {
  int64_t rows = t->sizes[t->ndim - 2], cols = t->sizes[t->ndim - 1];
  int64_t rs = rows == 1 ? 0 : t->strides[t->ndim - 2], cs = cols == 1 ? 0 : t->strides[t->ndim - 1];
  int64_t bs1 = em_gemm_outer_stride(t), bs2 = em_gemm_inner_stride(t);
  bool down = cs != 1 && (rs == 1 || cols == 1 ||
                          (rows > 1 && llabs(rs) < llabs(cs)));
  int64_t n = down ? rows : cols, lead = down ? cs : rs, unit = down ? rs : cs;
  bool vec = chunk > 0 && unit == 1 && n % chunk == 0 && lead % chunk == 0 &&
             bs1 % chunk == 0 && bs2 % chunk == 0 && t->offset % chunk == 0;
  return (down ? 1u : 0u) | (vec ? 2u : 0u);
}

static int not_implemented(const vk_device *D, const char *why, const em_tensor *out) {
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "gemm: not implemented on %s for %s (%s)",
                           D->name, em_dtype_name((em_dtype)out->dtype_id), why);
}

/* Fills the push constants common to both kernels; -1 when a stride or offset does not fit
 * the kernels' 32-bit index arithmetic. */
int em_vk_mm_push_common(mm_push *p, const em_tensor *out, const em_tensor *a,
                         const em_tensor *b) {
  int r = out->ndim - 2, c = out->ndim - 1; /* the matrix dims (3-D or 4-D operands) */
  const int64_t v[] = {a->strides[r], a->strides[c], b->strides[r], b->strides[c],
                       em_gemm_outer_stride(a), em_gemm_inner_stride(a),
                       em_gemm_outer_stride(b), em_gemm_inner_stride(b),
                       out->sizes[r] * out->sizes[c], out->sizes[r], out->sizes[c], a->sizes[c],
                       em_gemm_inner(out), em_gemm_batches(out), a->offset, b->offset,
                       out->offset};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (!em_vk_mm_fits_i32(v[i])) return -1;
  p->M = (uint32_t)out->sizes[r];
  p->N = (uint32_t)out->sizes[c];
  p->K = (uint32_t)a->sizes[c];
  p->a_base = (uint32_t)a->offset;
  p->b_base = (uint32_t)b->offset;
  p->o_base = (uint32_t)out->offset;
  p->a_sm = (int32_t)a->strides[r];
  p->a_sk = (int32_t)a->strides[c];
  p->b_sk = (int32_t)b->strides[r];
  p->b_sn = (int32_t)b->strides[c];
  p->a_sb1 = (int32_t)em_gemm_outer_stride(a);
  p->a_sb2 = (int32_t)em_gemm_inner_stride(a);
  p->b_sb1 = (int32_t)em_gemm_outer_stride(b);
  p->b_sb2 = (int32_t)em_gemm_inner_stride(b);
  p->nb2 = (uint32_t)em_gemm_inner(out);
  p->o_sb = (uint32_t)(out->sizes[r] * out->sizes[c]);
  return 0;
}

/* Records a grid of total[0] x total[1] x total[2] workgroups (tiles along N, M and the batch),
 * split into several launches where it exceeds the device's limits; before each launch the
 * push constants *n0, *m0 and *batch0 (pointers into L->push) say where it starts. Shared by
 * every matmul kernel, whose push constants differ. */
int em_vk_tile_grid(vk_device *D, vk_launch *L, const int64_t total[3], uint32_t *n0,
                    uint32_t *m0, uint32_t *batch0) {
  const uint32_t *lim = D->props.limits.maxComputeWorkGroupCount;
  for (int64_t z = 0; z < total[2]; z += lim[2])
    for (int64_t y = 0; y < total[1]; y += lim[1])
      for (int64_t x = 0; x < total[0]; x += lim[0]) {
        int64_t at[3] = {x, y, z};
        for (int d = 0; d < 3; d++)
          L->groups[d] = (uint32_t)(total[d] - at[d] < lim[d] ? total[d] - at[d] : lim[d]);
        *n0 = (uint32_t)x;
        *m0 = (uint32_t)y;
        *batch0 = (uint32_t)z;
        if (em_vk_launch(D, L) != 0) return -1;
      }
  return 0;
}

/* The grid of `tile` x `tile` output tiles of the tiled kernel. */
int em_vk_mm_grid(vk_device *D, vk_launch *L, mm_push *p, int64_t B, int64_t M, int64_t N,
                  int tile) {
  int64_t total[3] = {cdiv(N, tile), cdiv(M, tile), B};
  return em_vk_tile_grid(D, L, total, &p->n0, &p->m0, &p->batch0);
}

/* Whether a product gets a pipeline specialized to its operands' layouts (vk_pipeline.c's
 * policy): always on GPUs; on CPU-type drivers, where each specialization costs a compilation
 * of 50-500 ms, only for products large enough to repay it. */
enum { SPECIALIZE_WORK = 1 << 24 };
static bool specialize(const vk_device *D, double work) {
  return D->specialize && (D->specialize_from == 0 || work >= SPECIALIZE_WORK);
}

/* As the CPU's em_sat_i64: NaN gives 0, out-of-range values saturate. */
static int64_t sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* Split K: a float32 product of one matrix with few output tiles and a long K (a Linear
 * layer's forward at small batch: 256 x 1024 outputs over K = 3136 are 64 small tiles for the
 * 132 multiprocessors of an H100) spreads K over workgroups, about SPLIT_TARGET of them in
 * all, each with at least SPLIT_MIN_K of K. Each split writes its partial product to a scratch
 * tensor, and conv_sum.comp adds them up in split order (deterministic, no atomics) with
 * alpha and beta. Returns the K range per split (a multiple of 16, so of every tile's BK), or
 * 0 for no split. */
enum { SPLIT_TARGET = 256, SPLIT_MIN_K = 256, SPLIT_MAX = 64 };
static int64_t split_k(const em_tensor *out, const em_tensor *a, int64_t *splits) {
  int64_t B = em_gemm_batches(out), M = MM_ROWS(out), N = MM_COLS(out), K = MM_COLS(a);
  *splits = 1;
  if (out->dtype_id != EM_FLOAT32 || B != 1 || M == 0 || N == 0) return 0;
  int tile = tile_for(EM_FLOAT32, B, M, N);
  int64_t tiles = cdiv(M, tile) * cdiv(N, tile);
  int64_t want = cdiv(SPLIT_TARGET, tiles), most = K / SPLIT_MIN_K;
  int64_t s = want < most ? want : most;
  if (s > SPLIT_MAX) s = SPLIT_MAX;
  if (s < 2 || s * M * N > INT32_MAX) return 0;
  int64_t ksplit = cdiv(cdiv(K, 16), s) * 16;
  *splits = cdiv(K, ksplit);
  return *splits > 1 ? ksplit : 0;
}

/* part: the split products' scratch ([splits, M, N] float32) when ksplit > 0. c: the added
 * term's tensor (gemm_add: float32 or 16-bit, no split), its offset and strides in cs. */
static int tiled(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                 double alpha, double beta, em_tensor *part, int64_t ksplit, int64_t splits,
                 const em_tensor *c, const int32_t *cs) {
  em_dtype dt = (em_dtype)out->dtype_id;
  int64_t B = em_gemm_batches(out), M = MM_ROWS(out), N = MM_COLS(out), K = MM_COLS(a);
  mm_push p = {0};
  if (em_vk_mm_push_common(&p, out, a, b) != 0)
    return not_implemented(D, "a stride or offset beyond 2^31 elements", out);
  int tile = tile_for(dt, B, M, N);
  uint32_t limit = D->props.limits.maxComputeSharedMemorySize;
  if (tile == TILE_L && shared_bytes(dt, tile) > limit) tile = TILE_S;
  if (shared_bytes(dt, tile) > limit)
    return not_implemented(D, "the device has too little shared memory for the kernel", out);
  bool integer = !em_dtypes[dt].is_float;
  bool wide = dt == EM_FLOAT64 || integer, half = dt == EM_FLOAT16 || dt == EM_BFLOAT16;
  int chunk = wide ? 0 : 4; /* float64 and integers never load vectors */
  uint32_t amode = em_vk_mm_layout(a, chunk), bmode = em_vk_mm_layout(b, chunk);
  /* whole aligned output words: vec4 rows for float32, 16-bit pairs for the half types */
  bool words = half ? N % 2 == 0 && out->offset % 2 == 0
                    : !wide && N % 4 == 0 && out->offset % 4 == 0;
  uint32_t flags = (dt == EM_BFLOAT16 ? 1u : 0u) | (words ? 2u : 0u) |
                   (integer ? (uint32_t)dt << 4 : 0u) | (c ? 8u : 0u);
  if (c) {
    p.c_base = (uint32_t)cs[0], p.c_sb = cs[1], p.c_rs = cs[2], p.c_cs = cs[3];
  }
  if (integer) { /* the CPU's conversion: saturated, then modulo 2^64 */
    p.s.u[0] = (uint64_t)sat_i64(alpha);
    p.s.u[1] = (uint64_t)sat_i64(beta);
  } else if (wide) {
    p.s.d[0] = alpha;
    p.s.d[1] = beta;
  } else {
    p.s.f[0] = (float)alpha;
    p.s.f[1] = (float)beta;
  }
  /* string literals: vk_pipeline.c memoizes module names by address */
  const char *module = integer ? "matmul_INT_S"
                       : wide  ? "matmul_F64_S"
                       : half ? (tile == TILE_L ? "matmul_H16_L" : "matmul_H16_S")
                              : (tile == TILE_L ? "matmul_F32_L" : "matmul_F32_S");
  p.a_mode = amode;
  p.b_mode = bmode;
  p.flags = flags;
  vk_launch L = {
    .module = module,
    .push = &p,
    .push_size = c ? MM_PUSH_C : wide ? MM_PUSH_WIDE : MM_PUSH_F32,
    .spec = {amode, bmode, flags, ~0u},
    .ops = {out, a, b, c},
    .writes = 1u,
  };
  if (!specialize(D, (double)B * (double)M * (double)N * (double)K)) L.spec[0] = L.spec[1] = L.spec[2] = ~0u;
  if (ksplit > 0) { /* partial product z of the K range z * ksplit on goes to part[z] */
    p.ksplit = (uint32_t)ksplit; /* one matrix (B == 1): batch strides 0, nb2 1 */
    p.o_base = 0;
    p.o_sb = (uint32_t)(M * N);
    p.s.f[0] = 1.0f;
    p.s.f[1] = 0.0f;
    L.ops[0] = part;
    return em_vk_mm_grid(D, &L, &p, splits, M, N, tile);
  }
  return em_vk_mm_grid(D, &L, &p, B, M, N, tile);
}

int em_vk_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
               double beta) {
  vk_device *D = em_vk_device(out->device_id);
  em_dtype dt = (em_dtype)out->dtype_id;
  if (dt == EM_FLOAT64 && !(D->features & EM_FEATURE_FLOAT64))
    return not_implemented(D, "the device lacks shaderFloat64", out);
  if (em_numel(out) == 0) return 0;
  if (MM_COLS(a) == 0 && beta == 0) return em_vk_fill(out, 0.0);
  int64_t splits, ksplit = split_k(out, a, &splits);
  em_tensor *part = NULL;
  if (ksplit > 0) { /* allocated before taking the lock, which the allocator takes too */
    int64_t n = splits * MM_ROWS(out) * MM_COLS(out);
    part = em_empty(1, &n, EM_FLOAT32, out->device_id);
    if (part == NULL) return -1;
  }
  pthread_mutex_lock(&D->lock);
  bool coop = em_vk_coop_wanted(D, out, a, b); /* never float32, so never split */
  int rc = coop ? em_vk_coop_gemm(D, out, a, b, alpha, beta)
                : tiled(D, out, a, b, alpha, beta, part, ksplit, splits, NULL, NULL);
  pthread_mutex_unlock(&D->lock);
  if (rc == 0 && part != NULL && !coop)
    rc = em_vk_sum_splits(out, part, (uint32_t)splits, MM_ROWS(out) * MM_COLS(out), alpha, beta);
  em_release(part);
  return rc;
}

/* The gemm_add slot: out = beta * c + alpha * a @ b in one dispatch (addmm, baddbmm, Linear's
 * bias) for float32 and 16-bit products on the tiled kernel and the coopmat2 kernel, c read
 * with its own strides. Not taken (1: the definition copies c into out and calls gemm) for
 * float64 and integers (their push constants have no room), K = 0, split-K products, the
 * subgroup-scope tensor-core kernels, and offsets or strides beyond 31 bits. */
int em_vk_gemm_add(em_tensor *out, const em_tensor *a, const em_tensor *b, const em_tensor *c,
                   double alpha, double beta) {
  vk_device *D = em_vk_device(out->device_id);
  em_dtype dt = (em_dtype)out->dtype_id;
  if (!(dt == EM_FLOAT32 || dt == EM_FLOAT16 || dt == EM_BFLOAT16) || c->dtype_id != (int)dt ||
      c->ndim != 3 || out->ndim != 3 || em_numel(out) == 0 || MM_COLS(a) == 0)
    return 1;
  int64_t splits;
  if (split_k(out, a, &splits) > 0) return 1;
  int64_t v[4] = {c->offset, c->sizes[0] > 1 ? c->strides[0] : 0,
                  c->sizes[1] > 1 ? c->strides[1] : 0, c->sizes[2] > 1 ? c->strides[2] : 0};
  int32_t cs[4];
  for (int i = 0; i < 4; i++) {
    if (v[i] < 0 || v[i] > INT32_MAX) return 1;
    cs[i] = (int32_t)v[i];
  }
  pthread_mutex_lock(&D->lock);
  int rc;
  if (em_vk_coop_wanted(D, out, a, b)) rc = em_vk_coop_gemm_c(D, out, a, b, c, alpha, beta);
  else rc = tiled(D, out, a, b, alpha, beta, NULL, 0, 1, c, cs);
  pthread_mutex_unlock(&D->lock);
  return rc;
}
