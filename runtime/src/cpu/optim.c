/*
 * optim.c: CPU kernels of the fused optimizer steps (ops/optim.c checks the operands).
 *
 * One pass over the elements through the shared iterator (any strides; large tensors split
 * across threads). Each element is computed in double from values loaded once and stored once,
 * so float32 results can differ from a sequence of float32 ops (PyTorch's) in the last bit.
 * float16 and bfloat16 parameters go through the same loops with typed loads and stores.
 */
#include "cpu.h"

/* The loops are generated once per floating dtype (sgd_loop_f32, adam_loop_bf16, ...) with
 * the typed loads and stores of cpu.h inlined. */
#define EM_OPTIM_DTYPES(X) X(f32) X(f64) X(f16) X(bf16)

typedef struct sgd_ctx {
  const em_sgd_options *o;
  bool has_buf;
} sgd_ctx;

typedef struct adam_ctx {
  const em_adam_options *o;
  double step_size, bias2_sqrt;
  bool amsgrad;
} adam_ctx;

/* SGD. ptrs: param, grad[, momentum buffer] */
#define SGD_LOOP(S)                                                                           \
  static void sgd_loop_##S(char **ptrs, const int64_t *strides, int64_t n, void *arg) {       \
    const sgd_ctx *c = arg;                                                                   \
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

int em_cpu_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                    const em_sgd_options *o) {
  sgd_ctx c = {.o = o, .has_buf = buf != NULL};
  em_cpu_loop loop;
  switch (param->dtype_id) {
  case EM_FLOAT32: loop = sgd_loop_f32; break;
  case EM_FLOAT64: loop = sgd_loop_f64; break;
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
  adam_ctx c = {.o = o, .amsgrad = max_exp_avg_sq != NULL};
  em_cpu_loop loop;
  switch (param->dtype_id) {
  case EM_FLOAT32: loop = adam_loop_f32; break;
  case EM_FLOAT64: loop = adam_loop_f64; break;
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
