/*
 * vk_backend.c: the Vulkan device's kernel table. Discovery (vk_instance.c) copies it once per
 * device, with the device's name, so errors say "not implemented on vulkan:1". A slot left NULL
 * makes its op raise "<op>: not implemented on vulkan:N"; ops never fall back to the CPU.
 */
#include "vk.h"

/* The kernel-table functions of each area, defined in its own file. */
/* -- reductions (vk_reduce.c) -- */

/* -- matmul (vk_matmul.c) -- */

/* -- indexing and sorting (vk_index.c) -- */

/* -- convolution and pooling (vk_conv.c) -- */
int em_vk_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                 const struct em_conv_geom *g);
int em_vk_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                            const em_tensor *bias, const struct em_conv_geom *g);
int em_vk_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                             const struct em_conv_geom *g);
int em_vk_max_pool2d(em_tensor *y, em_tensor *indices, const em_tensor *x,
                     const struct em_pool_geom *g);
int em_vk_max_unpool2d(em_tensor *gx, const em_tensor *gy, const em_tensor *indices);
int em_vk_avg_pool2d(em_tensor *y, const em_tensor *x, const struct em_pool_geom *g);
int em_vk_avg_pool2d_backward(em_tensor *gx, const em_tensor *gy, const struct em_pool_geom *g);

/* -- normalization and losses (vk_norm.c) -- */

/* -- random numbers, dropout and optimizer steps (vk_random.c, vk_optim.c) -- */
int em_vk_random(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset, double a,
                 double b);
int em_vk_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                   const em_sgd_options *o);
int em_vk_adam_step(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                    em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o);


/* The table's synchronize takes no device: it waits for every started device. */
static int synchronize_all(void) { return em_synchronize(-1); }

const em_backend em_vulkan_backend = {
  .name = "vulkan",
  .host_scalars = true,
  .storage_alloc = em_vk_storage_alloc,
  .storage_free = em_vk_storage_free,
  .read = em_vk_read,
  .write = em_vk_write,
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

  /* -- matmul -- */

  /* -- indexing and sorting -- */

  /* -- convolution and pooling -- */
  .conv2d = em_vk_conv2d,
  .conv2d_input_grad = em_vk_conv2d_input_grad,
  .conv2d_weight_grad = em_vk_conv2d_weight_grad,
  .max_pool2d = em_vk_max_pool2d,
  .max_unpool2d = em_vk_max_unpool2d,
  .avg_pool2d = em_vk_avg_pool2d,
  .avg_pool2d_backward = em_vk_avg_pool2d_backward,

  /* -- normalization and losses -- */

  /* -- random numbers and optimizer steps -- */
  .random = em_vk_random,
  .sgd_step = em_vk_sgd_step,
  .adam_step = em_vk_adam_step,

};
