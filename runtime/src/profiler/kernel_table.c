/*
 * kernel_table.c: the recording copy of a device's kernel table.
 *
 * While the profiler runs, em_device_backend hands out, for each device, a copy of its
 * struct em_backend whose kernel slots are the functions below: each opens an event named by
 * the op ("add", "relu", "sum", "gemm", "conv2d" ...), calls the device's own slot and closes
 * the event. Every op of every device, present and future, reaches its arithmetic through a
 * slot, so this is the one hook of the op layer (decision 15 in docs/design.md). An op
 * composed of others shows as its kernels; a slot that calls another slot nests.
 *
 * A wrapper finds the device's own table from its tensors' device: backend.h's contract puts
 * every tensor of a slot on the slot's device (copy's dst names the device the definition
 * chose). Slots without tensors (synchronize, the pinned and asynchronous reads, the
 * capability query conv_half) and the storage slots (the allocator has its own hook) stay the
 * device's own. A NULL slot stays NULL, so "not implemented" reads the same.
 */
#include <pthread.h>

#include "../backend.h"
#include "profiler.h"

static em_backend proxies[EM_MAX_DEVICES];
static const em_backend *reals[EM_MAX_DEVICES];
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

#define NIN(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* Opens the event: name, the device, then the inputs whose shapes are recorded. */
#define BEGIN(name, dev, ...)                                                                  \
  const em_tensor *ins_[] = {__VA_ARGS__};                                                     \
  int d_ = (dev);                                                                              \
  uint64_t h_ = em_prof_begin(EM_PROF_OP, (name), 0, d_, NIN(ins_), ins_)
/* Calls the device's own slot and closes the event. */
#define RUN(CALL)                                                                              \
  int rc_ = reals[d_]->CALL;                                                                   \
  em_prof_end(h_);                                                                             \
  return rc_

static const char *const reduce_names[] = {"sum", "mean", "prod", "amax", "amin",
                                           "all", "any", "logsumexp"};
static const char *const random_names[] = {"uniform", "normal", "bernoulli", "randint"};

static int w_read(const em_storage *s, size_t offset, void *dst, size_t nbytes) {
  BEGIN("copy_to_host", s->device_id, NULL);
  RUN(read(s, offset, dst, nbytes));
}
static int w_write(em_storage *s, size_t offset, const void *src, size_t nbytes) {
  BEGIN("copy_from_host", s->device_id, NULL);
  RUN(write(s, offset, src, nbytes));
}
static int w_copy(em_tensor *dst, const em_tensor *src) {
  BEGIN("copy", dst->device_id, src);
  RUN(copy(dst, src));
}
static int w_fill(em_tensor *dst, double value) {
  BEGIN("fill", dst->device_id, dst);
  RUN(fill(dst, value));
}
static int w_arange(em_tensor *out, double start, double step) {
  BEGIN("arange", out->device_id, out);
  RUN(arange(out, start, step));
}
static int w_linspace(em_tensor *out, double start, double end) {
  BEGIN("linspace", out->device_id, out);
  RUN(linspace(out, start, end));
}
static int w_random(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset,
                    double a, double b) {
  BEGIN((unsigned)kind < 4 ? random_names[kind] : "random", out->device_id, out);
  RUN(random(out, kind, seed, offset, a, b));
}
static int w_multinomial(em_tensor *out, em_tensor *w, int64_t n, int replacement,
                         uint64_t seed, uint64_t offset) {
  BEGIN("multinomial", w->device_id, w);
  RUN(multinomial(out, w, n, replacement, seed, offset));
}
static int w_unary(em_unary_op op, em_tensor *out, const em_tensor *x) {
  BEGIN(em_unary_name(op), out->device_id, x);
  RUN(unary(op, out, x));
}
static int w_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                    double alpha) {
  BEGIN(em_binary_name(op), out->device_id, a, b);
  RUN(binary(op, out, a, b, alpha));
}
static int w_binary_contiguous(em_binary_op op, em_tensor *out, const em_tensor *a,
                               const em_tensor *b, double alpha) {
  BEGIN(em_binary_name(op), out->device_id, a, b);
  RUN(binary_contiguous(op, out, a, b, alpha));
}
static int w_where(em_tensor *out, const em_tensor *cond, const em_tensor *a,
                   const em_tensor *b) {
  BEGIN("where", out->device_id, cond, a, b);
  RUN(where(out, cond, a, b));
}
static int w_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo,
                   const em_tensor *hi) {
  BEGIN("clamp", out->device_id, x, lo, hi);
  RUN(clamp(out, x, lo, hi));
}
static int w_lerp(em_tensor *out, const em_tensor *s, const em_tensor *e, const em_tensor *w) {
  BEGIN("lerp", out->device_id, s, e, w);
  RUN(lerp(out, s, e, w));
}
static int w_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
                  const em_tensor *t2, double value) {
  BEGIN(divide ? "addcdiv" : "addcmul", out->device_id, x, t1, t2);
  RUN(addc(divide, out, x, t1, t2, value));
}
static int w_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask) {
  BEGIN((unsigned)op < EM_NUM_REDUCE ? reduce_names[op] : "reduce", out->device_id, x);
  RUN(reduce(op, out, x, mask));
}
static int w_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                     int take_sqrt) {
  BEGIN(take_sqrt ? "std" : "var", out->device_id, x);
  RUN(moments(out, x, mask, correction, take_sqrt));
}
static int w_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p) {
  BEGIN("norm", out->device_id, x);
  RUN(norm(out, x, mask, p));
}
static int w_arg_reduce(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                        int dim) {
  BEGIN(is_max ? "max_dim" : "min_dim", x->device_id, x);
  RUN(arg_reduce(is_max, values, indices, x, dim));
}
static int w_scan(int is_prod, em_tensor *out, const em_tensor *x, int dim) {
  BEGIN(is_prod ? "cumprod" : "cumsum", out->device_id, x);
  RUN(scan(is_prod, out, x, dim));
}
static int w_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim) {
  BEGIN(is_log ? "log_softmax" : "softmax", out->device_id, x);
  RUN(softmax(is_log, out, x, dim));
}
static int w_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                  double beta) {
  BEGIN("gemm", out->device_id, a, b);
  RUN(gemm(out, a, b, alpha, beta));
}
/* A slot that may decline (returns 1): the definition then takes another way, recorded as
 * its own kernels, so the declined call leaves no event. */
static int w_gemm_add(em_tensor *out, const em_tensor *a, const em_tensor *b, const em_tensor *c,
                      double alpha, double beta) {
  BEGIN("gemm_add", out->device_id, a, b, c);
  int rc = reals[d_]->gemm_add(out, a, b, c, alpha, beta);
  if (rc == 1) em_prof_cancel(h_);
  else em_prof_end(h_);
  return rc;
}
static int w_check_index(const char *fn, em_index_wording w, int dim, const em_tensor *index,
                         int64_t size) {
  BEGIN("check_index", index->device_id, index);
  RUN(check_index(fn, w, dim, index, size));
}
static int w_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  BEGIN("index_select", out->device_id, x, index);
  RUN(index_select(out, x, dim, index));
}
static int w_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  BEGIN("gather", out->device_id, x, index);
  RUN(gather(out, x, dim, index));
}
static int w_scatter(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                     int accumulate) {
  BEGIN(accumulate ? "scatter_add" : "scatter", x->device_id, x, index, src);
  RUN(scatter(x, dim, index, src, accumulate));
}
static int w_index_put(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                       double alpha, int accumulate) {
  BEGIN(accumulate ? "index_add" : "index_put", x->device_id, x, index, src);
  RUN(index_put(x, dim, index, src, alpha, accumulate));
}
static int w_nonzero(em_tensor *out, const em_tensor *x) {
  BEGIN("nonzero", x->device_id, x);
  RUN(nonzero(out, x));
}
static int w_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                  int descending) {
  BEGIN("sort", x->device_id, x);
  RUN(sort(values, indices, x, dim, descending));
}
static int w_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                    const struct em_conv_geom *g) {
  BEGIN("conv2d", x->device_id, x, w, bias);
  RUN(conv2d(y, x, w, bias, g));
}
static int w_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                               const em_tensor *bias, const struct em_conv_geom *g) {
  BEGIN("conv2d_input_grad", gy->device_id, gy, w);
  RUN(conv2d_input_grad(gx, gy, w, bias, g));
}
static int w_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                                const struct em_conv_geom *g) {
  BEGIN("conv2d_weight_grad", x->device_id, x, gy);
  RUN(conv2d_weight_grad(gw, x, gy, g));
}
static int w_max_pool2d(em_tensor *y, em_tensor *indices, const em_tensor *x,
                        const struct em_pool_geom *g) {
  BEGIN("max_pool2d", x->device_id, x);
  RUN(max_pool2d(y, indices, x, g));
}
static int w_max_unpool2d(em_tensor *gx, const em_tensor *gy, const em_tensor *indices) {
  BEGIN("max_unpool2d", gy->device_id, gy, indices);
  RUN(max_unpool2d(gx, gy, indices));
}
static int w_avg_pool2d(em_tensor *y, const em_tensor *x, const struct em_pool_geom *g) {
  BEGIN("avg_pool2d", x->device_id, x);
  RUN(avg_pool2d(y, x, g));
}
static int w_avg_pool2d_backward(em_tensor *gx, const em_tensor *gy,
                                 const struct em_pool_geom *g) {
  BEGIN("avg_pool2d_backward", gy->device_id, gy);
  RUN(avg_pool2d_backward(gx, gy, g));
}
static int w_batch_norm_stats(em_tensor *mean, em_tensor *var, const em_tensor *x) {
  BEGIN("batch_norm_stats", x->device_id, x);
  RUN(batch_norm_stats(mean, var, x));
}
static int w_channel_affine(em_tensor *y, const em_tensor *x, const em_tensor *scale,
                            const em_tensor *shift) {
  BEGIN("channel_affine", x->device_id, x, scale, shift);
  RUN(channel_affine(y, x, scale, shift));
}
static int w_batch_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb,
                                 const em_tensor *gy, const em_tensor *x, const em_tensor *mean,
                                 const em_tensor *invstd, const em_tensor *weight, int training) {
  BEGIN("batch_norm_backward", x->device_id, gy, x);
  RUN(batch_norm_backward(gx, gw, gb, gy, x, mean, invstd, weight, training));
}
static int w_group_norm(em_tensor *y, em_tensor *mean, em_tensor *rstd, const em_tensor *x,
                        const em_tensor *weight, const em_tensor *bias,
                        const struct em_norm_geom *g) {
  BEGIN("group_norm", x->device_id, x, weight, bias);
  RUN(group_norm(y, mean, rstd, x, weight, bias, g));
}
static int w_group_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb,
                                 const em_tensor *gy, const em_tensor *x, const em_tensor *mean,
                                 const em_tensor *rstd, const em_tensor *weight,
                                 const struct em_norm_geom *g) {
  BEGIN("group_norm_backward", x->device_id, gy, x);
  RUN(group_norm_backward(gx, gw, gb, gy, x, mean, rstd, weight, g));
}
static int w_class_loss(int log_softmax, em_tensor *loss, em_tensor *lse,
                        em_tensor *total_weight, const em_tensor *x, const em_tensor *target,
                        const em_tensor *weight, const struct em_class_loss *L) {
  BEGIN(log_softmax ? "cross_entropy" : "nll_loss", x->device_id, x, target);
  RUN(class_loss(log_softmax, loss, lse, total_weight, x, target, weight, L));
}
static int w_class_loss_backward(int log_softmax, em_tensor *gx, const em_tensor *gloss,
                                 const em_tensor *x, const em_tensor *lse,
                                 const em_tensor *target, const em_tensor *weight,
                                 const struct em_class_loss *L) {
  BEGIN(log_softmax ? "cross_entropy_backward" : "nll_loss_backward", x->device_id, x, target);
  RUN(class_loss_backward(log_softmax, gx, gloss, x, lse, target, weight, L));
}
static int w_attention(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                       const em_tensor *v, const em_tensor *mask,
                       const struct em_attn_geom *g) {
  BEGIN("attention", q->device_id, q, k, v, mask);
  RUN(attention(out, lse, q, k, v, mask, g));
}
static int w_attention_backward(em_tensor *gq, em_tensor *gk, em_tensor *gv,
                                const em_tensor *gout, const em_tensor *q, const em_tensor *k,
                                const em_tensor *v, const em_tensor *out, const em_tensor *lse,
                                const em_tensor *mask, const struct em_attn_geom *g) {
  BEGIN("attention_backward", q->device_id, gout, q, k, v);
  RUN(attention_backward(gq, gk, gv, gout, q, k, v, out, lse, mask, g));
}
static int w_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *momentum_buffer,
                      const em_sgd_options *o) {
  BEGIN("sgd_step", param->device_id, param, grad);
  RUN(sgd_step(param, grad, momentum_buffer, o));
}
static int w_adam_step(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                       em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq,
                       const em_adam_options *o) {
  BEGIN("adam_step", param->device_id, param, grad);
  RUN(adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, o));
}
static int w_amp_unscale(em_tensor *const *grads, int n, em_tensor *found_inf,
                         double inv_scale) {
  BEGIN("amp_unscale", found_inf->device_id, NULL);
  RUN(amp_unscale(grads, n, found_inf, inv_scale));
}
static int w_ctc_loss(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                      const em_tensor *targets, const int64_t *input_lengths,
                      const int64_t *target_lengths, const int64_t *target_offsets,
                      int64_t blank, int zero_infinity) {
  BEGIN("ctc_loss", log_probs->device_id, log_probs, targets);
  RUN(ctc_loss(nll, grad, log_probs, targets, input_lengths, target_lengths, target_offsets,
               blank, zero_infinity));
}

static int w_quantize(em_tensor *out, const em_tensor *x) {
  BEGIN("quantize", out->device_id, x);
  RUN(quantize(out, x));
}
static int w_dequantize(em_tensor *out, const em_tensor *q) {
  BEGIN("dequantize", out->device_id, q);
  RUN(dequantize(out, q));
}
static int w_quant_linear(em_tensor *out, const em_tensor *x, const em_tensor *w) {
  BEGIN("quant_linear", out->device_id, x, w);
  RUN(quant_linear(out, x, w));
}

/* Replaces a slot by its wrapper where the device fills it. */
#define WRAP(slot)                                                                             \
  if (p->slot != NULL) p->slot = w_##slot

static void build(em_backend *p, const em_backend *real) {
  *p = *real;
  WRAP(read); WRAP(write); WRAP(copy); WRAP(fill); WRAP(arange); WRAP(linspace);
  WRAP(random); WRAP(multinomial); WRAP(unary); WRAP(binary); WRAP(binary_contiguous);
  WRAP(where); WRAP(clamp); WRAP(lerp); WRAP(addc); WRAP(reduce); WRAP(moments); WRAP(norm);
  WRAP(arg_reduce); WRAP(scan); WRAP(softmax); WRAP(gemm); WRAP(gemm_add); WRAP(check_index);
  WRAP(index_select); WRAP(gather); WRAP(scatter); WRAP(index_put); WRAP(nonzero); WRAP(sort);
  WRAP(conv2d); WRAP(conv2d_input_grad); WRAP(conv2d_weight_grad); WRAP(max_pool2d);
  WRAP(max_unpool2d); WRAP(avg_pool2d); WRAP(avg_pool2d_backward); WRAP(batch_norm_stats);
  WRAP(channel_affine); WRAP(batch_norm_backward); WRAP(group_norm); WRAP(group_norm_backward);
  WRAP(class_loss); WRAP(class_loss_backward); WRAP(attention); WRAP(attention_backward);
  WRAP(sgd_step); WRAP(adam_step); WRAP(amp_unscale); WRAP(ctc_loss);
  WRAP(quantize); WRAP(dequantize); WRAP(quant_linear);
}

void em_prof_backends_refresh(void) {
  pthread_mutex_lock(&build_lock);
  for (int d = 0; d < EM_MAX_DEVICES; d++)
    if (reals[d] != NULL) build(&proxies[d], reals[d]);
  pthread_mutex_unlock(&build_lock);
}

const em_backend *em_prof_backend(int device, const em_backend *real) {
  if (real == NULL || device < 0 || device >= EM_MAX_DEVICES) return real;
  if (__atomic_load_n(&reals[device], __ATOMIC_ACQUIRE) == real) return &proxies[device];
  /* first use, or the device's table changed (a test clearing a slot): copy it again */
  pthread_mutex_lock(&build_lock);
  if (reals[device] != real) {
    __atomic_store_n(&reals[device], NULL, __ATOMIC_RELEASE);
    build(&proxies[device], real);
    __atomic_store_n(&reals[device], real, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&build_lock);
  return &proxies[device];
}
