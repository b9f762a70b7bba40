/*
 * bench_conv.c: each pass of the Fashion-MNIST CNN's convolution and pooling layers at batch
 * 64, timed through the public C API (best of many runs, milliseconds, GFLOPS where it means
 * something). The input gradient of conv2d is conv_transpose2d with the same weight; the
 * weight gradient is conv2d_weight.
 *   build/bench_conv [threads]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ember.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef em_tensor *(*pass_fn)(void *ctx);

static void bench(const char *name, pass_fn f, void *ctx, double gflop, int threads) {
  double best = 1e9;
  for (int r = 0; r < 40; r++) {
    double t = now();
    em_tensor *y = f(ctx);
    t = now() - t;
    if (y == NULL) {
      fprintf(stderr, "%s: %s\n", name, em_last_error());
      exit(1);
    }
    em_release(y);
    if (r >= 3 && t < best) best = t;
  }
  if (gflop > 0)
    printf("%d  %-36s %7.3f ms  %6.1f GFLOPS\n", threads, name, best * 1e3, gflop / best);
  else
    printf("%d  %-36s %7.3f ms\n", threads, name, best * 1e3);
}

typedef struct layer {
  em_tensor *x, *w, *b, *gy;
  int64_t ws[4], pad[2], one[2];
} layer;

static em_tensor *fwd(void *c) {
  layer *l = c;
  return em_conv2d(l->x, l->w, l->b, l->one, l->pad, l->one, 1);
}
static em_tensor *igrad(void *c) {
  layer *l = c;
  int64_t zero[2] = {0, 0};
  return em_conv_transpose2d(l->gy, l->w, NULL, l->one, l->pad, zero, l->one, 1);
}
static em_tensor *wgrad(void *c) {
  layer *l = c;
  return em_conv2d_weight(l->x, l->ws, l->gy, l->one, l->pad, l->one, 1);
}

typedef struct pool {
  em_tensor *x, *gy, *ind;
  int64_t k[2], out[2];
} pool;

static em_tensor *pool_fwd(void *c) {
  pool *p = c;
  em_tensor *ind = NULL;
  em_tensor *y = em_max_pool2d(p->x, p->k, NULL, NULL, NULL, 0, &ind);
  em_release(ind);
  return y;
}
static em_tensor *pool_bwd(void *c) {
  pool *p = c;
  return em_max_unpool2d(p->gy, p->ind, p->out);
}

static void layer_init(layer *l, int64_t N, int64_t C, int64_t H, int64_t M, int64_t k) {
  int64_t xs[4] = {N, C, H, H}, ws[4] = {M, C, k, k}, bs[1] = {M}, ys[4] = {N, M, H, H};
  l->x = em_randn(4, xs, EM_FLOAT32, 0);
  l->w = em_randn(4, ws, EM_FLOAT32, 0);
  l->b = em_randn(1, bs, EM_FLOAT32, 0);
  l->gy = em_randn(4, ys, EM_FLOAT32, 0);
  for (int i = 0; i < 4; i++) l->ws[i] = ws[i];
  l->pad[0] = l->pad[1] = k / 2;
  l->one[0] = l->one[1] = 1;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : em_get_num_threads();
  em_set_num_threads(threads);
  em_manual_seed(0);
  layer c1, c2;
  layer_init(&c1, 64, 1, 28, 32, 5);
  layer_init(&c2, 64, 32, 14, 64, 5);
  double f1 = 2.0 * 64 * 32 * 28 * 28 * 25 * 1e-9, f2 = 2.0 * 64 * 64 * 14 * 14 * 800 * 1e-9;
  bench("conv1 forward", fwd, &c1, f1, threads);
  bench("conv1 weight grad", wgrad, &c1, f1, threads);
  bench("conv2 forward", fwd, &c2, f2, threads);
  bench("conv2 input grad", igrad, &c2, f2, threads);
  bench("conv2 weight grad", wgrad, &c2, f2, threads);
  pool p1 = {0};
  int64_t xs[4] = {64, 32, 28, 28}, ys[4] = {64, 32, 14, 14};
  p1.x = em_randn(4, xs, EM_FLOAT32, 0);
  p1.gy = em_randn(4, ys, EM_FLOAT32, 0);
  p1.k[0] = p1.k[1] = 2;
  p1.out[0] = p1.out[1] = 28;
  em_tensor *y = em_max_pool2d(p1.x, p1.k, NULL, NULL, NULL, 0, &p1.ind);
  em_release(y);
  bench("maxpool2 [64,32,28,28] forward", pool_fwd, &p1, 0, threads);
  bench("max_unpool2d (backward + index check)", pool_bwd, &p1, 0, threads);
  return 0;
}
