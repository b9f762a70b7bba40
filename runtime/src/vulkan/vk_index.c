/*
 * vk_index.c: the Vulkan indexing kernels (index_select, gather, scatter, index_put) in
 * kernels/index.comp; runtime/src/cpu/index.c is the reference for their semantics.
 *
 * Every slot walks one shape with three operands (a: the written one, b: the read one, and the
 * int64 index); the indexed operand's stride along `dim` is taken out of the walk and applied
 * to the index value instead. Dimensions are coalesced here so the kernel's 5 suffice.
 * Scatters without accumulation walk each line along dim in order, in one invocation, so that
 * the last repeated index wins as on the CPU; accumulation of 1- to 4-byte dtypes runs one
 * invocation per element with atomics (int64: two 32-bit atomic adds and the carry), and of
 * float64 line by line (no 64-bit atomics).
 */
#include <stdlib.h>

#include "vk.h"

/* vk_index_last.c: the parallel last-one-wins path without accumulation (1: not taken). */
int em_vk_index_last(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                     int put);
/* vk_index_seg.c: float accumulation in parallel, in the CPU's order (1: not taken). */
int em_vk_index_seg(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                    double alpha, int put);
/* vk_index_rows.c: index_select of whole contiguous rows (1: not taken). */
int em_vk_index_rows(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);

enum { IDX_DIMS = 5 };

/* kernels/index.comp's push constants. */
typedef struct index_push {
  uint32_t n, ndim, m;
  int32_t xstep;
  uint32_t alpha[2];
  uint32_t size[IDX_DIMS];
  int32_t st[3 * IDX_DIMS];
  uint32_t base[3];
  uint32_t xsize;             /* the indexed operand's size along dim (bad indices skipped) */
  int32_t jst[2];
} index_push;
_Static_assert(sizeof(index_push) <= VK_MAX_PUSH, "index push constants exceed 128 bytes");

/* The walk: sizes and the three operands' strides, innermost first. */
typedef struct walk {
  int nd;
  int64_t size[EM_MAX_DIMS];
  int64_t st[3][EM_MAX_DIMS];
} walk;

/* Builds the walk over `sizes` (rank nd) without dimension `skip` (-1: none), dropping size-1
 * dimensions and merging neighbours that are contiguous for all three operands. */
static void walk_init(walk *w, int nd, const int64_t *sizes, const int64_t st[3][EM_MAX_DIMS],
                      int skip) {
  w->nd = 0;
  for (int d = nd - 1; d >= 0; d--) {
    if (d == skip || sizes[d] == 1) continue;
    int k = w->nd;
    if (k > 0) {
      bool merge = true;
      for (int o = 0; o < 3; o++)
        if (st[o][d] != w->st[o][k - 1] * w->size[k - 1]) merge = false;
      if (merge) {
        w->size[k - 1] *= sizes[d];
        continue;
      }
    }
    w->size[k] = sizes[d];
    for (int o = 0; o < 3; o++) w->st[o][k] = st[o][d];
    w->nd++;
  }
}

/* Whether every element index operand o reaches fits in 31 bits. */
static bool fits(const walk *w, int o, int64_t base, int64_t extra) {
  int64_t hi = base + extra, lo = base;
  for (int d = 0; d < w->nd; d++) {
    int64_t span = w->st[o][d] * (w->size[d] - 1);
    if (span > 0) hi += span;
    else lo += span;
  }
  return lo >= 0 && hi < INT32_MAX;
}

typedef struct index_args {
  const char *fn;
  em_tensor *a;
  const em_tensor *b, *index;
  const int64_t *sizes;       /* the walked shape (rank a->ndim) */
  int64_t st[3][EM_MAX_DIMS]; /* strides of a, b, index over it (indexed one: 0 along dim) */
  int dim, indexed;           /* indexed: 1 (b) for gathers, 0 (a) for scatters */
  int64_t xstep;              /* the indexed operand's stride along dim */
  int64_t m;                  /* the length along dim */
  bool gather, seq;
  int accumulate;
  double alpha;
} index_args;

static int index_launch(const index_args *g) {
  vk_device *D = em_vk_device(g->a->device_id);
  em_dtype dt = (em_dtype)g->a->dtype_id;
  uint32_t esize = (uint32_t)em_dtypes[dt].size;
  walk w;
  walk_init(&w, g->a->ndim, g->sizes, g->st, g->seq ? g->dim : -1);
  int64_t n = 1;
  for (int d = 0; d < w.nd; d++) n *= w.size[d];
  if (n == 0 || g->m == 0) return 0;
  if (w.nd > IDX_DIMS)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "%s: not implemented on %s for layouts of more than %d "
                             "non-mergeable dimensions (got %d)", g->fn, D->name, IDX_DIMS, w.nd);
  const em_tensor *ops[3] = {g->a, g->b, g->index};
  int64_t jst[3] = {0, 0, 0};
  if (g->seq) {
    jst[1] = g->st[1][g->dim];
    jst[2] = g->st[2][g->dim];
  }
  for (int o = 0; o < 3; o++) {
    /* along dim: the indexed operand spans its own length there, the others m (seq only) */
    int64_t extra = o == g->indexed ? llabs(g->xstep) * (ops[o]->sizes[g->dim] - 1)
                                    : llabs(jst[o]) * (g->m - 1);
    if (!fits(&w, o, ops[o]->offset, extra) || n > UINT32_MAX)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                               "%s: not implemented on %s for tensors beyond 2^31 elements",
                               g->fn, D->name);
  }
  index_push p = {.n = (uint32_t)n, .ndim = (uint32_t)w.nd, .m = (uint32_t)g->m,
                  .xstep = (int32_t)g->xstep,
                  .xsize = (uint32_t)ops[g->indexed]->sizes[g->dim]};
  for (int d = 0; d < w.nd; d++) {
    p.size[d] = (uint32_t)w.size[d];
    for (int o = 0; o < 3; o++) p.st[IDX_DIMS * o + d] = (int32_t)w.st[o][d];
  }
  for (int o = 0; o < 3; o++) p.base[o] = (uint32_t)ops[o]->offset;
  p.jst[0] = (int32_t)jst[1];
  p.jst[1] = (int32_t)jst[2];
  const char *module = g->gather ? "index_GATHER" : "index_SCATTER";
  if (g->accumulate) {
    uint64_t bits;
    if (dt == EM_FLOAT64) {
      if (!(D->features & EM_FEATURE_FLOAT64))
        return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                                 "%s: not implemented on %s for float64 accumulation (the "
                                 "device lacks shaderFloat64)", g->fn, D->name);
      module = "index_SCATTER_F64";
      memcpy(&bits, &g->alpha, sizeof bits);
    } else if (dt == EM_FLOAT32 || dt == EM_FLOAT16 || dt == EM_BFLOAT16) {
      float f = (float)g->alpha;
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      bits = u;
    } else {
      double v = g->alpha;
      int64_t i = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX
                  : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
      bits = (uint64_t)i;
    }
    p.alpha[0] = (uint32_t)bits;
    p.alpha[1] = (uint32_t)(bits >> 32);
  }
  uint64_t groups = ((uint64_t)n + 255) / 256, max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  if (groups > max) groups = max; /* the kernel's grid-stride loop covers the rest */
  vk_launch L = {
      .module = module,
      .push = &p,
      .push_size = sizeof p,
      .spec = {esize, g->accumulate ? (uint32_t)dt : ~0u, g->seq ? 1u : 0u, ~0u},
      .ops = {g->a, g->b, g->index},
      .writes = 1u,
      .groups = {(uint32_t)groups, 1, 1},
  };
  return em_vk_launch_locked(&L);
}

static void copy_strides(int64_t *dst, const em_tensor *t) {
  for (int d = 0; d < t->ndim; d++) dst[d] = t->strides[d];
}

int em_vk_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  int rc = em_vk_index_rows(out, x, dim, index);
  if (rc <= 0) return rc;
  index_args g = {.fn = "index_select", .a = out, .b = x, .index = index, .sizes = out->sizes,
                  .dim = dim, .indexed = 1, .xstep = x->strides[dim], .m = out->sizes[dim],
                  .gather = true};
  copy_strides(g.st[0], out);
  copy_strides(g.st[1], x);
  g.st[1][dim] = 0;
  g.st[2][dim] = index->strides[0]; /* index is 1-D: the same entry for every other position */
  return index_launch(&g);
}

int em_vk_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  index_args g = {.fn = "gather", .a = out, .b = x, .index = index, .sizes = out->sizes,
                  .dim = dim, .indexed = 1, .xstep = x->strides[dim], .m = out->sizes[dim],
                  .gather = true};
  copy_strides(g.st[0], out);
  copy_strides(g.st[1], x);
  copy_strides(g.st[2], index);
  g.st[1][dim] = 0;
  return index_launch(&g);
}

/* Line by line without accumulation (the last repeat wins) and for float64 accumulation (int64
 * adds with two 32-bit atomics): the fallbacks when vk_index_last.c / vk_index_seg.c, which
 * do those in parallel, decline. */
static bool scatter_seq(const em_tensor *x, int accumulate) {
  return !accumulate || x->dtype_id == EM_FLOAT64;
}

int em_vk_scatter(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                  int accumulate) {
  if (!accumulate || em_dtypes[x->dtype_id].is_float) {
    int rc = accumulate ? em_vk_index_seg(x, dim, index, src, 1.0, 0)
                        : em_vk_index_last(x, dim, index, src, 0);
    if (rc <= 0) return rc;
  }
  index_args g = {.fn = accumulate ? "scatter_add" : "scatter", .a = x, .b = src,
                  .index = index, .sizes = src->sizes, .dim = dim, .indexed = 0,
                  .xstep = x->strides[dim], .m = src->sizes[dim], .gather = false,
                  .seq = scatter_seq(x, accumulate), .accumulate = accumulate, .alpha = 1.0};
  copy_strides(g.st[0], x);
  copy_strides(g.st[1], src);
  copy_strides(g.st[2], index);
  g.st[0][dim] = 0;
  return index_launch(&g);
}

int em_vk_index_put(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                    double alpha, int accumulate) {
  if (!accumulate || em_dtypes[x->dtype_id].is_float) {
    int rc = accumulate ? em_vk_index_seg(x, dim, index, src, alpha, 1)
                        : em_vk_index_last(x, dim, index, src, 1);
    if (rc <= 0) return rc;
  }
  index_args g = {.fn = accumulate ? "index_add" : "index_copy", .a = x, .b = src,
                  .index = index, .sizes = src->sizes, .dim = dim, .indexed = 0,
                  .xstep = x->strides[dim], .m = src->sizes[dim], .gather = false,
                  .seq = scatter_seq(x, accumulate), .accumulate = accumulate, .alpha = alpha};
  copy_strides(g.st[0], x);
  copy_strides(g.st[1], src);
  g.st[0][dim] = 0;
  g.st[2][dim] = index->strides[0];
  return index_launch(&g);
}
