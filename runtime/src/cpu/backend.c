/*
 * backend.c: the CPU's kernel table and its memory functions. Storage memory comes from the CPU
 * allocator (alloc.c), which keeps statistics and applies limits.
 */
#include "cpu.h"
#include "../nn.h"
#include "../quant/quant.h"

static int cpu_storage_alloc(em_storage *s) {
  s->data = em_cpu_alloc(s->nbytes);
  return s->data ? 0 : -1;
}

static void cpu_storage_free(em_storage *s) { em_cpu_free(s->data, s->nbytes); }

static int cpu_read(const em_storage *s, size_t offset, void *dst, size_t nbytes) {
  memcpy(dst, (const char *)s->data + offset, nbytes);
  return 0;
}

static int cpu_write(em_storage *s, size_t offset, const void *src, size_t nbytes) {
  memcpy((char *)s->data + offset, src, nbytes);
  return 0;
}

static int cpu_synchronize(void) { return 0; }

const em_backend em_cpu_backend = {
  .name = "cpu",
  .conv_bf16 = true, /* conv_bf16.c: on the bf16 instructions, or through float32 */
  .storage_alloc = cpu_storage_alloc,
  .storage_free = cpu_storage_free,
  .read = cpu_read,
  .write = cpu_write,
  .synchronize = cpu_synchronize,
  .copy = em_cpu_copy,
  .fill = em_cpu_fill,
  .arange = em_cpu_arange,
  .linspace = em_cpu_linspace,
  .random = em_cpu_random,
  .multinomial = em_cpu_multinomial,
  .unary = em_cpu_unary,
  .binary = em_cpu_binary,
  .binary_contiguous = em_cpu_binary_contiguous,
  .where = em_cpu_where,
  .clamp = em_cpu_clamp,
  .lerp = em_cpu_lerp,
  .addc = em_cpu_addc,
  .reduce = em_cpu_reduce,
  .moments = em_cpu_moments,
  .norm = em_cpu_norm,
  .arg_reduce = em_cpu_arg_reduce,
  .scan = em_cpu_scan,
  .softmax = em_cpu_softmax,
  .gemm = em_cpu_gemm,
  .index_select = em_cpu_index_select,
  .gather = em_cpu_gather,
  .scatter = em_cpu_scatter,
  .index_put = em_cpu_index_put,
  .nonzero = em_cpu_nonzero,
  .sort = em_cpu_sort,
  .conv2d = em_cpu_conv2d,
  .conv2d_input_grad = em_cpu_conv2d_input_grad,
  .conv2d_weight_grad = em_cpu_conv2d_weight_grad,
  .max_pool2d = em_cpu_max_pool2d,
  .max_unpool2d = em_cpu_max_unpool2d,
  .avg_pool2d = em_cpu_avg_pool2d,
  .avg_pool2d_backward = em_cpu_avg_pool2d_backward,
  .batch_norm_stats = em_cpu_batch_norm_stats,
  .channel_affine = em_cpu_channel_affine,
  .batch_norm_backward = em_cpu_batch_norm_backward,
  .group_norm = em_cpu_group_norm,
  .group_norm_backward = em_cpu_group_norm_backward,
  .class_loss = em_cpu_class_loss,
  .class_loss_backward = em_cpu_class_loss_backward,
  .attention = em_cpu_attention,
  .attention_backward = em_cpu_attention_backward,
  .sgd_step = em_cpu_sgd_step,
  .adam_step = em_cpu_adam_step,
  .amp_unscale = em_cpu_amp_unscale,
  .ctc_loss = em_cpu_ctc_loss,
  .quantize = em_cpu_quantize,
  .dequantize = em_cpu_dequantize,
  .quant_linear = em_cpu_quant_linear,
};
