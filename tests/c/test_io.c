/*
 * test_io.c: the file readers, checkpoints and the batch prefetcher from an embedder's side.
 *
 * Run under AddressSanitizer with leak detection (a C program, unlike LuaJIT, exits cleanly)
 * and under ThreadSanitizer for the prefetcher's workers: many prefetchers are started and
 * dropped at every point of their iteration.
 */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char dir[64];

static const char *path_in(const char *name) {
  static char buf[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static em_tensor *iota(int64_t rows, int64_t cols) {
  int64_t sizes[2] = {rows, cols};
  em_tensor *t = em_empty(2, sizes, EM_FLOAT32, 0);
  float *p = em_data_ptr(t);
  for (int64_t i = 0; i < rows * cols; i++) p[i] = (float)i;
  return t;
}

static void test_safetensors(void) {
  em_tensor *a = iota(3, 4);
  em_tensor *at = em_t(a);
  const char *names[2] = {"a.t", "a"};
  em_tensor *ts[2] = {at, a};
  const char *keys[1] = {"note"}, *values[1] = {"q\"uote\n"};
  const char *p = path_in("x.safetensors");
  CHECK(em_safetensors_save(p, 2, names, ts, 1, keys, values) == 0);
  em_safetensors *f = em_safetensors_open(p);
  CHECK(f != NULL);
  CHECK(em_safetensors_count(f) == 2);
  CHECK(em_safetensors_metadata_count(f) == 1);
  CHECK(strcmp(em_safetensors_metadata_value(f, 0), "q\"uote\n") == 0);
  int64_t i = em_safetensors_find(f, "a.t");
  em_tensor *r = em_safetensors_tensor(f, i);
  CHECK(r && r->sizes[0] == 4 && r->sizes[1] == 3);
  const float *q = em_data_ptr(r);
  CHECK(q[0] == 0 && q[1] == 4 && q[3] == 1); /* the transpose's values, row-major */
  em_release(r);
  em_safetensors_close(f);
  CHECK_ERROR(em_safetensors_open(path_in("missing")) == NULL, "load: cannot open");
  em_release(at);
  em_release(a);
}

static void test_npy_and_idx(void) {
  em_tensor *a = iota(2, 5);
  const char *p = path_in("x.npy");
  CHECK(em_write_npy(p, a) == 0);
  em_tensor *b = em_read_npy(p);
  CHECK(b && b->ndim == 2 && b->sizes[1] == 5 && ((float *)em_data_ptr(b))[9] == 9);
  em_release(b);
  em_release(a);
  CHECK_ERROR(em_read_idx(p) == NULL, "is not an IDX file");
  FILE *f = fopen(path_in("x.idx"), "wb");
  const unsigned char idx[] = {0, 0, 0x0B, 1, 0, 0, 0, 2, 0x01, 0x02, 0xFF, 0xFE};
  fwrite(idx, 1, sizeof idx, f);
  fclose(f);
  em_tensor *c = em_read_idx(path_in("x.idx"));
  CHECK(c && c->dtype_id == EM_INT16 && ((int16_t *)em_data_ptr(c))[0] == 258 &&
        ((int16_t *)em_data_ptr(c))[1] == -2);
  em_release(c);
  f = fopen(path_in("x.csv"), "wb");
  fputs("a;b\n1;2\n3;-4e1\n", f);
  fclose(f);
  em_tensor *d = em_read_csv(path_in("x.csv"), ';', 1, EM_FLOAT64);
  CHECK(d && d->sizes[0] == 2 && ((double *)em_data_ptr(d))[3] == -40);
  em_release(d);
  CHECK_ERROR(em_read_csv(path_in("x.csv"), ';', 0, EM_FLOAT64) == NULL, "line 1, column 1");
}

/* Full iterations with 0..4 workers give the rows asked for. */
static void test_prefetch_values(void) {
  em_tensor *src = iota(100, 3);
  int64_t idx[100];
  for (int i = 0; i < 100; i++) idx[i] = (i * 37) % 100;
  for (int w = 0; w <= 4; w++) {
    em_prefetcher *p = em_prefetcher_new(1, &src, 100, idx, 7, w, 0, -1);
    CHECK(p != NULL && em_prefetcher_num_batches(p) == 15);
    em_tensor *out;
    int b = 0, ok = 1, rc;
    while ((rc = em_prefetcher_next(p, &out)) == 1) {
      const float *v = em_data_ptr(out);
      for (int64_t r = 0; r < out->sizes[0]; r++)
        ok &= v[r * 3 + 1] == (float)(idx[b * 7 + r] * 3 + 1);
      em_release(out);
      b++;
    }
    CHECK(rc == 0 && b == 15 && ok);
    CHECK(em_prefetcher_next(p, &out) == 0);
    em_prefetcher_free(p);
  }
  em_release(src);
}

/* Prefetchers dropped after k batches, for every k: workers must stop and nothing leaks. */
static void test_prefetch_early_stop(void) {
  em_tensor *src = iota(64, 16);
  int64_t idx[64];
  for (int i = 0; i < 64; i++) idx[i] = 63 - i;
  for (int round = 0; round < 3; round++)
    for (int k = 0; k <= 8; k++) {
      em_prefetcher *p = em_prefetcher_new(1, &src, 64, idx, 8, 1 + (k + round) % 4, k % 3, -1);
      em_tensor *out;
      for (int j = 0; j < k; j++)
        if (em_prefetcher_next(p, &out) == 1) em_release(out);
      if (k % 2) usleep(200); /* let workers fill the queue before the stop */
      em_prefetcher_free(p);
    }
  em_release(src);
  CHECK(1);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ember_test_io_XXXXXX");
  if (mkdtemp(dir) == NULL) return 1;
  test_safetensors();
  test_npy_and_idx();
  test_prefetch_values();
  test_prefetch_early_stop();
  const char *files[] = {"x.safetensors", "x.npy", "x.idx", "x.csv"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(path_in(files[i]));
  rmdir(dir);
  return check_report();
}
