/*
 * backend.h: the kernel table a device fills in (ggml's backend interface, split by concern).
 *
 * Op definitions (runtime/src/ops) do all the shape logic, broadcasting, dtype promotion and
 * device checks, then call one slot here. The contract every slot relies on:
 *  - all tensors live on this backend's device;
 *  - inputs of elementwise slots have already been broadcast (stride-0 views) to `out`'s shape
 *    and cast to one dtype, the "compute dtype";
 *  - `out` is freshly allocated and contiguous unless the slot says otherwise; in-place forms
 *    pass an input as `out`, so kernels must tolerate out aliasing an input elementwise;
 *  - strides may be anything, including 0 and negative, unless the slot says otherwise;
 *  - a slot returns 0, or -1 with em_error() set.
 * A NULL slot makes the op raise "<op>: not implemented on <device>", never a silent CPU copy.
 * Except: storage_alloc, storage_free, read, write, copy and fill are required (every other op
 * builds on them); em_device_register refuses a backend without them.
 */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "internal.h"

typedef enum em_random_kind {
  EM_RANDOM_UNIFORM,     /* uniform in [a, b) */
  EM_RANDOM_NORMAL,      /* mean a, std b */
  EM_RANDOM_BERNOULLI,   /* 1 with probability a */
  EM_RANDOM_INT          /* integers uniform in [a, b) */
} em_random_kind;

/* The neural-network slots' parameter structs (nn.h). */
struct em_conv_geom;
struct em_pool_geom;
struct em_norm_geom;
struct em_class_loss;
struct em_attn_geom;

/* How an index outside [0, size) is worded. em_index_message writes both the host's checks'
 * messages and a device's deferred reports, so the two read the same. */
typedef enum em_index_wording {
  EM_INDEX_DIM,   /* "<fn>: index <i> is out of bounds for dimension <dim> with size <size>" */
  EM_INDEX_ROWS   /* "<fn>: index <i> is out of range for a weight of <size> rows" */
} em_index_wording;
/* ops/index.c */
void em_index_message(char *buf, size_t n, const char *fn, em_index_wording w, int dim,
                      int64_t index, int64_t size);

struct em_backend {
  const char *name;
  /* Whether the elementwise slots (unary ... addc) take host scalars: an operand whose storage
   * is a CPU cell holding one value of the compute dtype (storage->device_id != device_id,
   * all strides 0). A GPU backend passes it to the kernel as an immediate; without this flag
   * such scalars are first copied to a one-element device tensor. */
  bool host_scalars;
  /* Whether the conv slots take bfloat16 tensors themselves (float32 accumulation, each output
   * rounded once). Without it the definitions (ops/nn_conv.c) run bfloat16 convolutions in
   * float32 between casts. */
  bool conv_bf16;
  /* Whether the attention slots take float16 and bfloat16 q/k/v themselves (float32
   * accumulation, each output rounded once). Without it the definition (ops/attention.c) runs
   * 16-bit attention in float32 between casts. */
  bool attention_half;

  /* ---- memory ---- */
  /* Fills s->data / s->backend_ctx for s->nbytes bytes; -1 with an OOM error on failure. */
  int (*storage_alloc)(em_storage *s);
  void (*storage_free)(em_storage *s);
  /* Host <-> device byte copies of a storage range. */
  int (*read)(const em_storage *s, size_t offset, void *dst, size_t nbytes);
  int (*write)(em_storage *s, size_t offset, const void *src, size_t nbytes);
  int (*synchronize)(void);
  /* Optional: fills the CPU storage s (s->nbytes; s->device_id is the CPU) with host memory
   * that `device` (this backend's, started) transfers read directly (pinned memory): s->data is its host address
   * and s->backend_ctx a record starting with an em_pinned_head, through which the storage is
   * released. The write slot then copies from such memory without staging it. */
  int (*pin_alloc)(em_storage *s, int device);
  /* Optional, asynchronous reads (ops/read_async.c; em_read_start in ember.h): read_start
   * records a copy of nbytes (<= 256) at byte offset of s for the host and starts the work
   * recorded so far; it returns a handle, NULL on error. read_finish: 1 when done (dst filled,
   * handle freed), 0 when not yet and wait is 0, -1 on error (handle freed). read_free drops
   * an unfinished handle. Without them a read is a synchronous `read` at start. */
  void *(*read_start)(const em_storage *s, size_t offset, size_t nbytes);
  int (*read_finish)(void *h, void *dst, size_t nbytes, int wait);
  void (*read_free)(void *h);
  /* Optional, large reads straight into pinned memory without waiting (ember.distributed's
   * staging, runtime/src/distributed/collectives.c): pinned_read_start records the copy of
   * nbytes at byte offset of s into dst, which lies in pinned memory of s's device, after
   * everything recorded so far, and starts the work; it returns a ticket (> 0), or 0 on error.
   * pinned_read_poll(device, ticket): 1 once the copy is done and dst may be read, 0 while it
   * runs, -1 on error. It never waits, so that any thread may poll while others record. */
  uint64_t (*pinned_read_start)(const em_storage *s, size_t offset, void *dst, size_t nbytes);
  int (*pinned_read_poll)(int device, uint64_t ticket);

  /* ---- creation and copies ---- */
  /* dst and src have the same shape (src maybe broadcast); dtypes may differ: cast. */
  int (*copy)(em_tensor *dst, const em_tensor *src);
  int (*fill)(em_tensor *dst, double value);
  /* out[i] = start + i * step (1-D, contiguous). */
  int (*arange)(em_tensor *out, double start, double step);
  /* Evenly spaced from start to end inclusive (1-D, contiguous), computed from both ends. */
  int (*linspace)(em_tensor *out, double start, double end);
  /* Philox stream: element i of the contiguous out uses counter `offset + i / 4`, lane i % 4
   * (two lanes per element where 64 bits are needed: random.h has the exact layout). */
  int (*random)(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset, double a,
                double b);
  /* Sampling (ops/multinomial.c; multinomial.h has the algorithm every kernel follows, so one
   * seed draws the same indices on every device). w [R, K] is a private contiguous copy of the
   * weights, float32 or float64. With replacement out [R, n] (contiguous int64) gets 0-based
   * categories, draw j of row r from word r * n + j of the Philox stream at (seed, offset).
   * Without replacement out is NULL and the kernel replaces each weight w[r, i] by its key
   * (word r * K + i), of which the definition keeps the n smallest. Weights that fail
   * multinomial.h's checks are an error, which a GPU may report at its next synchronization
   * instead (that row's draws are then 0, its keys unspecified). */
  int (*multinomial)(em_tensor *out, em_tensor *w, int64_t n, int replacement, uint64_t seed,
                     uint64_t offset);

  /* ---- pointwise ---- */
  /* out dtype is the compute dtype, or bool for predicates (isnan, ...) and logical_not. */
  int (*unary)(em_unary_op op, em_tensor *out, const em_tensor *x);
  /* out dtype is the compute dtype, or bool for comparisons and logical ops. alpha scales b for
   * EM_ADD and EM_SUB and is 1 otherwise. */
  int (*binary)(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                double alpha);
  /* Optional: binary where the definition has checked that out, a and b are contiguous and
   * of one shape, and a and b of one dtype (the common small op, whose layout checks cost
   * more than its arithmetic). NULL: binary serves. */
  int (*binary_contiguous)(em_binary_op op, em_tensor *out, const em_tensor *a,
                           const em_tensor *b, double alpha);
  /* cond is bool; a, b and out share the compute dtype. */
  int (*where)(em_tensor *out, const em_tensor *cond, const em_tensor *a, const em_tensor *b);
  /* lo and hi may be NULL. */
  int (*clamp)(em_tensor *out, const em_tensor *x, const em_tensor *lo, const em_tensor *hi);
  int (*lerp)(em_tensor *out, const em_tensor *start, const em_tensor *end,
              const em_tensor *weight);
  /* out = x + value * t1 * t2 (divide == 0) or x + value * t1 / t2 (divide != 0). */
  int (*addc)(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
              const em_tensor *t2, double value);

  /* ---- reductions ----
   * `out` has x's rank with size 1 in every reduced dimension (keepdim shape); `mask` has bit d
   * set when dimension d is reduced. The definition has already chosen out's dtype (sum of
   * integers is int64, mean needs a float, all/any give bool) and cast x when needed. */
  int (*reduce)(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask);
  /* Variance with Bessel-style correction; take_sqrt gives std. Floating x only. */
  int (*moments)(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                 int take_sqrt);
  int (*norm)(em_tensor *out, const em_tensor *x, uint32_t mask, double p);
  /* Along one dim; values/indices in keepdim shape, indices int64 0-based. First occurrence
   * wins ties; NaN counts as the maximum (and the minimum), as in PyTorch. */
  int (*arg_reduce)(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                    int dim);
  int (*scan)(int is_prod, em_tensor *out, const em_tensor *x, int dim);
  int (*softmax)(int is_log, em_tensor *out, const em_tensor *x, int dim);

  /* ---- linear algebra ----
   * out = beta * out + alpha * a @ b, every matrix of a batch at once.
   * gemm(out, a, b, alpha, beta) takes operands with ndim 3 OR 4: [B, M, K] or [B1, B2, M, K]
   * (same for b [.., K, N], out [.., M, N]); each operand has its own strides for each batch
   * dim (0 = broadcast / shared). A flat batch index z in [0, B1*B2) maps to (z / B2, z % B2).
   * out stays contiguous (its batch strides are then implied but pass them anyway).
   * a and b may have any matrix strides too; all three have one dtype (floating or integer).
   * The definition (ops/linalg.c) calls the slot once for up to two non-coalescible batch dims
   * (attention's [B, H, T, hd] views), so a kernel puts the whole batch in one dispatch or one
   * parallel loop. em_gemm_batches / em_gemm_batch_offset below read the batch geometry. */
  int (*gemm)(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha, double beta);
  /* Optional: out = beta * c + alpha * a @ b in one kernel (addmm, baddbmm, Linear's bias),
   * with 3-D operands [B, M, ..] and c a view of out's shape with any strides (0 where it
   * broadcasts), never overlapping out; out is fresh. Returns 0 done, -1 error, 1 not taken
   * (the definition then copies c into out and calls gemm with beta). */
  int (*gemm_add)(em_tensor *out, const em_tensor *a, const em_tensor *b, const em_tensor *c,
                  double alpha, double beta);

  /* ---- indexing (index tensors are int64, 0-based, bounds-checked unless check_index) ---- */
  /* Optional: checks on the device, without the host waiting for it, that every element of
   * the int64 `index` lies in [0, size); a bad one is reported in em_index_message's words
   * (fn, w, dim, the value, size) at the device's next synchronization. Returns 0 when the
   * check is queued, 1 when it cannot check this index (the definition then reads it on the
   * host, as for a backend without the slot), -1 with an error. Filling it is the capability
   * "device index checks", and a promise: then the indexing slots below may be given
   * unchecked indices, and they read and write nothing outside their tensors for an index
   * out of range (gathers give 0 there, scatters skip it). The definitions skip their host
   * read where it is filled: a GPU would otherwise wait for its queue on every index op. */
  int (*check_index)(const char *fn, em_index_wording w, int dim, const em_tensor *index,
                     int64_t size);
  int (*index_select)(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
  int (*gather)(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
  /* In place on x: x[...index...] = src (accumulate == 0) or += src. */
  int (*scatter)(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                 int accumulate);
  /* In place on x along dim: x.select(dim, index[i]) = src.select(dim, i) (accumulate == 0)
   * or += alpha * src.select(dim, i). */
  int (*index_put)(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                   double alpha, int accumulate);
  /* out is [count, x.ndim] int64 where count was computed by the definition. */
  int (*nonzero)(em_tensor *out, const em_tensor *x);
  /* Stable sort along dim; indices int64. */
  int (*sort)(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
              int descending);

  /* ---- neural-network kernels (nn.h defines the geometry structs and what each computes) ----
   * Every tensor is contiguous and x, w, gy, y share one dtype, float32 or float64 (the conv
   * slots also bfloat16 where conv_bf16 is set, and the 16-bit dtypes conv_half accepts); int64
   * indices and targets are 0-based and already checked by the definitions. Outputs are fresh
   * (kernels write every element). Optional tensors (bias, weight, gx, gw, gb) may be NULL. */
  int (*conv2d)(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                const struct em_conv_geom *g);
  /* gx = the gradient of conv2d with respect to x (conv_transpose2d), plus bias per channel. */
  int (*conv2d_input_grad)(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                           const em_tensor *bias, const struct em_conv_geom *g);
  int (*conv2d_weight_grad)(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                            const struct em_conv_geom *g);
  /* Optional: whether the conv slots take float16 or bfloat16 tensors of dtype dt on this
   * device themselves (Vulkan: where its tensor-core kernels take the dtype). Without it, or
   * where it says no, 16-bit convolutions run in float32 between casts (as conv_bf16 says). */
  bool (*conv_half)(int device, em_dtype dt);
  /* indices: int64 position of each maximum within its input plane (h * W + w). */
  int (*max_pool2d)(em_tensor *y, em_tensor *indices, const em_tensor *x,
                    const struct em_pool_geom *g);
  /* gx [N, C, H, W] = zeros with gy [N, C, OH, OW] added at indices. */
  int (*max_unpool2d)(em_tensor *gx, const em_tensor *gy, const em_tensor *indices);
  int (*avg_pool2d)(em_tensor *y, const em_tensor *x, const struct em_pool_geom *g);
  int (*avg_pool2d_backward)(em_tensor *gx, const em_tensor *gy, const struct em_pool_geom *g);
  /* Per channel of x [N, C, S]: mean and biased variance ([C]). */
  int (*batch_norm_stats)(em_tensor *mean, em_tensor *var, const em_tensor *x);
  /* y [N, C, S] = x * scale[c] + shift[c]. */
  int (*channel_affine)(em_tensor *y, const em_tensor *x, const em_tensor *scale,
                        const em_tensor *shift);
  int (*batch_norm_backward)(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                             const em_tensor *x, const em_tensor *mean, const em_tensor *invstd,
                             const em_tensor *weight, int training);
  /* mean and rstd are [N, G]. */
  int (*group_norm)(em_tensor *y, em_tensor *mean, em_tensor *rstd, const em_tensor *x,
                    const em_tensor *weight, const em_tensor *bias, const struct em_norm_geom *g);
  int (*group_norm_backward)(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                             const em_tensor *x, const em_tensor *mean, const em_tensor *rstd,
                             const em_tensor *weight, const struct em_norm_geom *g);
  /* Cross entropy (log_softmax != 0: x holds scores, lse receives each row's logsumexp) or
   * NLL (x holds log-probabilities, lse is NULL); loss and lse are [N, S]. total_weight, a 0-d
   * tensor of x's dtype, gets the summed weights of the counted targets (the mean's
   * denominator): a tensor, so a GPU divides by it without the host waiting for the number.
   * A target out of [0, C) that is not ignore_index is an error (a GPU may report it at its
   * next synchronization instead of at the call). */
  int (*class_loss)(int log_softmax, em_tensor *loss, em_tensor *lse, em_tensor *total_weight,
                    const em_tensor *x, const em_tensor *target, const em_tensor *weight,
                    const struct em_class_loss *L);
  int (*class_loss_backward)(int log_softmax, em_tensor *gx, const em_tensor *gloss,
                             const em_tensor *x, const em_tensor *lse, const em_tensor *target,
                             const em_tensor *weight, const struct em_class_loss *L);

  /* ---- attention (ops/attention.c; nn.h's em_attn_geom says what is computed) ----
   * Fused: no [Tq, Tk] score matrix in memory; online softmax over tiles of keys.
   * q [B, Hq, Tq, D], k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv] and gout [B, Hq, Tq, Dv] share one
   * floating dtype (float32, float64, or float16/bfloat16 where attention_half is set); their
   * last dim has stride 1, every other stride is anything (0 too: broadcast views).
   * mask is NULL or an additive float32 mask viewed as [B, Hq, Tq, Tk] (stride 0 where it
   * broadcasts, any stride in its last dim); the definition turns a boolean mask into 0/-inf.
   * Fresh contiguous outputs: out [B, Hq, Tq, Dv] and gq/gk/gv in q's dtype; lse float32
   * (float64 for float64 q) [B, Hq, Tq], each row's log-sum-exp of its scaled, masked scores
   * (-inf for a row with every key masked: that row of out is 0, and so are its gradients).
   * The definition handles the empty cases: the slots see B, Hq, Tq, Tk >= 1 (D or Dv may be
   * 0). The backward recomputes the
   * scores from q, k and lse (and the dropout mask from the geometry's Philox stream); it
   * computes delta = rowsum(gout * out) itself. gk/gv sum over the Hq / Hkv q heads that share
   * a k/v head. */
  int (*attention)(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                   const em_tensor *v, const em_tensor *mask, const struct em_attn_geom *g);
  int (*attention_backward)(em_tensor *gq, em_tensor *gk, em_tensor *gv, const em_tensor *gout,
                            const em_tensor *q, const em_tensor *k, const em_tensor *v,
                            const em_tensor *out, const em_tensor *lse, const em_tensor *mask,
                            const struct em_attn_geom *g);

  /* ---- optimizer steps (ops/optim.c; the formulas are in ember.h and docs/api/optim.md) ----
   * In place over same-shaped tensors of one floating dtype: grad may have any strides
   * (stride 0 too); the written tensors have no stride-0 dims and share no memory (grad may be
   * exactly param). Never called for zero-size tensors. momentum_buffer and max_exp_avg_sq may
   * be NULL. o->found_inf is NULL or a float32 one-element flag on the device (checked): a
   * nonzero value when the step runs means write nothing; read it on the device, not the host. */
  int (*sgd_step)(em_tensor *param, const em_tensor *grad, em_tensor *momentum_buffer,
                  const em_sgd_options *o);
  int (*adam_step)(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                   em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o);

  /* ---- mixed precision (ops/amp.c) ----
   * Every grads[i] (n >= 1, each with elements; floating dtypes, possibly different; any
   * strides without stride-0 dims) becomes grads[i] * inv_scale in place, inv_scale rounded
   * to float32 first; found_inf (float32, one element, same device) is set to 1 when any
   * element read was inf or NaN, and left as it was otherwise. */
  int (*amp_unscale)(em_tensor *const *grads, int n, em_tensor *found_inf, double inv_scale);

  /* ---- CTC loss (ops/nn_ctc.c; optional) ----
   * log_probs [T, N, C] contiguous float32/float64; targets int64 contiguous, read at
   * target_offsets[n] for target_lengths[n] entries (host arrays, checked by the definition:
   * lengths within T and the targets' size, classes in [0, C)). nll [N] receives -log p; grad,
   * when not NULL, [T, N, C] receives d nll[n] / d log_probs[t, n, c] (0 for t past the input's
   * length; 0 where zero_infinity zeroes an infinite loss). */
  int (*ctc_loss)(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                  const em_tensor *targets, const int64_t *input_lengths,
                  const int64_t *target_lengths, const int64_t *target_offsets, int64_t blank,
                  int zero_infinity);

  /* ---- quantized weights (ops/quant.c; optional; block dtypes in ember.h) ----
   * Every tensor is contiguous; a block tensor's last dim counts blocks, whose layout
   * em_quant_dtype_format (quant/quant.h) maps to the em_quant_format of quant_blocks.c.
   * quantize: x float32 (finite, checked by the kernel) into out of a block dtype, x's last
   * dim = out's * block_elems. dequantize: q into out float32 of the same weights.
   * quant_linear: out [M, N] (float32, fresh) = x [M, K] (float32) times w^T, w [N, K / block]
   * of a block dtype, never materializing w densely. A format the kernel lacks: the slot
   * returns -1 with an EM_ERR_NOT_IMPLEMENTED error "<fn>: not implemented on <device> for
   * <dtype>". */
  int (*quantize)(em_tensor *out, const em_tensor *x);
  int (*dequantize)(em_tensor *out, const em_tensor *q);
  int (*quant_linear)(em_tensor *out, const em_tensor *x, const em_tensor *w);
};

/* ---- the gemm slot's batch geometry ----
 * A 3-D operand [B, M, K] reads as [1, B, M, K]: B2 = B and no outer dim, so every kernel
 * handles both ranks with one formula. A size-1 batch dim's stride counts as 0. */
static inline int64_t em_gemm_batches(const em_tensor *t) { /* B1 * B2 */
  return t->ndim == 4 ? t->sizes[0] * t->sizes[1] : t->sizes[0];
}
static inline int64_t em_gemm_inner(const em_tensor *t) { /* B2 */
  return t->sizes[t->ndim - 3];
}
/* The strides of the outer (B1) and inner (B2) batch dims, 0 where the dim has size 1. */
static inline int64_t em_gemm_outer_stride(const em_tensor *t) {
  return t->ndim == 4 && t->sizes[0] > 1 ? t->strides[0] : 0;
}
static inline int64_t em_gemm_inner_stride(const em_tensor *t) {
  return t->sizes[t->ndim - 3] > 1 ? t->strides[t->ndim - 3] : 0;
}
/* Element offset (from t->offset) of flat batch z's matrix. */
static inline int64_t em_gemm_batch_offset(const em_tensor *t, int64_t z) {
  int64_t b2 = em_gemm_inner(t);
  return (z / b2) * em_gemm_outer_stride(t) + (z % b2) * em_gemm_inner_stride(t);
}

extern const em_backend em_cpu_backend;
extern const em_backend em_vulkan_backend; /* runtime/src/vulkan/vk_backend.c */

/* ---- the slots by name (backend_slots.c) ---- */
typedef struct em_backend_slot {
  const char *name;   /* the member's name: "gemm" */
  size_t offset;      /* offsetof(struct em_backend, gemm) */
  bool optional;      /* a capability a backend may leave empty (check_index) */
} em_backend_slot;
/* Every function-pointer member of struct em_backend, in declaration order (a static assertion
 * there keeps the list complete). */
extern const em_backend_slot em_backend_slots[];
extern const int em_backend_slot_count;
/* Whether be's slot em_backend_slots[i] is set. */
bool em_backend_slot_filled(const em_backend *be, int i);
/* Empties the named slot of a writable table (test hooks); -1 with an error for an unknown name. */
int em_backend_slot_clear(em_backend *be, const char *name);

/* "fn: not implemented on <device>" unless the slot exists. */
#define EM_NEED_KERNEL(fn, be, slot)                                                          \
  do {                                                                                        \
    if ((be)->slot == NULL)                                                                   \
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", (fn),     \
                               (be)->name);                                                   \
  } while (0)

#endif
