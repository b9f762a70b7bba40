/*
 * test_random.c: the random generator from C. Known-answer tests of the Philox-4x32-10 block
 * function against the published Random123 vectors, then the stream layout (random.h) checked
 * value by value from the raw block function, state save/restore, concurrent reservations,
 * thread-count independence and the error messages.
 */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "../../runtime/src/random.h"

/* Random123's tests/kat_vectors, the three "philox4x32 10" lines: counter (4 words), key
 * (2 words), expected output (4 words). Checked against copies quoted in several independent
 * implementations (Random123's Python port by E. Sarmas, and Rust and Go test suites). */
static const uint32_t kat[3][10] = {
  {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
   0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
  {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
   0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
  {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
   0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
};

static void test_known_answers(void) {
  for (int v = 0; v < 3; v++) {
    uint32_t out[4];
    em_philox4x32_10(kat[v], kat[v] + 4, out);
    for (int k = 0; k < 4; k++) CHECK(out[k] == kat[v][6 + k]);
  }
  /* The exported stream function: key = seed, counter = (c, 0). The all-zero vector is one of
   * its blocks; the third vector's upper counter words are not zero, so check the mapping. */
  uint32_t out[4];
  em_philox4x32(0, 0, out);
  CHECK(out[0] == 0x6627e8d5 && out[1] == 0xe169c58d && out[2] == 0xbc57ac4c &&
        out[3] == 0x9b00dbd8);
  const uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0, 0}, key[2] = {0xa4093822, 0x299f31d0};
  uint32_t want[4];
  em_philox4x32_10(ctr, key, want);
  em_philox4x32(UINT64_C(0x299f31d0a4093822), UINT64_C(0x85a308d3243f6a88), out);
  CHECK(memcmp(out, want, sizeof out) == 0);
  CHECK(want[0] != kat[2][6]); /* the upper counter words matter */
}

static uint32_t word(uint64_t seed, uint64_t offset, int64_t j) {
  uint32_t b[4];
  em_philox4x32(seed, offset + (uint64_t)j / 4, b);
  return b[j % 4];
}

static uint64_t word64(uint64_t seed, uint64_t offset, int64_t i) {
  return (uint64_t)word(seed, offset, 2 * i) | (uint64_t)word(seed, offset, 2 * i + 1) << 32;
}

static void test_stream_layout(void) {
  const uint64_t seed = 1234;
  em_manual_seed(seed);
  int64_t n = 10;
  em_tensor *r = em_rand(1, &n, EM_FLOAT32, 0);
  const float *f = em_data_ptr(r);
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= f[i] == (float)((word(seed, 0, i) >> 8) * 0x1p-24);
  CHECK(ok);
  uint64_t s, off;
  em_rng_get_state(&s, &off);
  CHECK(s == seed && off == 3); /* ceil(10 / 4) blocks */

  /* float64: 53 bits of a word pair; the request starts at the current offset. */
  em_tensor *d = em_rand(1, &n, EM_FLOAT64, 0);
  const double *dv = em_data_ptr(d);
  ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= dv[i] == (double)(word64(seed, 3, i) >> 11) * 0x1p-53;
  CHECK(ok);
  em_rng_get_state(&s, &off);
  CHECK(off == 3 + 5);

  /* randint: low + high 64 bits of x * range. */
  em_tensor *k = em_randint(-5, 1000, 1, &n, EM_INT64, 0);
  const int64_t *kv = em_data_ptr(k);
  ok = 1;
  for (int64_t i = 0; i < n; i++) {
    unsigned __int128 prod = (unsigned __int128)word64(seed, 8, i) * 1005u;
    ok &= kv[i] == -5 + (int64_t)(prod >> 64);
  }
  CHECK(ok);

  /* randn (float64): Box-Muller, pairs (2k, 2k+1) share one block. */
  em_tensor *z = em_randn(1, &n, EM_FLOAT64, 0);
  const double *zv = em_data_ptr(z);
  ok = 1;
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = (double)((word64(seed, 13, i) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(word64(seed, 13, i + 1) >> 11) * 0x1p-53;
    double rad = sqrt(-2 * log(u1)), t = 6.283185307179586 * u2;
    ok &= check_close(zv[i], rad * cos(t), 1e-12) && check_close(zv[i + 1], rad * sin(t), 1e-12);
  }
  CHECK(ok);
  em_release(r);
  em_release(d);
  em_release(k);
  em_release(z);
}

static void test_state_replay(void) {
  int64_t sizes[2] = {7, 9};
  em_manual_seed(99);
  em_tensor *skip = em_randn(2, sizes, EM_FLOAT32, 0);
  uint64_t seed, offset;
  em_rng_get_state(&seed, &offset);
  em_tensor *a = em_rand(2, sizes, EM_FLOAT32, 0);
  em_manual_seed(5); /* something else in between */
  em_tensor *junk = em_rand(2, sizes, EM_FLOAT32, 0);
  em_rng_set_state(seed, offset);
  em_tensor *b = em_rand(2, sizes, EM_FLOAT32, 0);
  CHECK(memcmp(em_data_ptr(a), em_data_ptr(b), 63 * sizeof(float)) == 0);
  CHECK(memcmp(em_data_ptr(a), em_data_ptr(junk), 63 * sizeof(float)) != 0);
  CHECK(em_initial_seed() == 99);
  em_release(skip);
  em_release(a);
  em_release(junk);
  em_release(b);
}

enum { RESERVERS = 4, RESERVATIONS = 20000 };
static uint64_t reserved[RESERVERS][RESERVATIONS];

static void *reserver(void *arg) {
  uint64_t *mine = arg;
  for (int i = 0; i < RESERVATIONS; i++) mine[i] = em_rng_reserve(3, NULL);
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Reservations from several threads never overlap and none is lost. */
static void test_concurrent_reserve(void) {
  em_rng_set_state(1, 0);
  pthread_t th[RESERVERS];
  for (int t = 0; t < RESERVERS; t++) pthread_create(&th[t], NULL, reserver, reserved[t]);
  for (int t = 0; t < RESERVERS; t++) pthread_join(th[t], NULL);
  uint64_t seed, offset;
  em_rng_get_state(&seed, &offset);
  CHECK(offset == (uint64_t)RESERVERS * RESERVATIONS * 3);
  uint64_t *all = &reserved[0][0];
  qsort(all, RESERVERS * RESERVATIONS, sizeof *all, cmp_u64);
  int ok = 1;
  for (int i = 0; i < RESERVERS * RESERVATIONS; i++) ok &= all[i] == (uint64_t)i * 3;
  CHECK(ok);
}

/* The same stream with 1 and 2 threads, for every kind, above the parallel grain. */
static void test_thread_independence(void) {
  int64_t n = 300001; /* odd, and not a multiple of the chunk size */
  int saved = em_get_num_threads();
  for (int kind = 0; kind < 5; kind++) {
    em_tensor *out[2];
    for (int t = 0; t < 2; t++) {
      em_set_num_threads(t + 1);
      em_manual_seed(7);
      switch (kind) {
      case 0: out[t] = em_rand(1, &n, EM_FLOAT32, 0); break;
      case 1: out[t] = em_randn(1, &n, EM_FLOAT32, 0); break;
      case 2: out[t] = em_randn(1, &n, EM_FLOAT64, 0); break;
      case 3: out[t] = em_randint(0, 77, 1, &n, EM_INT32, 0); break;
      default:
        out[t] = em_zeros(1, &n, EM_UINT8, 0);
        em_bernoulli_(out[t], 0.3);
        break;
      }
    }
    size_t bytes = (size_t)n * em_dtype_size((em_dtype)out[0]->dtype_id);
    CHECK(memcmp(em_data_ptr(out[0]), em_data_ptr(out[1]), bytes) == 0);
    em_release(out[0]);
    em_release(out[1]);
  }
  em_set_num_threads(saved);
}

static void test_bounds(void) {
  /* uniform_ never returns high, even where a + (b - a) u rounds up to it. */
  int64_t n = 200000;
  em_manual_seed(3);
  em_tensor *h = em_empty(1, &n, EM_BFLOAT16, 0);
  CHECK(em_uniform_(h, 1.0, 2.0) == 0);
  em_tensor *f = em_to_dtype(h, EM_FLOAT64);
  const double *v = em_data_ptr(f);
  int ok = 1, saw_top = 0;
  for (int64_t i = 0; i < n; i++) {
    ok &= v[i] >= 1.0 && v[i] < 2.0;
    saw_top |= v[i] == 2.0 - 0x1p-7; /* the largest bfloat16 below 2 */
  }
  CHECK(ok);
  CHECK(saw_top);
  em_release(h);
  em_release(f);
}

static void test_errors(void) {
  int64_t s[1] = {4};
  CHECK_ERROR(em_rand(1, s, EM_INT64, 0) == NULL, "rand: expected a floating point dtype, got int64");
  CHECK_ERROR(em_randn(1, s, EM_BOOL, 0) == NULL, "randn: expected a floating point dtype, got bool");
  CHECK_ERROR(em_randint(3, 3, 1, s, EM_INT64, 0) == NULL, "randint: expected low < high, got low=3, high=3");
  CHECK_ERROR(em_randint(0, 300, 1, s, EM_UINT8, 0) == NULL, "randint: range [0, 300) does not fit in uint8");
  CHECK_ERROR(em_randperm(-1, EM_INT64, 0) == NULL, "randperm: expected n >= 0, got -1");
  CHECK_ERROR(em_randperm(1000, EM_INT8, 0) == NULL, "randperm: n=1000 is too large for int8");
  em_tensor *x = em_zeros(1, s, EM_FLOAT32, 0);
  em_tensor *i = em_zeros(1, s, EM_INT32, 0);
  CHECK_ERROR(em_bernoulli_(x, 1.5), "bernoulli_: expected p in [0, 1], got 1.5");
  CHECK_ERROR(em_bernoulli_(x, NAN), "bernoulli_: expected p in [0, 1], got nan");
  CHECK_ERROR(em_normal_(x, 0, -1), "normal_: expected std >= 0, got -1");
  CHECK_ERROR(em_uniform_(x, 2, 1), "uniform_: expected low <= high, got low=2, high=1");
  CHECK_ERROR(em_uniform_(i, 0, 1), "uniform_: expected a floating point tensor, got int32");
  /* A failed call draws nothing. */
  uint64_t seed, before, after;
  em_rng_get_state(&seed, &before);
  CHECK_ERROR(em_normal_(x, 0, -1), "std >= 0");
  em_rng_get_state(&seed, &after);
  CHECK(before == after);
  em_release(x);
  em_release(i);
}

int main(void) {
  /* First, before anything seeds: the documented default. */
  CHECK(em_initial_seed() == UINT64_C(67280421310721));
  test_known_answers();
  test_stream_layout();
  test_state_replay();
  test_concurrent_reserve();
  test_thread_independence();
  test_bounds();
  test_errors();
  return check_report();
}
