/*
 * vk_backend.c: the Vulkan device's kernel table. Discovery (vk_instance.c) copies it once per
 * device, with the device's name, so errors say "not implemented on vulkan:1". A slot left NULL
 * makes its op raise "<op>: not implemented on vulkan:N"; ops never fall back to the CPU.
 */
#include "vk.h"
#include "../quant/quant.h"

/* The kernel-table functions of each area, defined in its own file. */
/* -- reductions (vk_reduce.c) -- */
int em_vk_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask);
int em_vk_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                  int take_sqrt);
int em_vk_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p);
int em_vk_arg_reduce(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                     int dim);
int em_vk_scan(int is_prod, em_tensor *out, const em_tensor *x, int dim);
int em_vk_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim);

/* -- matmul (vk_matmul.c) -- */
int em_vk_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
               double beta);
int em_vk_gemm_add(em_tensor *out, const em_tensor *a, const em_tensor *b, const em_tensor *c,
                   double alpha, double beta);

/* -- indexing and sorting (vk_index.c) -- */
int em_vk_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
int em_vk_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
int em_vk_scatter(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                  int accumulate);
int em_vk_index_put(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                    double alpha, int accumulate);
int em_vk_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
               int descending);
int em_vk_nonzero(em_tensor *out, const em_tensor *x);
/* -- (vk_index_check.c) -- */
int em_vk_check_index(const char *fn, em_index_wording w, int dim, const em_tensor *index,
                      int64_t size);

/* -- convolution and pooling (vk_conv.c) -- */
int em_vk_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                 const struct em_conv_geom *g);
int em_vk_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                            const em_tensor *bias, const struct em_conv_geom *g);
int em_vk_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                             const struct em_conv_geom *g);
bool em_vk_conv_half(int device, em_dtype dt);
int em_vk_max_pool2d(em_tensor *y, em_tensor *indices, const em_tensor *x,
                     const struct em_pool_geom *g);
int em_vk_max_unpool2d(em_tensor *gx, const em_tensor *gy, const em_tensor *indices);
int em_vk_avg_pool2d(em_tensor *y, const em_tensor *x, const struct em_pool_geom *g);
int em_vk_avg_pool2d_backward(em_tensor *gx, const em_tensor *gy, const struct em_pool_geom *g);

/* -- normalization and losses (vk_norm.c) -- */
int em_vk_batch_norm_stats(em_tensor *mean, em_tensor *var, const em_tensor *x);
int em_vk_channel_affine(em_tensor *y, const em_tensor *x, const em_tensor *scale,
                         const em_tensor *shift);
int em_vk_batch_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                              const em_tensor *x, const em_tensor *mean, const em_tensor *invstd,
                              const em_tensor *weight, int training);
int em_vk_group_norm(em_tensor *y, em_tensor *mean, em_tensor *rstd, const em_tensor *x,
                     const em_tensor *weight, const em_tensor *bias,
                     const struct em_norm_geom *g);
int em_vk_group_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                              const em_tensor *x, const em_tensor *mean, const em_tensor *rstd,
                              const em_tensor *weight, const struct em_norm_geom *g);
int em_vk_class_loss(int log_softmax, em_tensor *loss, em_tensor *lse, em_tensor *total_weight,
                     const em_tensor *x, const em_tensor *target, const em_tensor *weight,
                     const struct em_class_loss *L);
int em_vk_class_loss_backward(int log_softmax, em_tensor *gx, const em_tensor *gloss,
                              const em_tensor *x, const em_tensor *lse, const em_tensor *target,
                              const em_tensor *weight, const struct em_class_loss *L);

/* -- random numbers, dropout and optimizer steps (vk_random.c, vk_optim.c) -- */
int em_vk_random(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset, double a,
                 double b);
int em_vk_multinomial(em_tensor *out, em_tensor *w, int64_t n, int replacement, uint64_t seed,
                      uint64_t offset);
int em_vk_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                   const em_sgd_options *o);
int em_vk_adam_step(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                    em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o);
/* -- fused attention (vk_attention.c) -- */
int em_vk_attention(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                    const em_tensor *v, const em_tensor *mask, const struct em_attn_geom *g);
int em_vk_attention_backward(em_tensor *gq, em_tensor *gk, em_tensor *gv, const em_tensor *gout,
                             const em_tensor *q, const em_tensor *k, const em_tensor *v,
                             const em_tensor *out, const em_tensor *lse, const em_tensor *mask,
                             const struct em_attn_geom *g);
/* -- mixed precision (vk_amp.c) -- */
int em_vk_amp_unscale(em_tensor *const *grads, int n, em_tensor *found_inf, double inv_scale);
int em_vk_ctc_loss(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                   const em_tensor *targets, const int64_t *input_lengths,
                   const int64_t *target_lengths, const int64_t *target_offsets, int64_t blank,
                   int zero_infinity); /* vk_ctc.c */


/* The table's synchronize takes no device: it waits for every started device. */
static int synchronize_all(void) { return em_synchronize(-1); }

const em_backend em_vulkan_backend = {
  .name = "vulkan",
  .host_scalars = true,
  .attention_half = true,
  .storage_alloc = em_vk_storage_alloc,
  .storage_free = em_vk_storage_free,
  .read = em_vk_read,
  .write = em_vk_write,
  .pin_alloc = em_vk_pin_alloc,
  .read_start = em_vk_read_start,
  .read_finish = em_vk_read_finish,
  .read_free = em_vk_read_free,
  .pinned_read_start = em_vk_pinned_read_start,
  .pinned_read_poll = em_vk_pinned_read_poll,
  .synchronize = synchronize_all,
  .copy = em_vk_copy,
  .fill = em_vk_fill,
  .arange = em_vk_arange,
  .linspace = em_vk_linspace,
  .unary = em_vk_unary,
  .binary = em_vk_binary,
  .where = em_vk_where,
  .clamp = em_vk_clamp,
  .lerp = em_vk_lerp,
  .addc = em_vk_addc,
  /* -- reductions -- */
  .reduce = em_vk_reduce,
  .moments = em_vk_moments,
  .norm = em_vk_norm,
  .arg_reduce = em_vk_arg_reduce,
  .scan = em_vk_scan,
  .softmax = em_vk_softmax,

  /* -- matmul -- */
  .gemm = em_vk_gemm,
  .gemm_add = em_vk_gemm_add,

  /* -- indexing and sorting -- */
  .check_index = em_vk_check_index,
  .index_select = em_vk_index_select,
  .gather = em_vk_gather,
  .scatter = em_vk_scatter,
  .index_put = em_vk_index_put,
  .sort = em_vk_sort,
  .nonzero = em_vk_nonzero,

  /* -- convolution and pooling -- */
  .conv2d = em_vk_conv2d,
  .conv2d_input_grad = em_vk_conv2d_input_grad,
  .conv2d_weight_grad = em_vk_conv2d_weight_grad,
  .conv_half = em_vk_conv_half,
  .max_pool2d = em_vk_max_pool2d,
  .max_unpool2d = em_vk_max_unpool2d,
  .avg_pool2d = em_vk_avg_pool2d,
  .avg_pool2d_backward = em_vk_avg_pool2d_backward,

  /* -- normalization and losses -- */
  .batch_norm_stats = em_vk_batch_norm_stats,
  .channel_affine = em_vk_channel_affine,
  .batch_norm_backward = em_vk_batch_norm_backward,
  .group_norm = em_vk_group_norm,
  .group_norm_backward = em_vk_group_norm_backward,
  .class_loss = em_vk_class_loss,
  .class_loss_backward = em_vk_class_loss_backward,

  /* -- fused attention -- */
  .attention = em_vk_attention,
  .attention_backward = em_vk_attention_backward,

  /* -- random numbers and optimizer steps -- */
  .random = em_vk_random,
  .multinomial = em_vk_multinomial,
  .sgd_step = em_vk_sgd_step,
  .adam_step = em_vk_adam_step,
  .amp_unscale = em_vk_amp_unscale,
  .ctc_loss = em_vk_ctc_loss,

  /* -- quantized weights (vk_quant_slots.c; quantize has no kernel here) -- */
  .dequantize = em_vk_dequantize_slot,
  .quant_linear = em_vk_quant_linear_slot,

};
