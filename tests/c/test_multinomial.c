/*
 * test_multinomial.c: em_multinomial from C (embedders' view: 0-based categories), against
 * the Philox stream read directly (em_philox4x32), so the word layout of docs/api/random.md is
 * checked independently of the kernels:
 *  - with two equal weights, draw j is category 1 exactly when word j's uniform (x >> 8) 2^-24
 *    is at least 1/2, i.e. when the word's top bit is set;
 *  - without replacement, weights {1, 0, 1}: the first draw is the category whose word gives
 *    the larger uniform (the smaller key -log u), then the other; 1 is never drawn;
 *  - the errors and the offset's advance.
 */
#include "check.h"
#include "../../runtime/src/random.h"

static uint32_t word(uint64_t seed, uint64_t offset, int64_t j) {
  uint32_t b[4];
  em_philox4x32(seed, offset + (uint64_t)j / 4, b);
  return b[j % 4];
}

static em_tensor *weights(const float *w, int64_t rows, int64_t k) {
  int64_t sizes[2] = {rows, k};
  return em_from_buffer(w, EM_FLOAT32, rows > 1 ? 2 : 1, rows > 1 ? sizes : sizes + 1,
                        EM_FLOAT32, 0);
}

static void test_with_replacement(void) {
  const float w[2] = {3, 3};
  em_tensor *p = weights(w, 1, 2);
  em_manual_seed(77);
  em_tensor *s = em_multinomial(p, 37, 1);
  CHECK(s != NULL && s->ndim == 1 && s->sizes[0] == 37 && s->dtype_id == EM_INT64);
  const int64_t *v = s ? em_data_ptr(s) : NULL;
  int ok = v != NULL;
  for (int64_t j = 0; ok && j < 37; j++) ok = v[j] == (int64_t)(word(77, 0, j) >> 31);
  CHECK(ok);
  uint64_t seed, off;
  em_rng_get_state(&seed, &off);
  CHECK(off == 10); /* ceil(37 / 4) */
  em_release(s);
  em_release(p);
}

static void test_without_replacement(void) {
  const float w[6] = {1, 0, 1, 1, 0, 1};
  em_tensor *p = weights(w, 2, 3);
  em_manual_seed(5);
  em_tensor *s = em_multinomial(p, 2, 0);
  CHECK(s != NULL && s->ndim == 2 && s->sizes[0] == 2 && s->sizes[1] == 2);
  const int64_t *v = s ? em_data_ptr(s) : NULL;
  for (int r = 0; v && r < 2; r++) {
    /* row r's key of category i comes from word r * 3 + i */
    uint32_t u0 = word(5, 0, r * 3) >> 8, u2 = word(5, 0, r * 3 + 2) >> 8;
    int64_t first = u0 >= u2 ? 0 : 2; /* equal uniforms: the earlier category (stable) */
    CHECK(v[2 * r] == first && v[2 * r + 1] == 2 - first);
  }
  uint64_t seed, off;
  em_rng_get_state(&seed, &off);
  CHECK(off == 2); /* ceil(6 / 4): one word per weight */
  em_release(s);
  em_release(p);
}

static void test_errors(void) {
  const float bad[3] = {1, -2, 1}, zero[2] = {0, 0}, few[3] = {0, 1, 0};
  em_tensor *p = weights(bad, 1, 3), *z = weights(zero, 1, 2), *f = weights(few, 1, 3);
  CHECK_ERROR(em_multinomial(p, 1, 1) == NULL, "got -2 at row 1, position 2 (counting from 1)");
  CHECK_ERROR(em_multinomial(z, 1, 1) == NULL, "are all zero");
  CHECK_ERROR(em_multinomial(f, 2, 0) == NULL, "which has 1 nonzero weights");
  CHECK_ERROR(em_multinomial(f, 4, 0) == NULL, "from 3 categories");
  CHECK_ERROR(em_multinomial(f, 0, 1) == NULL, "expected a number of samples >= 1, got 0");
  CHECK_ERROR(em_multinomial(NULL, 1, 1) == NULL, "expected a tensor, got NULL");
  em_release(p);
  em_release(z);
  em_release(f);
}

int main(void) {
  test_with_replacement();
  test_without_replacement();
  test_errors();
  return check_report();
}
