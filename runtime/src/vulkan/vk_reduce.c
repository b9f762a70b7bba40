/*
 * vk_reduce.c: the Vulkan reduction slots: reduce (sum, mean, prod, amax, amin, all, any,
 * logsumexp), moments (var, std), norm and arg_reduce, all on kernels/reduce.comp.
 *
 * Each op is one or two "jobs" over the lines of vk_reduce.h, mirroring the CPU's recipes
 * (runtime/src/cpu/reduce.c): a fold with a transform before it and a finish after it. var and
 * logsumexp need a per-line centre first (the mean, the max), computed by a first job into a
 * temporary and read by the second: two passes over x, as the CPU does, more accurate than a
 * sum of squares.
 *
 * Accumulation: float32 for float32, float16 and bfloat16 inputs (the CPU uses double: results
 * agree to float32 rounding, summation order aside), double for float64, exact wrapping int64
 * for integers and bool.
 *
 * Few long lines (a full sum) would leave most of a GPU idle with one workgroup per line:
 * such lines are cut into chunks, each chunk's raw accumulator goes to a partial tensor
 * [chunks, lines], and a second launch folds the partials in order and finishes.
 */
#include <math.h>

#include "vk_reduce.h"

/* kernels/reduce.comp's codes. */
enum { A_SUM, A_PROD, A_MAX, A_MIN, A_ALL, A_ANY, A_ARGMAX, A_ARGMIN };
enum { T_NONE, T_ABS, T_SQUARE, T_POWABS, T_NONZERO, T_SQDEV, T_EXPSHIFT };
enum { N_NONE, N_DIV, N_DIVSQRT, N_SQRT, N_ROOT, N_LSE };
enum { FL_IDX_IN = 0x1000, FL_PARTIAL = 0x2000, FL_VEC4 = 0x4000, FL_SHIFT0 = 0x8000 };

typedef struct red_push {
  uint32_t A, R, K, groups;
  int32_t sa, sr, sk, oa, ok;
  uint32_t osplit, xbase, obase, cbase, ibase, pbase, chunk, gx, pad;
  uint32_t arg0[2], arg1[2];
} red_push;
_Static_assert(sizeof(red_push) == 88, "reduce.comp's push constants");

/* One fold over the lines of L into out (at strides oa, ok: out's own, or linear for a
 * centre temporary). */
typedef struct red_job {
  const char *fn;
  uint32_t fold, xform, finish;
  double p, div;             /* arg0, arg1 of the push constants */
  uint32_t flags;            /* FL_SHIFT0 */
  const em_tensor *centre;   /* one accumulator per line, line order (NULL: none) */
  em_tensor *out, *idx;      /* idx: arg-reductions' int64 indices */
  int64_t oa, ok;
} red_job;

static em_dtype acc_dtype(const char *variant) {
  return variant[0] == 'I' ? EM_INT64 : variant[1] == '6' ? EM_FLOAT64 : EM_FLOAT32;
}

static void put_real(uint32_t *dst, const char *variant, double v) {
  if (variant[1] == '6') {
    memcpy(dst, &v, 8);
  } else {
    float f = (float)v;
    memcpy(dst, &f, 4);
    dst[1] = 0;
  }
}

static int launch(vk_device *D, const char *variant, uint32_t opc, uint32_t fmts,
                  const vk_lanes *P, uint32_t chunks, red_push *pc, const em_tensor *const *ops) {
  vk_launch L = {0};
  /* module names must be literals: vk_pipeline.c remembers modules by name pointer */
  L.module = variant[0] == 'I' ? "reduce_I64" : variant[1] == '6' ? "reduce_F64" : "reduce_F32";
  L.push = pc;
  L.push_size = sizeof *pc;
  L.spec[0] = opc;
  L.spec[1] = fmts;
  L.spec[2] = P->tr;
  L.spec[3] = P->col;
  for (int i = 0; i < 5; i++) L.ops[i] = ops[i];
  L.writes = 1u | (ops[3] ? 8u : 0u);
  L.groups[0] = P->gx;
  L.groups[1] = P->gy;
  L.groups[2] = chunks;
  pc->groups = P->groups;
  pc->gx = P->gx;
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_launch(D, &L);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

/* How many chunks to cut each line into: enough workgroups to fill the device, each still
 * folding at least 4096 elements (its 256 / tr lines times the chunk). */
static uint32_t chunks_for(const vk_device *D, const vk_lanes *P, int64_t R) {
  int64_t target = vk_red_cpu_type(D) ? 16 : 1024;
  int64_t lines = 256 / P->tr;
  int64_t least = (4096 + lines - 1) / lines; /* elements of a line per chunk */
  if (least < 4 * (int64_t)P->tr) least = 4 * (int64_t)P->tr;
  if (P->groups >= target || R < 2 * least) return 1;
  int64_t s = (target + P->groups - 1) / P->groups;
  if (s > R / least) s = R / least;
  int64_t maxz = D->props.limits.maxComputeWorkGroupCount[2];
  if (s > maxz) s = maxz;
  return s > 1 ? (uint32_t)s : 1;
}

/* Lines of contiguous float32 whose starts are 16-byte aligned in their binding (blocks are)
 * read 128 bits at a time: the ROW layout only, where lanes walk along the line. */
static bool vec4_lines(const vk_lines *L, const vk_lanes *P, bool arg) {
  if (arg || P->col || L->x->dtype_id != EM_FLOAT32 || L->sr != 1 || L->R < 16) return false;
  return L->x->offset % 4 == 0 && (L->A == 1 || L->sa % 4 == 0) && (L->K == 1 || L->sk % 4 == 0);
}

static int run_job(const vk_lines *L, const red_job *J) {
  vk_device *D = L->D;
  const char *variant = vk_red_variant(D, J->fn, (em_dtype)L->x->dtype_id);
  if (variant == NULL) return -1;
  bool arg = J->fold == A_ARGMAX || J->fold == A_ARGMIN;
  em_dtype acc = acc_dtype(variant);
  int64_t nlines = L->A * L->K;
  vk_lanes P;
  if (vk_lanes_pick(&P, D, J->fn, nlines, L->R, L->sr, L->K, L->sk, 256) != 0) return -1;
  red_push pc = {0};
  pc.A = (uint32_t)L->A;
  pc.R = (uint32_t)L->R;
  pc.K = (uint32_t)L->K;
  pc.sa = (int32_t)L->sa;
  pc.sr = (int32_t)L->sr;
  pc.sk = (int32_t)L->sk;
  pc.xbase = (uint32_t)L->x->offset;
  pc.cbase = J->centre ? (uint32_t)J->centre->offset : 0;
  put_real(pc.arg0, variant, J->p);
  put_real(pc.arg1, variant, J->div);
  uint32_t opc = J->fold | J->xform << 4 | J->finish << 8 | J->flags |
                 (vec4_lines(L, &P, arg) ? FL_VEC4 : 0);
  uint32_t in_fmt = (uint32_t)L->x->dtype_id, out_fmt = (uint32_t)J->out->dtype_id;
  uint32_t chunks = chunks_for(D, &P, L->R);
  if (chunks == 1) {
    pc.chunk = pc.R;
    pc.oa = (int32_t)J->oa;
    pc.ok = (int32_t)J->ok;
    pc.obase = (uint32_t)J->out->offset;
    pc.ibase = J->idx ? (uint32_t)J->idx->offset : 0;
    const em_tensor *ops[5] = {J->out, L->x, J->centre, J->idx, NULL};
    return launch(D, variant, opc, in_fmt | out_fmt << 4, &P, 1, &pc, ops);
  }
  /* Chunks: partial accumulators [chunks, lines], then a fold of each line's partials. */
  int64_t chunk = (L->R + chunks - 1) / chunks;
  int64_t step = P.tr < 4 ? 4 : P.tr; /* whole quads per chunk for the vec4 loads */
  chunk = (chunk + step - 1) / step * step;
  chunks = (uint32_t)((L->R + chunk - 1) / chunk);
  int64_t total = (int64_t)chunks * nlines;
  if (total > UINT32_MAX) return vk_red_too_large(D, J->fn);
  em_tensor *part = em_empty(1, &total, acc, L->x->device_id);
  em_tensor *pidx = arg && part ? em_empty(1, &total, EM_INT32, L->x->device_id) : NULL;
  int rc = part && (!arg || pidx) ? 0 : -1;
  if (rc == 0) {
    pc.chunk = (uint32_t)chunk;
    pc.oa = (int32_t)L->K;
    pc.ok = 1;
    pc.osplit = (uint32_t)nlines;
    pc.obase = (uint32_t)part->offset;
    pc.ibase = pidx ? (uint32_t)pidx->offset : 0;
    const em_tensor *ops[5] = {part, L->x, J->centre, pidx, NULL};
    uint32_t opc1 = (opc & ~(0xfu << 8)) | FL_PARTIAL;
    rc = launch(D, variant, opc1, in_fmt | (uint32_t)acc << 4, &P, chunks, &pc, ops);
  }
  if (rc == 0) {
    /* The partials are lines of `chunks` elements at stride nlines. */
    vk_lanes P2;
    rc = vk_lanes_pick(&P2, D, J->fn, nlines, chunks, nlines, L->K, 1, 256);
    red_push p2 = pc;
    p2.R = p2.chunk = chunks;
    p2.sa = (int32_t)L->K;
    p2.sk = 1;
    p2.sr = (int32_t)nlines;
    p2.xbase = (uint32_t)part->offset;
    p2.pbase = pidx ? (uint32_t)pidx->offset : 0;
    p2.osplit = 0;
    p2.oa = (int32_t)J->oa;
    p2.ok = (int32_t)J->ok;
    p2.obase = (uint32_t)J->out->offset;
    p2.ibase = J->idx ? (uint32_t)J->idx->offset : 0;
    const em_tensor *ops[5] = {J->out, part, J->centre, J->idx, pidx};
    uint32_t opc2 = J->fold | J->finish << 8 | (arg ? FL_IDX_IN : 0);
    if (rc == 0) rc = launch(D, variant, opc2, (uint32_t)acc | out_fmt << 4, &P2, 1, &p2, ops);
  }
  em_release(part);
  em_release(pidx);
  return rc;
}

/* A job writing into out (keepdim shape) at out's own strides. */
static red_job job_into(const char *fn, const vk_lines *L, em_tensor *out, uint32_t fold,
                        uint32_t xform, uint32_t finish) {
  red_job J = {fn, fold, xform, finish, 0, 0, 0, NULL, out, NULL, L->oa, L->ok};
  return J;
}

/* A per-line centre temporary (accumulator dtype, line order) from a first job. */
static em_tensor *centre_of(const vk_lines *L, const char *fn, uint32_t fold, uint32_t finish,
                            double div, uint32_t flags) {
  const char *variant = vk_red_variant(L->D, fn, (em_dtype)L->x->dtype_id);
  if (variant == NULL) return NULL;
  int64_t n = L->A * L->K;
  em_tensor *c = em_empty(1, &n, acc_dtype(variant), L->x->device_id);
  if (c == NULL) return NULL;
  red_job J = {fn, fold, T_NONE, finish, 0, div, flags, NULL, c, NULL, L->K, 1};
  if (run_job(L, &J) != 0) {
    em_release(c);
    return NULL;
  }
  return c;
}

static const char *reduce_name(em_reduce_op op) {
  static const char *names[EM_NUM_REDUCE] = {"sum", "mean", "prod", "amax", "amin", "all",
                                             "any", "logsumexp"};
  return (unsigned)op < EM_NUM_REDUCE ? names[op] : "reduce";
}

int em_vk_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask) {
  const char *fn = reduce_name(op);
  vk_lines L;
  if (vk_lines_plan(&L, fn, out, x, mask) != 0) return -1;
  red_job J = job_into(fn, &L, out, A_SUM, T_NONE, N_NONE);
  em_tensor *centre = NULL;
  int rc = 0;
  switch (op) {
  case EM_SUM: break;
  case EM_MEAN: J.finish = N_DIV; J.div = (double)L.R; break;
  case EM_PROD: J.fold = A_PROD; break;
  case EM_AMAX: J.fold = A_MAX; break;
  case EM_AMIN: J.fold = A_MIN; break;
  case EM_ALL: J.fold = A_ALL; break;
  case EM_ANY: J.fold = A_ANY; break;
  case EM_LOGSUMEXP:
    /* the max first; then exp(x - max) summed, finished as max + log(sum) */
    centre = centre_of(&L, fn, A_MAX, N_NONE, 0, 0);
    if (centre == NULL) rc = -1;
    J.xform = T_EXPSHIFT;
    J.finish = N_LSE;
    J.centre = centre;
    break;
  default: rc = em_error("reduce: invalid op %d", (int)op);
  }
  if (rc == 0) rc = run_job(&L, &J);
  em_release(centre);
  vk_lines_done(&L);
  return rc;
}

int em_vk_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                  int take_sqrt) {
  const char *fn = take_sqrt ? "std" : "var";
  vk_lines L;
  if (vk_lines_plan(&L, fn, out, x, mask) != 0) return -1;
  /* The mean of x - x[0] of each line, then the squared deviations of x - x[0] from it. */
  em_tensor *mean = centre_of(&L, fn, A_SUM, N_DIV, (double)L.R, FL_SHIFT0);
  int rc = mean ? 0 : -1;
  if (rc == 0) {
    red_job J = job_into(fn, &L, out, A_SUM, T_SQDEV, take_sqrt ? N_DIVSQRT : N_DIV);
    J.div = (double)L.R - correction;
    J.centre = mean;
    J.flags = FL_SHIFT0;
    rc = run_job(&L, &J);
  }
  em_release(mean);
  vk_lines_done(&L);
  return rc;
}

int em_vk_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p) {
  vk_lines L;
  if (vk_lines_plan(&L, "norm", out, x, mask) != 0) return -1;
  red_job J = job_into("norm", &L, out, A_SUM, T_NONE, N_NONE);
  if (p == 0) J.xform = T_NONZERO;
  else if (p == 1) J.xform = T_ABS;
  else if (p == 2) J.xform = T_SQUARE, J.finish = N_SQRT;
  else if (p == INFINITY) J.xform = T_ABS, J.fold = A_MAX;
  else if (p == -INFINITY) J.xform = T_ABS, J.fold = A_MIN;
  else J.xform = T_POWABS, J.finish = N_ROOT, J.p = p, J.div = 1.0 / p;
  int rc = run_job(&L, &J);
  vk_lines_done(&L);
  return rc;
}

int em_vk_arg_reduce(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                     int dim) {
  const char *fn = is_max ? "argmax" : "argmin";
  vk_lines L;
  if (vk_lines_plan(&L, fn, indices, x, x->ndim > 0 ? 1u << dim : 0) != 0) return -1;
  red_job J = job_into(fn, &L, values, is_max ? A_ARGMAX : A_ARGMIN, T_NONE, N_NONE);
  J.idx = indices;
  int rc = run_job(&L, &J);
  vk_lines_done(&L);
  return rc;
}
