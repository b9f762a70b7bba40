/*
 * vk_backend.c: the Vulkan device's kernel table. Discovery (vk_instance.c) copies it once per
 * device, with the device's name, so errors say "not implemented on vulkan:1". A slot left NULL
 * makes its op raise "<op>: not implemented on vulkan:N"; ops never fall back to the CPU.
 */
#include "vk.h"

/* The kernel-table functions of each area, defined in its own file. */
/* -- reductions (vk_reduce.c) -- */

/* -- matmul (vk_matmul.c) -- */
int em_vk_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
               double beta);

/* -- indexing and sorting (vk_index.c) -- */

/* -- convolution and pooling (vk_conv.c) -- */

/* -- normalization and losses (vk_norm.c) -- */

/* -- random numbers, dropout and optimizer steps (vk_random.c, vk_optim.c) -- */


/* The table's synchronize takes no device: it waits for every started device. */
static int synchronize_all(void) { return em_synchronize(-1); }

const em_backend em_vulkan_backend = {
  .name = "vulkan",
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
  .gemm = em_vk_gemm,

  /* -- indexing and sorting -- */

  /* -- convolution and pooling -- */

  /* -- normalization and losses -- */

  /* -- random numbers and optimizer steps -- */

};
