/*
 * nn.h: what the neural-network ops share between their definitions (ops/nn_*.c), their CPU
 * kernels (cpu/conv.c, pool.c, norm.c, loss.c) and their backward formulas
 * (autograd/formulas_nn.c): the geometry structs the kernel slots take, the internal ops the
 * formulas call, and the CPU entry points cpu/backend.c puts in the table.
 *
 * Convolution is one relation between three tensors, x [N, C, H, W], w [M, C/G, kh, kw] and
 * y [N, M, OH, OW], and three bilinear ops over it:
 *   forward      y  = F(x, w)      conv2d
 *   input grad   x  = T(y, w)      the adjoint of F in x: conv_transpose2d
 *   weight grad  w  = Wg(x, y)     the adjoint of F in w
 * The derivatives of each are the other two, so double backward needs nothing more. The
 * geometry (em_conv_geom) is always stated in F's terms, whichever op runs.
 */
#ifndef EMBER_NN_H
#define EMBER_NN_H

#include "backend.h"

/* ---- geometry --------------------------------------------------------------------------- */

typedef struct em_conv_geom {
  int64_t N, C, H, W;           /* x */
  int64_t M, OH, OW;            /* y's channels and size */
  int64_t kh, kw;               /* w's spatial size; w is [M, C / groups, kh, kw] */
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t groups;
} em_conv_geom;

/* Pooling windows over N*C planes of H x W. A fixed window of output (oh, ow) covers rows
 * oh*sh - ph + i*dh (i < kh), columns likewise; taps outside the input are skipped (max) or
 * count as zeros (avg with count_include_pad, clipped to the padded input). An adaptive window
 * covers rows floor(oh*H/OH) .. ceil((oh+1)*H/OH) - 1. */
typedef struct em_pool_geom {
  int64_t N, C, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool adaptive;
  bool count_include_pad;       /* avg only */
  int64_t divisor;              /* avg only: > 0 replaces the window size */
} em_pool_geom;

/* Group statistics over x viewed as [N, G, Cg * S]: the affine weight and bias index the
 * channel g * Cg + (i / S). layer_norm is G = 1, S = 1 (Cg = the normalized size); group_norm
 * is S = H * W. */
typedef struct em_norm_geom {
  int64_t N, G, Cg, S;
  double eps;
} em_norm_geom;

/* Losses over class scores x [N, C, S] (S = product of the dims after the class dim; 1 for a
 * plain [N, C] input) and int64 targets [N, S] holding 0-based classes. */
typedef struct em_class_loss {
  int64_t N, C, S;
  int64_t ignore_index;         /* targets equal to it contribute nothing */
  double smoothing;             /* label smoothing (cross entropy only) */
} em_class_loss;

/* Scaled dot-product attention (PyTorch's F.scaled_dot_product_attention), per batch b and
 * q head h, with k/v head kh = h / (Hq / Hkv) (grouped-query attention when Hkv < Hq):
 *   s[i, j] = scale * q[b, h, i, :] . k[b, kh, j, :] + mask[b, h, i, j]
 *   s[i, j] = -inf where causal and j > i (top-left aligned, as PyTorch's is_causal)
 *   p = softmax_j(s)  (a row whose every s is -inf gives p = 0, lse = -inf)
 *   p[i, j] = 0 where dropped, else p[i, j] / (1 - dropout_p)
 *   out[b, h, i, :] = sum_j p[i, j] v[b, kh, j, :]
 * Dropout: score (b, h, i, j), at flat index e = ((b * Hq + h) * Tq + i) * Tk + j, reads
 * the 32-bit word at lane e % 4 of Philox block `offset + e / 4` of key `seed` (random.h's
 * layout), and is kept when (word >> 8) >= drop_below, an integer compare so that every device
 * draws the same mask (drop_below = ceil(dropout_p * 2^24), set by the definition). The
 * backward regenerates the same mask from the same numbers. */
typedef struct em_attn_geom {
  int64_t B, Hq, Hkv, Tq, Tk, D, Dv;
  double scale;
  bool causal;
  double dropout_p;             /* 0: no dropout */
  uint32_t drop_below;          /* ceil(dropout_p * 2^24) */
  uint64_t seed, offset;        /* the dropout's Philox stream */
} em_attn_geom;

/* ---- internal ops (the formulas' vocabulary; all record autograd) ----------------------- */

typedef struct em_conv_args {
  int64_t stride[2], padding[2], dilation[2];
  int64_t groups;
} em_conv_args;

/* F: y = conv2d(x, w) + bias (bias may be NULL). x is [N, C, H, W]. y_hw gives y's spatial
 * size, or NULL for the usual formula (the backward of T passes its input's size: with
 * output_padding that may be a row more than the formula gives). */
em_tensor *em_nn_conv(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                      const int64_t *y_hw, const em_conv_args *a);
/* T: x = conv2d's input gradient of y, of spatial size x_hw, plus bias over x's channels. */
em_tensor *em_nn_conv_t(const em_tensor *y, const em_tensor *w, const em_tensor *bias,
                        const int64_t *x_hw, const em_conv_args *a);
/* Wg: conv2d's weight gradient, of spatial size w_hw. */
em_tensor *em_nn_conv_w(const em_tensor *x, const em_tensor *y, const int64_t *w_hw,
                        const em_conv_args *a);

/* The gradient of max pooling (and max_unpool2d): scatters gy into a zero tensor of
 * x_sizes (4-D) at indices (positions within each plane). */
em_tensor *em_nn_max_unpool(const em_tensor *gy, const em_tensor *indices,
                            const int64_t *x_sizes);
/* index_select along dim of indices the caller has checked itself (embedding, whose report of
 * a bad index names embedding): the definition skips its own check. */
em_tensor *em_index_select_checked(const em_tensor *x, int dim, const em_tensor *index);
/* Average pooling and its adjoint (the gradient), geometry as above (N..OW filled in). */
em_tensor *em_nn_avg_pool(const em_tensor *x, const em_pool_geom *g);
em_tensor *em_nn_avg_pool_t(const em_tensor *gy, const em_pool_geom *g);

/* Fused backward ops of the normalizations and losses: they do not record, so a backward
 * formula calls them only when no graph is being built (formulas_nn.c). gx, gw and gb may be
 * NULL when not wanted; they receive new references. */
int em_nn_batch_norm_backward(const em_tensor *gy, const em_tensor *x, const em_tensor *mean,
                              const em_tensor *invstd, const em_tensor *weight, bool training,
                              em_tensor **gx, em_tensor **gw, em_tensor **gb);
int em_nn_group_norm_backward(const em_tensor *gy, const em_tensor *x, const em_tensor *mean,
                              const em_tensor *rstd, const em_tensor *weight,
                              const em_norm_geom *g, em_tensor **gx, em_tensor **gw,
                              em_tensor **gb);
/* The attention backward (ops/attention.c): gout in the output's layout ([batch..., Hq, L, Ev]),
 * q/k/v/out the forward's [B, H, T, E] views, lse and mask as the forward saw them. Fills
 * gq/gk/gv ([B, H, T, E], q's dtype; new references). */
int em_nn_attention_backward(const em_tensor *gout, const em_tensor *q, const em_tensor *k,
                             const em_tensor *v, const em_tensor *out, const em_tensor *lse,
                             const em_tensor *mask, const em_attn_geom *g, em_tensor **gq,
                             em_tensor **gk, em_tensor **gv);
/* gloss: the gradient of the unreduced loss ([N, S]), or a 0-d gradient of the reduced one,
 * already divided by the mean's denominator. */
em_tensor *em_nn_class_loss_backward(bool log_softmax, const em_tensor *gloss,
                                     const em_tensor *x, const em_tensor *lse,
                                     const em_tensor *target, const em_tensor *weight,
                                     const em_class_loss *L);

/* ---- recording (formulas_nn.c) ------------------------------------------------------------ */
int em_ag_record_conv(int kind, em_tensor *out, const em_tensor *a, const em_tensor *b,
                      const em_tensor *bias, const em_conv_args *args);
enum { EM_CONV_F, EM_CONV_T, EM_CONV_W };
int em_ag_record_max_pool(em_tensor *out, const em_tensor *x, const em_tensor *indices);
int em_ag_record_max_unpool(em_tensor *out, const em_tensor *gy, const em_tensor *indices);
int em_ag_record_avg_pool(int adjoint, em_tensor *out, const em_tensor *x,
                          const em_pool_geom *g);
int em_ag_record_batch_norm(em_tensor *out, const em_tensor *x, const em_tensor *w,
                            const em_tensor *b, const em_tensor *mean, const em_tensor *invstd,
                            bool training, double eps);
int em_ag_record_group_norm(em_tensor *out, const em_tensor *x, const em_tensor *w,
                            const em_tensor *b, const em_tensor *mean, const em_tensor *rstd,
                            const em_norm_geom *g);
int em_ag_record_embedding(em_tensor *out, const em_tensor *weight, const em_tensor *indices,
                           int64_t padding_idx);
/* query/key/value: the user's tensors (the node's inputs); q4..mask4 the [B, H, T, E] views
 * the kernel saw, out4 its output and lse its log-sum-exp rows (formulas_attention.c). */
int em_ag_record_attention(em_tensor *out, const em_tensor *query, const em_tensor *key,
                           const em_tensor *value, const em_tensor *q4, const em_tensor *k4,
                           const em_tensor *v4, const em_tensor *out4, const em_tensor *lse,
                           const em_tensor *mask4, const em_attn_geom *g);
int em_ag_record_class_loss(bool log_softmax, em_tensor *out, const em_tensor *x,
                            const em_tensor *lse, const em_tensor *target,
                            const em_tensor *weight, const em_class_loss *L, int reduction,
                            const em_tensor *denom);

/* ---- CPU kernels ----------------------------------------------------------------------------
 * Strong references, like the other families' entry points (cpu.h says why). */
int em_cpu_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                  const em_conv_geom *g);
int em_cpu_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                             const em_tensor *bias, const em_conv_geom *g);
int em_cpu_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                              const em_conv_geom *g);
int em_cpu_max_pool2d(em_tensor *y, em_tensor *indices, const em_tensor *x,
                      const em_pool_geom *g);
int em_cpu_max_unpool2d(em_tensor *gx, const em_tensor *gy, const em_tensor *indices);
int em_cpu_avg_pool2d(em_tensor *y, const em_tensor *x, const em_pool_geom *g);
int em_cpu_avg_pool2d_backward(em_tensor *gx, const em_tensor *gy, const em_pool_geom *g);
int em_cpu_batch_norm_stats(em_tensor *mean, em_tensor *var, const em_tensor *x);
int em_cpu_channel_affine(em_tensor *y, const em_tensor *x, const em_tensor *scale,
                          const em_tensor *shift);
int em_cpu_batch_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                               const em_tensor *x, const em_tensor *mean,
                               const em_tensor *invstd, const em_tensor *weight, int training);
int em_cpu_group_norm(em_tensor *y, em_tensor *mean, em_tensor *rstd, const em_tensor *x,
                      const em_tensor *weight, const em_tensor *bias, const em_norm_geom *g);
int em_cpu_group_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                               const em_tensor *x, const em_tensor *mean, const em_tensor *rstd,
                               const em_tensor *weight, const em_norm_geom *g);
int em_cpu_class_loss(int log_softmax, em_tensor *loss, em_tensor *lse, em_tensor *total_weight,
                      const em_tensor *x, const em_tensor *target, const em_tensor *weight,
                      const struct em_class_loss *L);
int em_cpu_class_loss_backward(int log_softmax, em_tensor *gx, const em_tensor *gloss,
                               const em_tensor *x, const em_tensor *lse, const em_tensor *target,
                               const em_tensor *weight, const struct em_class_loss *L);
int em_cpu_ctc_loss(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                    const em_tensor *targets, const int64_t *input_lengths,
                    const int64_t *target_lengths, const int64_t *target_offsets, int64_t blank,
                    int zero_infinity);
/* Records loss = ctc_loss(log_probs) with its gradient computed by the forward (nn_ctc.c). */
int em_ag_record_ctc(em_tensor *loss, const em_tensor *log_probs, const em_tensor *grad);
int em_cpu_attention(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                     const em_tensor *v, const em_tensor *mask, const em_attn_geom *g);
int em_cpu_attention_backward(em_tensor *gq, em_tensor *gk, em_tensor *gv, const em_tensor *gout,
                              const em_tensor *q, const em_tensor *k, const em_tensor *v,
                              const em_tensor *out, const em_tensor *lse, const em_tensor *mask,
                              const em_attn_geom *g);

#endif
