/*
 * conv_impl.h: what the CPU convolution paths share (conv.c: BLAS, float32/float64;
 * conv_packed.c: float32 on the packed AVX-512 product; conv_bf16.c: bfloat16): the per-call plan, the threading
 * rule, and the column helpers; conv_direct.c's entry points.
 */
#ifndef EMBER_CPU_CONV_IMPL_H
#define EMBER_CPU_CONV_IMPL_H

#include "../nn.h"
#include "cpu.h"

typedef struct conv_plan {
  const em_conv_geom *g;
  bool f64;
  size_t es;
  int64_t Cg, Mg, Kg, P, HW;
  bool direct;     /* 1x1, stride 1, no padding: the columns of x[n,g] are x[n,g] itself */
  int64_t units;   /* N * groups */
  int threads;     /* OpenMP threads over units; 1: units in turn, BLAS threaded */
} conv_plan;

void em_conv_plan_init(conv_plan *p, const em_conv_geom *g, em_dtype dt);
/* The output columns [lo, hi) whose input column ow*s + off falls inside [0, W). */
void em_conv_valid_range(int64_t OW, int64_t W, int64_t s, int64_t off, int64_t *lo,
                         int64_t *hi);
/* x [Cg, H, W] += col2im(cols [Kg, P]); taps in the padding are dropped. */
void em_conv_col2im_add(const conv_plan *p, const char *cols, char *x);
/* out [rows, n] += bias[r] per row. */
void em_conv_add_rows(char *out, const char *bias, int64_t rows, int64_t n, bool f64);

/* conv_packed.c */
int em_conv_packed_forward(em_tensor *y, const em_tensor *x, const em_tensor *w,
                           const em_tensor *bias, const em_conv_geom *g);
int em_conv_packed_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                              const em_tensor *bias, const em_conv_geom *g);
int em_conv_packed_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                               const em_conv_geom *g);

/* conv_direct.c: without im2col, where the *_ok test says the kernels apply */
bool em_conv_direct_forward_ok(const em_conv_geom *g);
bool em_conv_direct_input_grad_ok(const em_conv_geom *g);
bool em_conv_direct_weight_grad_ok(const em_conv_geom *g);
int em_conv_direct_forward(em_tensor *y, const em_tensor *x, const em_tensor *w,
                           const em_tensor *bias, const em_conv_geom *g);
int em_conv_direct_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                              const em_tensor *bias, const em_conv_geom *g);
int em_conv_direct_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                               const em_conv_geom *g);

/* conv_bf16.c: bfloat16 tensors, on the CPU's bf16 instructions (gemm_bf16.h) where it has
 * them, else through float32 */
int em_conv_bf16_forward(em_tensor *y, const em_tensor *x, const em_tensor *w,
                         const em_tensor *bias, const em_conv_geom *g);
int em_conv_bf16_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                            const em_tensor *bias, const em_conv_geom *g);
int em_conv_bf16_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                             const em_conv_geom *g);

#endif
