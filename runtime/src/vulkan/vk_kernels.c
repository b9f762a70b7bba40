/*
 * vk_kernels.c: the kernel-table functions of the Vulkan device (backend.h states what each
 * slot receives: same-shaped operands, inputs broadcast and cast to the compute dtype).
 *
 * Each call turns its operands into push constants (kernels/common.glsl): dimensions of size 1
 * are dropped and neighbouring dimensions that are contiguous for every operand merged, so a
 * contiguous op, or one with a broadcast scalar, becomes a single dimension. The kernels take up
 * to 4 dimensions (128 bytes of push constants hold no more strides for 4 operands); the rare
 * view that keeps more is split: one dispatch per index of the outer dimensions.
 *
 * Which kernel: copy.comp moves bytes (copies, fills, where) for every dtype; cast.comp converts
 * and generates ranges; pointwise.comp computes, one pipeline per compute class (F32 for
 * float32/float16/bfloat16, I32 for the narrow integers and bool, F64, I64). A device without
 * shaderFloat64 has no float64 kernels: those ops raise "not implemented".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"

/* Op codes beyond the em_unary_op / 32 + em_binary_op ranges (kernels/pointwise.comp). */
enum { OP_ADD_ALPHA = 57, OP_CLAMP = 64, OP_LERP = 65, OP_ADDCMUL = 66, OP_ADDCDIV = 67 };
enum { FLAG_HAS_LO = 1 << 16, FLAG_HAS_HI = 1 << 17, FLAG_PACKED = 1 << 20, FLAG_VEC4 = 1 << 21,
       FLAG_IMM1 = 1 << 22 };
enum { COPY_OP_COPY, COPY_OP_FILL, COPY_OP_WHERE };
enum { CAST_OP_CAST, CAST_OP_ARANGE, CAST_OP_LINSPACE, CAST_OP_ARANGE_INT };

/* Float to integer without undefined behaviour: NaN gives 0, out-of-range saturates. */
static int64_t sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* ---- geometry -------------------------------------------------------------------------------- */

typedef struct geometry {
  int ndim;                           /* after coalescing, outermost first */
  int64_t size[EM_MAX_DIMS];
  int64_t stride[4][EM_MAX_DIMS];
  int64_t offset[4];
} geometry;

/* Operands share ts[0]'s shape; NULL operands get stride 0 (they are not read). */
static void build_geometry(geometry *g, const em_tensor *const *ts, int nops) {
  g->ndim = 0;
  for (int k = 0; k < 4; k++) g->offset[k] = k < nops && ts[k] ? ts[k]->offset : 0;
  const em_tensor *out = ts[0];
  for (int d = 0; d < out->ndim; d++) {
    if (out->sizes[d] == 1) continue;
    int n = g->ndim;
    for (int k = 0; k < 4; k++) g->stride[k][n] = k < nops && ts[k] ? ts[k]->strides[d] : 0;
    g->size[n] = out->sizes[d];
    /* Merge with the previous dimension when every operand steps over it contiguously. */
    bool merge = n > 0;
    for (int k = 0; k < 4 && merge; k++)
      merge = g->stride[k][n - 1] == g->stride[k][n] * g->size[n];
    if (merge) {
      g->size[n - 1] *= g->size[n];
      for (int k = 0; k < 4; k++) g->stride[k][n - 1] = g->stride[k][n];
    } else {
      g->ndim++;
    }
  }
  if (g->ndim == 0) { /* a single element */
    g->ndim = 1;
    g->size[0] = 1;
    for (int k = 0; k < 4; k++) g->stride[k][0] = 0;
  }
}

/* The vec4 path of pointwise.comp (its FLAG_VEC4): 4 elements per invocation with 128-bit
 * loads and stores, for the common case of float32 (or int32) operands that are, after
 * coalescing, one contiguous dimension: the output and each input contiguous and 16-byte
 * aligned in their buffer, or an input a stride-0 scalar. Anything else (a misaligned view such
 * as x:narrow(1, 2, n), other dtypes, bool results, strided views) takes the general kernel. */
static bool vec4_fits(vk_kernel_id k, const geometry *g, const em_tensor *const *ts, int nops) {
  if ((k != VK_KERNEL_PW_F32 && k != VK_KERNEL_PW_I32) || g->ndim != 1) return false;
  em_dtype want = k == VK_KERNEL_PW_F32 ? EM_FLOAT32 : EM_INT32;
  for (int q = 0; q < nops; q++) {
    if (ts[q] == NULL) continue;
    if ((em_dtype)ts[q]->dtype_id != want) return false;
    int64_t stride = g->stride[q][0];
    if (stride == 0 && q > 0) continue; /* a broadcast scalar: read once */
    if (stride != 1 && !(q == 0 && g->size[0] == 1)) return false;
    const vk_block *b = ts[q]->storage->backend_ctx;
    if ((b->offset + (uint64_t)g->offset[q] * 4) % 16 != 0 || b->offset % 16 != 0) return false;
  }
  return true;
}

/* The vec4 path's grid: a grid-stride loop over at most this many workgroups of 256. On a GPU
 * the dispatch limit (65535: four quads per invocation for 1 GiB), which measured best on an
 * H100 (x + y at 2.83 TB/s against 2.64 with 2048 groups); on a CPU-type driver, where each
 * workgroup costs a function call, 2048. EMBER_VK_VEC4_GROUPS overrides it (tuning). */
static uint32_t vec4_max_groups(const vk_device *D) {
  static uint32_t forced_once = ~0u; /* relaxed atomics: every thread computes the same */
  uint32_t forced = __atomic_load_n(&forced_once, __ATOMIC_RELAXED);
  if (forced == ~0u) {
    const char *e = getenv("EMBER_VK_VEC4_GROUPS");
    long v = e ? strtol(e, NULL, 10) : 0;
    forced = v > 0 && v <= (1l << 20) ? (uint32_t)v : 0; /* the kernels step 3 grids at once */
    __atomic_store_n(&forced_once, forced, __ATOMIC_RELAXED);
  }
  if (forced) return forced;
  return D->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 2048 : 65535;
}

static int too_large(const vk_device *D, const char *fn) {
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                           "%s: not implemented on %s for more than 2^32 elements or strides "
                           "beyond 2^31", fn, D->name);
}

static void put_imm(vk_params *p, vk_kernel_id k, int q, const em_tensor *t);

/* Records the dispatches of kernel k over the geometry; p holds op, fmt and args. imm[q],
 * when set, is a host scalar standing for operand q (ts[q] is then NULL). */
static int run(vk_device *D, const char *fn, vk_kernel_id k, vk_params *p,
               const em_tensor *const *ts, int nops, const em_tensor *const *imm) {
  geometry g;
  build_geometry(&g, ts, nops);
  int inner = g.ndim < 4 ? g.ndim : 4, outer = g.ndim - inner;
  int64_t n = 1;
  for (int d = 0; d < g.ndim; d++) {
    if (d >= outer) n *= g.size[d];
    for (int q = 0; q < 4; q++)
      if (g.stride[q][d] > INT32_MAX || g.stride[q][d] < -INT32_MAX) return too_large(D, fn);
  }
  if (n > UINT32_MAX) return too_large(D, fn);
  if (n == 0) return 0;
  p->n = (uint32_t)n;
  p->ndim = (uint32_t)inner;
  for (int d = 0; d < 4; d++) {
    int src = g.ndim - 1 - d; /* innermost first */
    p->size[d] = d < inner ? (uint32_t)g.size[src] : 1;
    for (int q = 0; q < nops; q++) /* beyond nops, stride[] may carry arguments (linspace) */
      p->stride[4 * q + d] = d < inner ? (int32_t)g.stride[q][src] : 0;
  }
  for (int q = 1; q < nops; q++)
    if (imm[q]) put_imm(p, k, q, imm[q]);
  /* 1- and 2-byte outputs laid out in iteration order are stored a word at a time. */
  if (em_dtypes[ts[0]->dtype_id].size < 4) {
    bool dense = true;
    int64_t expect = 1;
    for (int d = 0; d < inner && dense; d++) {
      dense = p->stride[d] == expect;
      expect *= p->size[d];
    }
    if (dense) p->fmt |= FLAG_PACKED;
  }
  /* The vec4 path reads the element count from size[0] (already n for one dimension); p->n
   * then only sizes the grid (em_vk_dispatch launches ceil(p->n / 256) workgroups). */
  if (outer == 0 && vec4_fits(k, &g, ts, nops)) {
    uint64_t quads = ((uint64_t)n + 3) / 4;
    p->fmt |= FLAG_VEC4;
    p->n = (uint32_t)(quads < vec4_max_groups(D) * 256ull ? quads : vec4_max_groups(D) * 256ull);
  }
  /* One dispatch per index of the outer dimensions (none when ndim <= 4). */
  int64_t index[EM_MAX_DIMS] = {0};
  for (;;) {
    for (int q = 0; q < 4; q++) {
      int64_t off = g.offset[q];
      for (int d = 0; d < outer; d++) off += index[d] * g.stride[q][d];
      if (off < 0 || off > UINT32_MAX) return too_large(D, fn);
      p->base[q] = (uint32_t)off;
    }
    if (em_vk_dispatch(D, k, p, ts, nops) != 0) return -1;
    int d = outer - 1;
    while (d >= 0 && ++index[d] == g.size[d]) index[d--] = 0;
    if (d < 0) return 0;
  }
}

static uint32_t formats(const em_tensor *const *ts, int nops) {
  uint32_t f = 0;
  for (int k = 0; k < nops; k++)
    if (ts[k]) f |= (uint32_t)ts[k]->dtype_id << (4 * k);
  return f;
}

/* A host scalar (backend.h, host_scalars): a stride-0 view of a CPU cell holding one value of
 * the compute dtype, standing for a scalar operand. */
static bool is_host_scalar(const em_tensor *t) {
  return t != NULL && t->storage->device_id != t->device_id;
}

/* Operand q's value as an immediate in the class's encoding (pointwise.comp's imm_value). */
static void put_imm(vk_params *p, vk_kernel_id k, int q, const em_tensor *t) {
  const char *src = (const char *)t->storage->data + t->offset * (int64_t)em_dtypes[t->dtype_id].size;
  uint64_t bits = 0;
  if (k == VK_KERNEL_PW_F32) {
    float f = (float)em_load_as_double(src, (em_dtype)t->dtype_id);
    memcpy(&bits, &f, 4);
  } else if (k == VK_KERNEL_PW_F64) {
    double d = em_load_as_double(src, (em_dtype)t->dtype_id);
    memcpy(&bits, &d, 8);
  } else if (k == VK_KERNEL_PW_I32) {
    uint32_t i = (uint32_t)em_load_as_int64(src, (em_dtype)t->dtype_id);
    bits = i;
  } else {
    int64_t i = em_load_as_int64(src, (em_dtype)t->dtype_id);
    memcpy(&bits, &i, 8);
  }
  memcpy(&p->stride[4 * q + 2], &bits, 8);
  p->fmt |= (uint32_t)FLAG_IMM1 << (q - 1);
}

static bool pointwise_kernel(vk_kernel_id k) {
  return k == VK_KERNEL_PW_F32 || k == VK_KERNEL_PW_I32 || k == VK_KERNEL_PW_F64 ||
         k == VK_KERNEL_PW_I64;
}

/* Locks the operands' device around the dispatches. Host scalars become immediates for the
 * pointwise kernels, and one-element device tensors for the others (copy's where). */
static int launch(const char *fn, vk_kernel_id k, vk_params *p, const em_tensor *const *ts,
                  int nops) {
  vk_device *D = em_vk_device(ts[0]->device_id);
  if (!em_vk_kernel_supported(D, k))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "%s: not implemented on %s for float64 (the device lacks "
                             "shaderFloat64)", fn, D->name);
  p->fmt |= formats(ts, nops);
  const em_tensor *dev_ts[4] = {NULL}, *imm[4] = {NULL};
  em_tensor views[4];
  em_tensor *owned[4] = {NULL};
  int rc = 0;
  for (int q = 0; q < nops; q++) {
    dev_ts[q] = ts[q];
    if (q == 0 || !is_host_scalar(ts[q])) continue;
    if (pointwise_kernel(k)) {
      imm[q] = ts[q];
      dev_ts[q] = NULL;
      continue;
    }
    const em_tensor *t = ts[q];
    const char *src = (const char *)t->storage->data + t->offset * (int64_t)em_dtypes[t->dtype_id].size;
    owned[q] = em_scalar_tensor(em_load_as_double(src, (em_dtype)t->dtype_id), (em_dtype)t->dtype_id,
                                t->device_id, 0);
    if (owned[q] == NULL) {
      rc = -1;
      break;
    }
    em_header_copy(&views[q], t);
    views[q].storage = owned[q]->storage;
    views[q].offset = owned[q]->offset;
    dev_ts[q] = &views[q];
  }
  if (rc == 0) {
    pthread_mutex_lock(&D->lock);
    rc = run(D, fn, k, p, dev_ts, nops, imm);
    pthread_mutex_unlock(&D->lock);
  }
  for (int q = 0; q < 4; q++) em_release(owned[q]);
  return rc;
}

static int not_implemented(const char *fn, const em_tensor *t) {
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for %s", fn,
                           em_device_name(t->device_id), em_dtype_name((em_dtype)t->dtype_id));
}

/* ---- compute classes ------------------------------------------------------------------------- */

static vk_kernel_id class_of(em_dtype d) {
  switch (d) {
  case EM_FLOAT32: case EM_FLOAT16: case EM_BFLOAT16: return VK_KERNEL_PW_F32;
  case EM_FLOAT64: return VK_KERNEL_PW_F64;
  case EM_INT64: return VK_KERNEL_PW_I64;
  default: return VK_KERNEL_PW_I32;
  }
}

/* A scalar argument in the class's encoding (pointwise.comp's scalar_arg). */
static void put_scalar(vk_params *p, vk_kernel_id k, double v) {
  if (k == VK_KERNEL_PW_F32) {
    float f = (float)v;
    memcpy(&p->arg[0], &f, 4);
  } else if (k == VK_KERNEL_PW_F64) {
    memcpy(&p->arg[0], &v, 8);
  } else {
    int64_t i = sat_i64(v);
    memcpy(&p->arg[0], &i, 8);
  }
}

/* ---- the slots --------------------------------------------------------------------------------- */

/* Whether t's elements fill [offset, offset + numel) of its storage in row-major order. */
static bool dense_rows(const em_tensor *t) { return em_is_contiguous(t) != 0; }

/* Whether the device is a CPU-type driver (lavapipe), where transfers are memcpys. */
static bool cpu_type(const vk_device *D) {
  return D->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU &&
         !(em_vk_test_hooks() & VK_TEST_GPU_COPIES);
}

/* Same-dtype copies between dense, non-overlapping ranges: on a CPU-type driver a buffer copy,
 * which is a memcpy there (measured on lavapipe: 3 ms instead of 45 for 32 MiB); on a GPU the
 * copy kernel's vec4 path when both ranges are 16-byte aligned and whole words (the copy engine
 * moved 0.8 TB/s on an H100, the kernel three times that). Returns 1 when recorded, 0 when the
 * general kernel must do it, -1 on error. */
static int copy_as_transfer(em_tensor *dst, const em_tensor *src) {
  if (!dense_rows(dst) || !dense_rows(src)) return 0;
  vk_device *D = em_vk_device(dst->device_id);
  vk_block *bd = dst->storage->backend_ctx, *bs = src->storage->backend_ctx;
  size_t es = em_dtypes[dst->dtype_id].size;
  uint64_t n = (uint64_t)em_numel(dst) * es;
  uint64_t od = bd->offset + (uint64_t)dst->offset * es, os = bs->offset + (uint64_t)src->offset * es;
  if (bd->slab == bs->slab && od < os + n && os < od + n) return 0; /* overlapping */
  if (!cpu_type(D)) {
    uint64_t rd = (uint64_t)dst->offset * es, rs = (uint64_t)src->offset * es;
    if (rd % 16 != 0 || rs % 16 != 0 || n % 4 != 0 || n / 4 > UINT32_MAX) return 0;
    vk_params p = {0};
    p.op = COPY_OP_COPY;
    p.fmt = FLAG_VEC4 | formats((const em_tensor *const[]){dst, src}, 2);
    p.ndim = 1;
    p.size[0] = (uint32_t)(n / 4);
    p.base[0] = (uint32_t)(rd / 16);
    p.base[1] = (uint32_t)(rs / 16);
    uint64_t quads = (n / 4 + 3) / 4;
    p.n = (uint32_t)(quads < vec4_max_groups(D) * 256ull ? quads : vec4_max_groups(D) * 256ull);
    const em_tensor *ts[2] = {dst, src};
    pthread_mutex_lock(&D->lock);
    int rc = em_vk_dispatch(D, VK_KERNEL_COPY, &p, ts, 2);
    pthread_mutex_unlock(&D->lock);
    return rc == 0 ? 1 : -1;
  }
  pthread_mutex_lock(&D->lock);
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd != NULL) {
    vk_block *r[1] = {bs}, *w[1] = {bd};
    em_vk_hazards(D, cmd, r, 1, w, 1);
    VkBufferCopy region = {os, od, n};
    D->fn.vkCmdCopyBuffer(cmd, bs->slab->buffer, bd->slab->buffer, 1, &region);
  }
  int rc = cmd ? em_vk_count_dispatch(D) : -1;
  pthread_mutex_unlock(&D->lock);
  return rc == 0 ? 1 : -1;
}

/* The element range [lo, hi] t spans in its storage; false when t has no elements. */
static bool elem_span(const em_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t a = t->offset, b = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) return false;
    int64_t ext = (t->sizes[d] - 1) * t->strides[d];
    if (ext < 0) a += ext;
    else b += ext;
  }
  *lo = a;
  *hi = b;
  return true;
}

/* dst and src are different views of overlapping memory (x[{{2, n}}]:copy_(x[{{1, n - 1}}])):
 * the CPU copies in order, a GPU in parallel, so src goes through a temporary first. */
static bool overlapping_views(const em_tensor *dst, const em_tensor *src) {
  int64_t a0, a1, b0, b1;
  if (dst->storage != src->storage || !elem_span(dst, &a0, &a1) || !elem_span(src, &b0, &b1))
    return false;
  if (a1 < b0 || b1 < a0) return false;
  bool same = dst->offset == src->offset && dst->ndim == src->ndim;
  for (int d = 0; d < dst->ndim && same; d++)
    same = dst->sizes[d] == src->sizes[d] && (dst->strides[d] == src->strides[d] || dst->sizes[d] == 1);
  return !same;
}

int em_vk_copy(em_tensor *dst, const em_tensor *src) {
  const em_tensor *ts[2] = {dst, src};
  vk_params p = {0};
  if (dst->dtype_id == src->dtype_id && overlapping_views(dst, src)) {
    em_tensor *tmp = em_empty(src->ndim, src->sizes, (em_dtype)src->dtype_id, src->device_id);
    int rc = tmp ? em_vk_copy(tmp, src) : -1;
    if (rc == 0) rc = em_vk_copy(dst, tmp);
    em_release(tmp);
    return rc;
  }
  if (dst->dtype_id == src->dtype_id) {
    int done = copy_as_transfer(dst, src);
    if (done != 0) return done < 0 ? -1 : 0;
    p.op = COPY_OP_COPY;
    return launch("copy_", VK_KERNEL_COPY, &p, ts, 2);
  }
  p.op = CAST_OP_CAST;
  bool f64 = dst->dtype_id == EM_FLOAT64 || src->dtype_id == EM_FLOAT64;
  return launch("to", f64 ? VK_KERNEL_CAST_F64 : VK_KERNEL_CAST, &p, ts, 2);
}

/* A fill of a dense, word-aligned range whose element bytes repeat every 4 bytes (zeros, and
 * any 1-, 2- or 4-byte value) is vkCmdFillBuffer. Returns as copy_as_transfer. */
static int fill_as_transfer(em_tensor *dst, uint64_t pattern) {
  size_t es = em_dtypes[dst->dtype_id].size;
  uint32_t word;
  if (es == 1) word = (uint32_t)(pattern & 0xff) * 0x01010101u;
  else if (es == 2) word = (uint32_t)(pattern & 0xffff) * 0x00010001u;
  else if (es == 4 || (pattern >> 32) == (pattern & 0xffffffffu)) word = (uint32_t)pattern;
  else return 0;
  vk_block *b = dst->storage->backend_ctx;
  uint64_t off = b->offset + (uint64_t)dst->offset * es, n = (uint64_t)em_numel(dst) * es;
  if (!dense_rows(dst) || off % 4 != 0 || n % 4 != 0) return 0;
  vk_device *D = em_vk_device(dst->device_id);
  pthread_mutex_lock(&D->lock);
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd != NULL) {
    vk_block *w[1] = {b};
    em_vk_hazards(D, cmd, NULL, 0, w, 1);
    D->fn.vkCmdFillBuffer(cmd, b->slab->buffer, off, n, word);
  }
  int rc = cmd ? em_vk_count_dispatch(D) : -1;
  pthread_mutex_unlock(&D->lock);
  return rc == 0 ? 1 : -1;
}

int em_vk_fill(em_tensor *dst, double value) {
  vk_params p = {0};
  p.op = COPY_OP_FILL;
  uint64_t pattern = 0;
  em_store_from_double(&pattern, (em_dtype)dst->dtype_id, value);
  int done = fill_as_transfer(dst, pattern);
  if (done != 0) return done < 0 ? -1 : 0;
  memcpy(&p.arg[0], &pattern, 8);
  const em_tensor *ts[1] = {dst};
  return launch("fill_", VK_KERNEL_COPY, &p, ts, 1);
}

static bool integral(double v) { return isfinite(v) && v == floor(v) && fabs(v) < 9.0e15; }

/* start and step (and end for linspace) in the cast kernel's encoding. */
static void put_range(vk_params *p, vk_kernel_id k, double start, double step, double end) {
  if (k == VK_KERNEL_CAST_F64) {
    memcpy(&p->arg[0], &start, 8);
    memcpy(&p->arg[2], &step, 8);
    memcpy(&p->stride[8], &end, 8);
  } else {
    float s = (float)start, t = (float)step, e = (float)end;
    memcpy(&p->arg[0], &s, 4);
    memcpy(&p->arg[2], &t, 4);
    memcpy(&p->stride[8], &e, 4);
  }
}

int em_vk_arange(em_tensor *out, double start, double step) {
  vk_device *D = em_vk_device(out->device_id);
  vk_params p = {0};
  const em_tensor *ts[1] = {out};
  int64_t n = out->sizes[0];
  if (!em_dtypes[out->dtype_id].is_float && integral(start) && integral(step) &&
      integral(start + step * (double)n)) {
    /* Exact in int64, as the CPU's double arithmetic is for such values. */
    p.op = CAST_OP_ARANGE_INT;
    int64_t s = (int64_t)start, t = (int64_t)step;
    memcpy(&p.arg[0], &s, 8);
    memcpy(&p.arg[2], &t, 8);
    return launch("arange", VK_KERNEL_CAST, &p, ts, 1);
  }
  /* In double where the device has it (the CPU computes start + i * step in double). */
  vk_kernel_id k = (D->features & EM_FEATURE_FLOAT64) ? VK_KERNEL_CAST_F64 : VK_KERNEL_CAST;
  p.op = CAST_OP_ARANGE;
  put_range(&p, k, start, step, 0);
  return launch("arange", k, &p, ts, 1);
}

int em_vk_linspace(em_tensor *out, double start, double end) {
  vk_device *D = em_vk_device(out->device_id);
  int64_t n = out->sizes[0];
  double step = n > 1 ? (end - start) / (double)(n - 1) : 0;
  vk_kernel_id k = (D->features & EM_FEATURE_FLOAT64) ? VK_KERNEL_CAST_F64 : VK_KERNEL_CAST;
  vk_params p = {0};
  p.op = CAST_OP_LINSPACE;
  put_range(&p, k, start, step, end);
  const em_tensor *ts[1] = {out};
  return launch("linspace", k, &p, ts, 1);
}

int em_vk_unary(em_unary_op op, em_tensor *out, const em_tensor *x) {
  vk_kernel_id k = class_of((em_dtype)x->dtype_id);
  const char *fn = em_unary_name(op);
  vk_params p = {0};
  p.op = (uint32_t)op;
  if (op >= EM_ASIN) { /* special.comp (float dtypes only: the definition casts integers) */
    k = k == VK_KERNEL_PW_F64 ? VK_KERNEL_SPECIAL_F64 : VK_KERNEL_SPECIAL_F32;
    p.op = (uint32_t)(op - EM_ASIN);
  }
  const em_tensor *ts[2] = {out, x};
  return launch(fn, k, &p, ts, 2);
}

int em_vk_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                 double alpha) {
  vk_kernel_id k = class_of((em_dtype)a->dtype_id);
  const char *fn = em_binary_name(op);
  vk_params p = {0};
  p.op = 32u + (uint32_t)op;
  if ((op == EM_ADD || op == EM_SUB) && alpha != 1.0) {
    /* a - alpha * b is a + (-alpha) * b; integers negate the saturated integer alpha. */
    p.op = OP_ADD_ALPHA;
    if (k == VK_KERNEL_PW_F32 || k == VK_KERNEL_PW_F64) {
      put_scalar(&p, k, op == EM_SUB ? -alpha : alpha);
    } else {
      int64_t i = sat_i64(alpha);
      if (op == EM_SUB) i = (int64_t)(0u - (uint64_t)i);
      memcpy(&p.arg[0], &i, 8);
    }
  }
  const em_tensor *ts[3] = {out, a, b};
  return launch(fn, k, &p, ts, 3);
}

int em_vk_where(em_tensor *out, const em_tensor *cond, const em_tensor *a, const em_tensor *b) {
  vk_params p = {0};
  p.op = COPY_OP_WHERE;
  const em_tensor *ts[4] = {out, cond, a, b};
  return launch("where", VK_KERNEL_COPY, &p, ts, 4);
}

int em_vk_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo, const em_tensor *hi) {
  vk_params p = {0};
  p.op = OP_CLAMP;
  p.fmt = (lo ? FLAG_HAS_LO : 0) | (hi ? FLAG_HAS_HI : 0);
  const em_tensor *ts[4] = {out, x, lo, hi};
  return launch("clamp", class_of((em_dtype)out->dtype_id), &p, ts, 4);
}

int em_vk_lerp(em_tensor *out, const em_tensor *start, const em_tensor *end,
               const em_tensor *weight) {
  vk_kernel_id k = class_of((em_dtype)out->dtype_id);
  if (k != VK_KERNEL_PW_F32 && k != VK_KERNEL_PW_F64) return not_implemented("lerp", out);
  vk_params p = {0};
  p.op = OP_LERP;
  const em_tensor *ts[4] = {out, start, end, weight};
  return launch("lerp", k, &p, ts, 4);
}

int em_vk_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
               const em_tensor *t2, double value) {
  const char *fn = divide ? "addcdiv" : "addcmul";
  vk_kernel_id k = class_of((em_dtype)out->dtype_id);
  if (divide && k != VK_KERNEL_PW_F32 && k != VK_KERNEL_PW_F64) return not_implemented(fn, out);
  vk_params p = {0};
  p.op = divide ? OP_ADDCDIV : OP_ADDCMUL;
  put_scalar(&p, k, value);
  const em_tensor *ts[4] = {out, x, t1, t2};
  return launch(fn, k, &p, ts, 4);
}
