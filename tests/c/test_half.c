/*
 * test_half.c: float16 and bfloat16 conversions on the CPU against a reference written here
 * from the formats' definitions (ldexp and exact double arithmetic): every one of the 65536
 * bit patterns decoded, and float32 values around every rounding boundary encoded. Both the
 * bulk path (contiguous casts) and the per-element path (a strided cast) are checked, and the
 * whole test runs again in a child process with EMBER_CPU_F16C=0, the software path of CPUs
 * without F16C.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static float ref_half_to_float(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0) v = ldexp(m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp(1024 + m, e - 25);
  return (float)(sign ? -v : v);
}

static float ref_bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Nearest representable value, ties to the even pattern: a binary search over the positive
 * patterns, whose values increase with the pattern. */
static uint16_t ref_encode(float f, float (*decode)(uint16_t), uint16_t inf_bits) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  double max = decode((uint16_t)(inf_bits - 1)), ulp = max - decode((uint16_t)(inf_bits - 2));
  if (a >= max + ulp / 2) return (uint16_t)(sign | inf_bits);
  uint32_t lo = 0, hi = inf_bits - 1; /* decode(lo) <= a < decode(hi + 1) */
  while (lo < hi) {
    uint32_t mid = (lo + hi + 1) / 2;
    if ((double)decode((uint16_t)mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  uint32_t best = lo;
  if (lo + 1 < inf_bits) {
    double below = a - decode((uint16_t)lo), above = decode((uint16_t)(lo + 1)) - a;
    if (above < below || (above == below && (lo & 1))) best = lo + 1;
  }
  return (uint16_t)(sign | best);
}

static em_tensor *cast(const void *data, em_dtype from, int64_t n, em_dtype to, int strided) {
  int64_t sizes[1] = {n};
  em_tensor *t = em_from_buffer(data, from, 1, sizes, from, 0);
  if (strided) { /* every element twice, then every other one: a stride-2 view */
    int64_t s2[2] = {n, 2};
    em_tensor *u = em_unsqueeze(t, 1);
    em_tensor *e = em_expand(u, 2, s2);
    em_tensor *c = em_contiguous(e);
    em_tensor *v = em_view(c, 1, (int64_t[]){2 * n});
    em_tensor *w = em_slice(v, 0, 0, 2 * n, 2);
    em_release(u), em_release(e), em_release(c), em_release(v), em_release(t);
    t = w;
  }
  em_tensor *r = em_to_dtype(t, to);
  em_release(t);
  return r;
}

static void test_decode_every_pattern(em_dtype d, float (*ref)(uint16_t)) {
  uint16_t *all = malloc(65536 * sizeof *all);
  for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  for (int strided = 0; strided < 2; strided++) {
    em_tensor *f = cast(all, d, 65536, EM_FLOAT32, strided);
    CHECK(f != NULL);
    if (!f) break;
    const float *p = em_data_ptr(f);
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
      float want = ref((uint16_t)i);
      if (want != want ? p[i] == p[i] : memcmp(&p[i], &want, 4) != 0) {
        if (bad++ < 3) fprintf(stderr, "decode %s 0x%04x: got %a want %a\n", em_dtype_name(d), i, p[i], want);
      }
    }
    CHECK(bad == 0);
    em_release(f);
  }
  free(all);
}

static void test_encode(em_dtype d, float (*decode)(uint16_t), uint16_t inf_bits) {
  /* every boundary between neighbours (and its float32 neighbours), plus random values */
  enum { N = 3 * 32768 + 4096 };
  float *x = malloc(N * sizeof *x);
  int n = 0;
  for (uint32_t p = 0; p + 1 < inf_bits; p++) {
    if (n + 3 > N - 4096) break;
    float mid = (float)(((double)decode((uint16_t)p) + decode((uint16_t)(p + 1))) / 2);
    x[n++] = mid;
    x[n++] = nextafterf(mid, 0);
    x[n++] = nextafterf(mid, INFINITY);
  }
  srand(7);
  for (int i = 0; i < 4096; i++) {
    uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
    float f;
    memcpy(&f, &u, 4);
    x[n++] = f != f ? 1.0f : (i & 1 ? -f : f);
  }
  for (int strided = 0; strided < 2; strided++) {
    em_tensor *h = cast(x, EM_FLOAT32, n, d, strided);
    CHECK(h != NULL);
    if (!h) break;
    const uint16_t *p = em_data_ptr(h);
    int bad = 0;
    for (int i = 0; i < n; i++) {
      uint16_t want = ref_encode(x[i], decode, inf_bits);
      if (p[i] != want && bad++ < 3)
        fprintf(stderr, "encode %s %a: got 0x%04x want 0x%04x\n", em_dtype_name(d), x[i], p[i], want);
    }
    CHECK(bad == 0);
    em_release(h);
  }
  /* NaN stays NaN (of its sign), infinities stay infinities */
  float special[4] = {NAN, -NAN, INFINITY, -INFINITY};
  em_tensor *h = cast(special, EM_FLOAT32, 4, d, 0);
  const uint16_t *p = em_data_ptr(h);
  em_tensor *back = em_to_dtype(h, EM_FLOAT32);
  const float *b = em_data_ptr(back);
  CHECK(b[0] != b[0] && b[1] != b[1] && !signbit(b[0]) && signbit(b[1]));
  CHECK(p[2] == inf_bits && p[3] == (0x8000 | inf_bits));
  em_release(back);
  em_release(h);
  free(x);
}

int main(int argc, char **argv) {
  (void)argc;
  test_decode_every_pattern(EM_FLOAT16, ref_half_to_float);
  test_decode_every_pattern(EM_BFLOAT16, ref_bf16_to_float);
  test_encode(EM_FLOAT16, ref_half_to_float, 0x7c00);
  test_encode(EM_BFLOAT16, ref_bf16_to_float, 0x7f80);
  if (getenv("EMBER_CPU_F16C") == NULL) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      setenv("EMBER_CPU_F16C", "0", 1);
      execv(argv[0], argv);
      _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
  }
  return check_report();
}
