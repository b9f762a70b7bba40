/* quant_cpu_linear.c: the driver of the CPU quantized Linear (runtime/src/quant/quant_cpu.h):
 * argument checks, the choice of path (AVX-512 VNNI, AVX2, portable), the activations' int8
 * quantization, and the threading.
 *
 * Threads take panels of 16 weight rows (static schedule, so each thread streams its own
 * contiguous share of the weight exactly once: at batch 1 the product is a read of W). Within a
 * panel, K goes by chunks of EM_QC_KC: a chunk is decoded into a thread's buffer (22 KiB, in L1
 * or L2) and then used by every activation row, so at batch 64 the decoding is paid once per 64
 * rows. When there are fewer panels than threads, the activation rows are split as well. */
#include "../../internal.h"
#include "../quant_cpu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { PATH_PORTABLE, PATH_AVX2, PATH_VNNI };
static const char *path_names[] = { "portable", "avx2", "vnni" };

static int cpu_has(int path) {
  __builtin_cpu_init();
  if (path == PATH_VNNI)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("fma");
  if (path == PATH_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return 1;
}

/* The path of this call: EMBER_QUANT_CPU if set (checked against the CPU), else the best. */
static int choose_path(void) {
  const char *env = getenv("EMBER_QUANT_CPU");
  if (env && env[0]) {
    for (int p = 0; p < 3; p++)
      if (strcmp(env, path_names[p]) == 0) {
        if (!cpu_has(p))
          return em_error("quant_cpu_linear: EMBER_QUANT_CPU=%s, but this CPU lacks the "
                          "instructions of that path", env), -1;
        return p;
      }
    return em_error("quant_cpu_linear: expected EMBER_QUANT_CPU to be vnni, avx2 or portable, "
                    "got '%s'", env), -1;
  }
  return cpu_has(PATH_VNNI) ? PATH_VNNI : cpu_has(PATH_AVX2) ? PATH_AVX2 : PATH_PORTABLE;
}

const char *em_quant_cpu_path(void) {
  int p = choose_path();
  return p < 0 ? NULL : path_names[p];
}

int em_quant_cpu_has(const char *path) {
  for (int p = 0; p < 3; p++)
    if (strcmp(path, path_names[p]) == 0) return cpu_has(p);
  return 0;
}

/* One activation row to int8 per 32: codes, scale, code sums of the block and of its first 16.
 * A block holding a NaN or inf gets a NaN scale and zero codes: its outputs turn NaN. */
static void quantize_row(const float *x, int64_t k, int8_t *q, float *d, int32_t *s, int32_t *slo) {
  for (int64_t b = 0; b < k / 32; b++) {
    const float *xb = x + b * 32;
    float amax = 0, probe = 0;
    for (int j = 0; j < 32; j++) { amax = fmaxf(amax, fabsf(xb[j])); probe += xb[j] * 0.0f; }
    int8_t *qb = q + b * 32;
    if (probe != 0.0f) {  /* only NaN: 0 * inf and NaN * 0 are NaN, finite * 0 sums to 0 */
      memset(qb, 0, 32);
      d[b] = NAN; s[b] = slo[b] = 0;
      continue;
    }
    float sc = amax / 127.0f, inv = sc != 0 ? 1.0f / sc : 0.0f;
    int32_t sum = 0, sum_lo = 0;
    for (int j = 0; j < 32; j++) {
      qb[j] = (int8_t)lrintf(xb[j] * inv);
      sum += qb[j];
      if (j < 16) sum_lo += qb[j];
    }
    d[b] = sc; s[b] = sum; slo[b] = sum_lo;
  }
}

static void format_info(int format, int64_t group, int symmetric, int64_t be, int64_t bb,
                        em_qc_format *f) {
  memset(f, 0, sizeof *f);
  f->format = format; f->group = group; f->symmetric = symmetric;
  f->block_elems = be; f->block_bytes = bb;
  switch (format) {
  case EM_QUANT_Q8_0: f->z = 128; break;
  case EM_QUANT_Q4_0: f->z = 8; break;
  case EM_QUANT_Q4_1: case EM_QUANT_Q4_K: f->has_min = 1; break;
  case EM_QUANT_Q6_K: f->z = 32; f->split = 1; break;
  default:
    if (symmetric) f->z = format == EM_QUANT_AFFINE8 ? 128 : 8;
    else f->has_min = 1;
    break;
  }
}

int em_quant_cpu_linear(const float *x, int64_t m, int64_t k, const uint8_t *w, int64_t n,
                        int format, int64_t group, int symmetric, float *out) {
  int64_t be = 0, bb = 0;
  if (em_quant_block_size(format, group, symmetric, &be, &bb) != 0) return -1;
  if (m < 0 || k < 0 || n < 0)
    return em_error("quant_cpu_linear: expected sizes >= 0, got m %lld, k %lld, n %lld",
                    (long long)m, (long long)k, (long long)n);
  if (k % be != 0)
    return em_error("quant_cpu_linear: expected k to be a multiple of the block (%lld weights), "
                    "got %lld", (long long)be, (long long)k);
  int path = choose_path();
  if (path < 0) return -1;
  if (m == 0 || n == 0) return 0;
  if (!out || (k > 0 && (!x || !w)))
    return em_error("quant_cpu_linear: expected x, w and out, got a NULL pointer");
  if (k == 0) { memset(out, 0, (size_t)(m * n) * sizeof(float)); return 0; }

  em_qc_format f;
  format_info(format, group, symmetric, be, bb, &f);
  const int64_t nb = k / 32, row_bytes = k / be * bb, npanel = (n + EM_QC_NR - 1) / EM_QC_NR;
  int threads = em_get_num_threads();
  if ((double)m * (double)n * (double)k < 65536.0) threads = 1;
  const int mv_threads = threads < n ? threads : (int)n; /* the few-row kernel: over rows of W */
  /* fewer panels than threads: split the activation rows too (in fours, the kernel's step) */
  int64_t groups = 1;
  if (npanel < threads && m > 4) {
    groups = (threads + npanel - 1) / npanel;
    if (groups > (m + 3) / 4) groups = (m + 3) / 4;
  }
  int64_t rows_per = (m + groups - 1) / groups;
  rows_per = (rows_per + 3) / 4 * 4;
  groups = (m + rows_per - 1) / rows_per;
  if (threads > npanel * groups) threads = (int)(npanel * groups);

  const size_t chunk = EM_QC_KC / 32, per_thread = chunk * sizeof(em_qc_block) +
                       (size_t)rows_per * EM_QC_NR * sizeof(float);
  int8_t *q = malloc((size_t)(m * k));
  float *d = malloc((size_t)(m * nb) * sizeof(float));
  int32_t *s = malloc((size_t)(m * nb) * sizeof(int32_t) * 2);
  uint8_t *work = NULL;
  if (!q || !d || !s) {
    free(q); free(d); free(s);
    return em_error("quant_cpu_linear: out of memory for the activations of [%lld, %lld]",
                    (long long)m, (long long)k);
  }
  int32_t *slo = s + m * nb;
#pragma omp parallel for num_threads(em_threads_for(m * k)) schedule(static)
  for (int64_t i = 0; i < m; i++)
    quantize_row(x + i * k, k, q + i * k, d + i * nb, s + i * nb, slo + i * nb);
  const em_qc_act act = { q, d, s, slo, k, nb };
  if (path == PATH_VNNI) {
    int done = em_qc_matvec_vnni(&f, &act, m, w, n, out, mv_threads);
    if (done != 0) {
      free(q); free(d); free(s);
      return done < 0 ? em_error("quant_cpu_linear: out of memory") : 0;
    }
  }
  work = aligned_alloc(64, (per_thread + 63) / 64 * 64 * (size_t)threads);
  if (!work) {
    free(q); free(d); free(s);
    return em_error("quant_cpu_linear: out of memory for the weight panels");
  }
  const em_qc_kernel kernel = path == PATH_VNNI ? em_qc_kernel_vnni
                              : path == PATH_AVX2 ? em_qc_kernel_avx2 : em_qc_kernel_portable;

#pragma omp parallel num_threads(threads)
  {
    uint8_t *mine = work + (per_thread + 63) / 64 * 64 * (size_t)omp_get_thread_num();
    em_qc_block *blk = (em_qc_block *)mine;
    float *acc = (float *)(mine + chunk * sizeof(em_qc_block));
#pragma omp for schedule(static)
    for (int64_t task = 0; task < npanel * groups; task++) {
      const int64_t p = task / groups, i0 = task % groups * rows_per;
      const int64_t ni = m - i0 < rows_per ? m - i0 : rows_per;
      const int nr = (int)(n - p * EM_QC_NR < EM_QC_NR ? n - p * EM_QC_NR : EM_QC_NR);
      memset(acc, 0, (size_t)ni * EM_QC_NR * sizeof(float));
      for (int64_t kb = 0; kb < nb; kb += (int64_t)chunk) {
        const int64_t nkb = nb - kb < (int64_t)chunk ? nb - kb : (int64_t)chunk;
        const int64_t r0 = p * EM_QC_NR;
        if (!(path == PATH_VNNI && em_qc_pack_vnni(&f, w, row_bytes, r0, nr, kb, nkb, blk)))
          em_qc_pack(&f, w, row_bytes, r0, nr, kb, nkb, blk);
        kernel(&f, &act, i0, ni, kb, nkb, blk, acc);
      }
      for (int64_t i = 0; i < ni; i++)
        memcpy(out + (i0 + i) * n + p * EM_QC_NR, acc + i * EM_QC_NR, (size_t)nr * sizeof(float));
    }
  }
  free(q); free(d); free(s); free(work);
  return 0;
}
