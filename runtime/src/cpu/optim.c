/*
 * optim.c: CPU kernels of the fused optimizer steps (ops/optim.c checks the operands).
 *
 * One pass over the elements through the shared iterator (any strides; large tensors split
 * across threads). Runs where every operand is contiguous take a typed loop that computes in
 * the tensor's own type (float for float32, as PyTorch does) and that the compiler vectorizes;
 * other runs, and float16 / bfloat16, load each element to double and store it back. Results
 * can differ from PyTorch's sequence of separate ops in the last bit.
 *
 * A conditional step (options.found_inf) reads the flag first: CPU ops have run when they
 * return, so its value is final, and a set flag leaves everything as it was.
 */
#include "cpu.h"

/* The loops are generated once per floating dtype (sgd_loop_f32, adam_loop_bf16, ...) with
 * the typed loads and stores of cpu.h inlined. */
#define EM_OPTIM_DTYPES(X) X(f32) X(f64) X(f16) X(bf16)

typedef struct sgd_ctx {
  const em_sgd_options *o;
  bool has_buf;
  int64_t elem_size;
  /* the contiguous loop for float32 / float64, else NULL */
  void (*contig)(void *p, const void *g, void *b, int64_t n, const em_sgd_options *o);
} sgd_ctx;

typedef struct adam_ctx adam_ctx;
struct adam_ctx {
  const em_adam_options *o;
  double step_size, bias2_sqrt;
  bool amsgrad;
  int64_t elem_size;
  void (*contig)(void *p, const void *g, void *m, void *v, void *vmax, int64_t n,
                 const adam_ctx *c);
};

/* Contiguous SGD in the element type T. */
#define SGD_CONTIG(S, T)                                                                      \
  static void sgd_contig_##S(T *restrict p, const T *restrict g, T *restrict b, int64_t n,    \
                             const em_sgd_options *o) {                                       \
    const T lr = (T)o->lr, mom = (T)o->momentum, keep = (T)(1 - o->dampening);               \
    const T wd = (T)o->weight_decay, sign = o->maximize ? (T)-1 : (T)1;                      \
    const bool nesterov = o->nesterov != 0, first = o->first_step != 0;                      \
    if (b == NULL) {                                                                          \
      if (wd == 0)                                                                            \
        for (int64_t i = 0; i < n; i++) p[i] -= lr * (sign * g[i]);                          \
      else                                                                                    \
        for (int64_t i = 0; i < n; i++) p[i] -= lr * (sign * g[i] + wd * p[i]);              \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T d = sign * g[i];                                                                      \
      if (wd != 0) d += wd * p[i];                                                            \
      T bv = first ? d : mom * b[i] + keep * d;                                               \
      b[i] = bv;                                                                              \
      p[i] -= lr * (nesterov ? d + mom * bv : bv);                                            \
    }                                                                                         \
  }
SGD_CONTIG(f32, float)
SGD_CONTIG(f64, double)

/* Contiguous Adam in the element type T: PyTorch's order of operations. */
#define ADAM_CONTIG(S, T)                                                                     \
  static void adam_contig_##S(T *restrict p, const T *restrict g, T *restrict m,             \
                              T *restrict v, T *restrict vmax, int64_t n, const adam_ctx *c) { \
    const em_adam_options *o = c->o;                                                          \
    const T b1 = (T)o->beta1, b2 = (T)o->beta2, eps = (T)o->eps, wd = (T)o->weight_decay;    \
    const T omb1 = (T)(1 - o->beta1), omb2 = (T)(1 - o->beta2);                              \
    const T decay = (T)(1 - o->lr * o->weight_decay), sign = o->maximize ? (T)-1 : (T)1;      \
    const T step_size = (T)c->step_size, bias2_sqrt = (T)c->bias2_sqrt;                      \
    const bool decoupled = o->decoupled != 0;                                                 \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T pv = p[i], d = sign * g[i];                                                           \
      if (wd != 0) {                                                                          \
        if (decoupled) pv *= decay; else d += wd * pv;                                        \
      }                                                                                       \
      T mv = b1 * m[i] + omb1 * d;                                                            \
      T vv = b2 * v[i] + omb2 * d * d;                                                        \
      m[i] = mv;                                                                              \
      v[i] = vv;                                                                              \
      if (vmax) {                                                                             \
        T prev = vmax[i], mx = vv > prev ? vv : prev;                                         \
        mx = prev != prev ? prev : mx; /* NaN wins, as in torch.maximum */                    \
        vv = vv != vv ? vv : mx;                                                              \
        vmax[i] = vv;                                                                         \
      }                                                                                       \
      T denom = sqrt(vv) / bias2_sqrt + eps;                                                  \
      p[i] = pv - step_size * (mv / denom);                                                   \
    }                                                                                         \
  }
ADAM_CONTIG(f32, float)
ADAM_CONTIG(f64, double)

/* The contiguous loops behind untyped pointers, for the contexts. */
static void sgd_contig_f32_v(void *p, const void *g, void *b, int64_t n, const em_sgd_options *o) {
  sgd_contig_f32(p, g, b, n, o);
}
static void sgd_contig_f64_v(void *p, const void *g, void *b, int64_t n, const em_sgd_options *o) {
  sgd_contig_f64(p, g, b, n, o);
}
static void adam_contig_f32_v(void *p, const void *g, void *m, void *v, void *vmax, int64_t n,
                              const adam_ctx *c) {
  adam_contig_f32(p, g, m, v, vmax, n, c);
}
static void adam_contig_f64_v(void *p, const void *g, void *m, void *v, void *vmax, int64_t n,
                              const adam_ctx *c) {
  adam_contig_f64(p, g, m, v, vmax, n, c);
}

/* Whether the first k operands of a run are contiguous elements of `size` bytes. */
static bool run_contiguous(int k, const int64_t *strides, int64_t size) {
  for (int i = 0; i < k; i++)
    if (strides[i] != size) return false;
  return true;
}

/* SGD. ptrs: param, grad[, momentum buffer] */
#define SGD_LOOP(S)                                                                           \
  static void sgd_loop_##S(char **ptrs, const int64_t *strides, int64_t n, void *arg) {       \
    const sgd_ctx *c = arg;                                                                   \
    if (c->contig && run_contiguous(c->has_buf ? 3 : 2, strides, c->elem_size)) {             \
      c->contig(ptrs[0], ptrs[1], c->has_buf ? ptrs[2] : NULL, n, c->o);                      \
      return;                                                                                 \
    }                                                                                         \
    const em_sgd_options *o = c->o;                                                           \
    const double lr = o->lr, mom = o->momentum, keep = 1 - o->dampening;                     \
    const double wd = o->weight_decay, sign = o->maximize ? -1.0 : 1.0;                      \
    const bool nesterov = o->nesterov != 0, first = o->first_step != 0;                      \
    char *p = ptrs[0], *g = ptrs[1], *b = c->has_buf ? ptrs[2] : NULL;                      \
    for (int64_t i = 0; i < n; i++) {                                                         \
      double pv = em_ld_##S(p);                                                               \
      double d = sign * em_ld_##S(g) + wd * pv;                                               \
      if (b) {                                                                                \
        double bv = first ? d : mom * em_ld_##S(b) + keep * d;                                \
        em_st_##S(b, bv);                                                                     \
        d = nesterov ? d + mom * bv : bv;                                                     \
        b += strides[2];                                                                      \
      }                                                                                       \
      em_st_##S(p, pv - lr * d);                                                              \
      p += strides[0];                                                                        \
      g += strides[1];                                                                        \
    }                                                                                         \
  }
EM_OPTIM_DTYPES(SGD_LOOP)

/* torch.maximum: NaN when either is NaN. */
static inline double nan_max(double a, double b) {
  if (a != a || b != b) return NAN;
  return a > b ? a : b;
}

/* Adam / AdamW. ptrs: param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq] */
#define ADAM_LOOP(S)                                                                          \
  static void adam_loop_##S(char **ptrs, const int64_t *strides, int64_t n, void *arg) {      \
    const adam_ctx *c = arg;                                                                  \
    if (c->contig && run_contiguous(c->amsgrad ? 5 : 4, strides, c->elem_size)) {             \
      c->contig(ptrs[0], ptrs[1], ptrs[2], ptrs[3], c->amsgrad ? ptrs[4] : NULL, n, c);       \
      return;                                                                                 \
    }                                                                                         \
    const em_adam_options *o = c->o;                                                          \
    const double b1 = o->beta1, b2 = o->beta2, eps = o->eps, wd = o->weight_decay;           \
    const double decay = 1 - o->lr * wd, sign = o->maximize ? -1.0 : 1.0;                    \
    const double step_size = c->step_size, bias2_sqrt = c->bias2_sqrt;                       \
    const bool decoupled = o->decoupled != 0;                                                 \
    char *p = ptrs[0], *g = ptrs[1], *m = ptrs[2], *v = ptrs[3];                              \
    char *vmax = c->amsgrad ? ptrs[4] : NULL;                                                 \
    for (int64_t i = 0; i < n; i++) {                                                         \
      double pv = em_ld_##S(p), d = sign * em_ld_##S(g);                                      \
      if (wd != 0) {                                                                          \
        if (decoupled) pv *= decay; else d += wd * pv;                                        \
      }                                                                                       \
      double mv = b1 * em_ld_##S(m) + (1 - b1) * d;                                           \
      double vv = b2 * em_ld_##S(v) + (1 - b2) * d * d;                                       \
      em_st_##S(m, mv);                                                                       \
      em_st_##S(v, vv);                                                                       \
      if (vmax) {                                                                             \
        vv = nan_max(em_ld_##S(vmax), vv);                                                    \
        em_st_##S(vmax, vv);                                                                  \
        vmax += strides[4];                                                                   \
      }                                                                                       \
      em_st_##S(p, pv - step_size * mv / (sqrt(vv) / bias2_sqrt + eps));                      \
      p += strides[0];                                                                        \
      g += strides[1];                                                                        \
      m += strides[2];                                                                        \
      v += strides[3];                                                                        \
    }                                                                                         \
  }
EM_OPTIM_DTYPES(ADAM_LOOP)

/* ---- dispatch ------------------------------------------------------------------------------- */

/* Whether a conditional step is to change nothing. */
static bool skipped(const em_tensor *found_inf) {
  return found_inf != NULL && *(const float *)em_cpu_ptr(found_inf) != 0.0f;
}

int em_cpu_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                    const em_sgd_options *o) {
  if (skipped(o->found_inf)) return 0;
  sgd_ctx c = {.o = o, .has_buf = buf != NULL, .elem_size = (int64_t)em_dtypes[param->dtype_id].size};
  em_cpu_loop loop;
  switch (param->dtype_id) {
  case EM_FLOAT32: loop = sgd_loop_f32; c.contig = sgd_contig_f32_v; break;
  case EM_FLOAT64: loop = sgd_loop_f64; c.contig = sgd_contig_f64_v; break;
  case EM_FLOAT16: loop = sgd_loop_f16; break;
  case EM_BFLOAT16: loop = sgd_loop_bf16; break;
  default:
    return em_error("sgd_step_: expected a floating-point parameter, got %s",
                    em_dtype_name((em_dtype)param->dtype_id));
  }
  const em_tensor *ts[3] = {param, grad, buf};
  em_cpu_for_each(buf ? 3 : 2, ts, loop, &c);
  return 0;
}

int em_cpu_adam_step(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                     em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o) {
  if (skipped(o->found_inf)) return 0;
  adam_ctx c = {.o = o, .amsgrad = max_exp_avg_sq != NULL,
                .elem_size = (int64_t)em_dtypes[param->dtype_id].size};
  em_cpu_loop loop;
  switch (param->dtype_id) {
  case EM_FLOAT32: loop = adam_loop_f32; c.contig = adam_contig_f32_v; break;
  case EM_FLOAT64: loop = adam_loop_f64; c.contig = adam_contig_f64_v; break;
  case EM_FLOAT16: loop = adam_loop_f16; break;
  case EM_BFLOAT16: loop = adam_loop_bf16; break;
  default:
    return em_error("adam_step_: expected a floating-point parameter, got %s",
                    em_dtype_name((em_dtype)param->dtype_id));
  }
  double t = (double)o->step;
  c.step_size = o->lr / (1 - pow(o->beta1, t));
  c.bias2_sqrt = sqrt(1 - pow(o->beta2, t));
  const em_tensor *ts[5] = {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
  em_cpu_for_each(max_exp_avg_sq ? 5 : 4, ts, loop, &c);
  return 0;
}
